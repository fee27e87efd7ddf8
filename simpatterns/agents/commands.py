"""``simpatterns agent ...``: evaluate agents on PHYRE tasks under PHYRE's protocol, and report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simpatterns.llm.commands import (
    APIKey,
    BaseURL,
    Grammar,
    LLMSpec,
    MaxRequests,
    MaxTotalTokens,
    Model,
    Retries,
    Timeout,
)
from simpatterns.parallel import executor_options

agent_app = typer.Typer(help="Agents on PHYRE tasks: PHYRE's folds and AUCCESS, baselines, language models.",
                        no_args_is_help=True)


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _programs(path: Optional[Path]) -> dict[str, str]:
    """Reward programs for the annealer: a .rwd file per template (``00007.rwd``) or task (``00007-042.rwd``)."""
    if path is None:
        return {}
    if not path.is_dir():
        _fail(f"--programs {path}: not a folder of .rwd files")
    from simpatterns.dsl import DSLErrors, RewardProgram, builtin_library

    out = {}
    for f in sorted(path.glob("*.rwd")):
        stem = f.stem
        template, _, variant = stem.partition("-")
        if not template.isdigit() or (variant and not variant.isdigit()):
            _fail(f"{f}: name it TEMPLATE.rwd or TEMPLATE-VARIANT.rwd (e.g. 00007.rwd, 00007-042.rwd)")
        key = f"{int(template):05d}" + (f":{int(variant):03d}" if variant else "")
        try:  # parse and check now, so a bad file stops the run before any episode (bodies: per task)
            out[key] = RewardProgram.load(f, builtin_library()).text
        except DSLErrors as exc:
            _fail(str(exc))
    if not out:
        _fail(f"--programs {path}: no .rwd files in it")
    return out


@agent_app.command("eval")
@executor_options
def eval_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (created; an existing run resumes)."),
    agents: str = typer.Option("random,memory,oracle,anneal", "--agents", "-a",
                               help="Comma list of: random, memory, oracle, anneal, anneal-continuous, llm."),
    setup: str = typer.Option("ball_within_template", "--setup", help="ball_within_template | ball_cross_template"),
    seeds: str = typer.Option("0", "--seeds", help="Fold seeds, e.g. 0 or 0-9 or 0,3."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Test these tasks (e.g. 00000:003,00007:042) "
                                                              "instead of a fold's test split."),
    per_template: Optional[int] = typer.Option(None, "--per-template", help="Test only the first N tasks of each "
                                                                             "template (in id order)."),
    train_per_template: Optional[int] = typer.Option(None, "--train-per-template",
                                                     help="Train the memory agent on N tasks per template."),
    budget: int = typer.Option(100, "--budget", "-n", help="Attempts per task (at most 100, PHYRE's cap)."),
    bins: int = typer.Option(6, "--bins", help="Menu grid: bins per axis of (x, y, r)."),
    scan: str = typer.Option("full", "--scan", help="full: simulate every menu cell once; first: stop at the "
                                                    "first solving cell."),
    programs: Optional[Path] = typer.Option(None, "--programs", help="Annealer's reward programs: a folder of "
                                                                     "TEMPLATE.rwd / TEMPLATE-VARIANT.rwd (default: "
                                                                     "the task's goal as a dense program)."),
    feedback: str = typer.Option("annotation", "--feedback", help="llm: comma list of outcome, frames, annotation, "
                                                                  "frames+annotation, summary."),
    history: str = typer.Option("full", "--history", help="llm: full | windowed | stateless."),
    window: int = typer.Option(3, "--window", help="llm: attempts kept with feedback in windowed history."),
    scene_view: str = typer.Option("objects", "--scene-view", help="llm: objects | image | objects+image."),
    temperature: float = typer.Option(0.0, "--temperature", help="llm sampling temperature."),
    max_tokens: int = typer.Option(1024, "--max-tokens", help="llm: tokens per answer."),
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    grammar: Grammar = "off",
    timeout: Timeout = None,
    retries: Retries = 4,
    max_requests: MaxRequests = None,
    max_total_tokens: MaxTotalTokens = None,
    cache: Optional[Path] = typer.Option(None, "--cache", help="Menu cache (default ~/.cache/simpatterns/menus)."),
    workers: int = typer.Option(1, "--workers", "-j", help="Processes for menus and simulated agents."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the report when done."),
) -> None:
    """Run agents on test tasks (resumable); prints the AUCCESS table."""
    from simpatterns.agents.feedback import FEEDBACK
    from simpatterns.agents.folds import parse_seeds
    from simpatterns.agents.runner import TRANSCRIPT_FILE, EvalConfig, RunError, evaluate, make_conditions
    from simpatterns.agents.tasks import TaskError
    from simpatterns.llm.errors import LLMError

    names = _split(agents)
    fbs = _split(feedback)
    bad = [f for f in fbs if f not in FEEDBACK]
    if bad:
        _fail(f"--feedback {bad[0]!r} is not one of {', '.join(FEEDBACK)}")
    try:
        config = EvalConfig(setup=None if tasks else setup, seeds=tuple(parse_seeds(seeds)),
                            tasks=tuple(_split(tasks)) if tasks else None, per_template=per_template,
                            train_per_template=train_per_template, budget=budget, bins=bins, scan=scan)
        llm_opts = {"history": history, "window": window, "scene_view": scene_view, "temperature": temperature,
                    "max_tokens": max_tokens}
        conditions = make_conditions(names, fbs, llm_opts, _programs(programs))
    except (ValueError, TaskError) as exc:
        _fail(str(exc))

    def client_factory(run_dir: Path):
        from simpatterns.llm.commands import client_from_options

        return client_from_options(llm, base_url, model, api_key, grammar, run_dir / TRANSCRIPT_FILE, timeout,
                                   retries, max_requests, max_total_tokens)

    try:
        outcome = evaluate(out, config, conditions, workers=workers, cache_dir=cache, client_factory=client_factory,
                           progress=True, log=lambda s: typer.echo(s, err=True))
    except KeyboardInterrupt:
        typer.echo(f"stopped: finished episodes are in {out}; run the same command again to resume", err=True)
        raise typer.Exit(130)
    except (RunError, ValueError, TaskError, LLMError) as exc:
        _fail(f"{exc}; finished episodes are kept in {out}" if isinstance(exc, LLMError) else str(exc), 1)
    typer.echo(f"{outcome.done} episodes run, {outcome.already} already in {out}")
    if report:
        _report(out, None, (10,))


def _report(run: Path, out: Optional[Path], caps: tuple[int, ...]) -> None:
    from simpatterns.agents.report import markdown_table, write_report
    from simpatterns.agents.runner import RunError

    try:
        r = write_report(run, out, caps)
    except (RunError, ValueError, OSError) as exc:
        _fail(str(exc), 1)
    typer.echo(markdown_table(r["head"], r["rows"]))
    typer.echo(f"report -> {r['dir'] / 'report.md'}")


@agent_app.command("report")
def report_cmd(
    run: Path = typer.Argument(..., help="Run directory of `simpatterns agent eval`."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the report here (default: the run)."),
    cap: list[int] = typer.Option([10], "--cap", help="Also report AUCCESS@K for this K (repeatable)."),
) -> None:
    """The AUCCESS table and the pictures of a run (report.md, summary.json, two PNGs)."""
    bad = [k for k in cap if not 1 <= k <= 100]
    if bad:
        _fail(f"--cap {bad[0]} must be in 1..100")
    _report(run, out, tuple(cap))


@agent_app.command("menu")
def menu_cmd(
    task: str = typer.Argument(..., help="Task id, e.g. 00007:042."),
    bins: int = typer.Option(6, "--bins"),
    scan: str = typer.Option("full", "--scan"),
    cache: Optional[Path] = typer.Option(None, "--cache"),
    solutions: bool = typer.Option(False, "--solutions", help="Mark the choices that solve the task."),
) -> None:
    """Print a task's action menu, as a language model sees it."""
    from simpatterns.agents.menu import SOLVED, MenuError, MenuStore
    from simpatterns.agents.tasks import TaskError

    try:
        menu = MenuStore(cache, bins, scan).get(task)
    except (TaskError, MenuError, ValueError) as exc:
        _fail(str(exc))
    for k, c in enumerate(menu.choices):
        mark = "  <- solves" if solutions and menu.status(k) == SOLVED else ""
        extra = "  (the variant's stored solution, added: no grid cell solves)" if c.cell is None else ""
        typer.echo(c.text() + mark + extra)
    typer.echo(f"{len(menu)} choices of {menu.grid_cells} cells; {len(menu.solving)} solve", err=True)


@agent_app.command("folds")
def folds_cmd(
    setup: str = typer.Option("ball_within_template", "--setup"),
    seeds: str = typer.Option("0-9", "--seeds"),
) -> None:
    """Sizes of PHYRE's folds on our tasks (train / dev / test)."""
    from simpatterns.agents.folds import get_fold, parse_seeds

    try:
        for s in parse_seeds(seeds):
            f = get_fold(setup, s)
            templates = len({t.split(":")[0] for t in f.test})
            typer.echo(f"{setup} seed {s}: train {len(f.train)}, dev {len(f.dev)}, test {len(f.test)} "
                       f"({templates} templates)")
    except ValueError as exc:
        _fail(str(exc))


def register(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")
