"""``simpatterns agent ...``: evaluate agents on PHYRE tasks under PHYRE's protocol, and report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from simpatterns.cli_support import executor_options, fail, interrupted
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
from simpatterns.parallel import LOCAL, Backend

agent_app = typer.Typer(help="Agents on PHYRE tasks: PHYRE's folds and AUCCESS, baselines, language models.",
                        no_args_is_help=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


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


# options shared by `eval` and the library studies
Out = Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; an existing run resumes).")]
Setup = Annotated[str, typer.Option("--setup", help="ball_within_template | ball_cross_template")]
Seeds = Annotated[str, typer.Option("--seeds", help="Fold seeds, e.g. 0 or 0-9 or 0,3.")]
Tasks = Annotated[Optional[str], typer.Option("--tasks", help="Test these tasks (e.g. 00000:003,00007:042) instead "
                                                              "of a fold's test split.")]
PerTemplate = Annotated[Optional[int], typer.Option("--per-template", help="Test only the first N tasks of each "
                                                                           "template (in id order).")]
Budget = Annotated[int, typer.Option("--attempts", help="Attempts per task (at most 100, PHYRE's cap).")]
Bins = Annotated[int, typer.Option("--bins", help="Menu grid: bins per axis of (x, y, r).")]
Scan = Annotated[str, typer.Option("--scan", help="full: simulate every menu cell once; first: stop at the first "
                                                  "solving cell.")]
History = Annotated[str, typer.Option("--history", help="llm: full | windowed | stateless.")]
Window = Annotated[int, typer.Option("--window", help="llm: attempts kept with feedback in windowed history.")]
SceneView = Annotated[str, typer.Option("--scene-view", help="llm: objects | image | objects+image.")]
BudgetChars = Annotated[int, typer.Option("--max-chars", help="llm: characters of annotation (or raw state) per "
                                                                 "attempt.")]
Temperature = Annotated[float, typer.Option("--temperature", help="llm sampling temperature.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="llm: tokens per answer.")]
ChoiceGrammar = Annotated[bool, typer.Option(
    "--choice-grammar/--free-answer", help="llm: constrain each answer to one 'CHOICE: <id>' line of the menu "
    "(sent wherever the server takes a grammar; not with --grammar off); for small models.")]
Cache = Annotated[Optional[Path], typer.Option("--cache", help="Menu cache (default $SIMPATTERNS_CACHE/menus).")]
Workers = Annotated[int, typer.Option("--workers", "-j", help="Processes for menus and simulated agents.")]


def _grammar_opt(choice_grammar: bool) -> dict:
    return {"choice_grammar": True} if choice_grammar else {}  # runs made before the option resume as they were


def _config(setup: str, seeds: str, tasks: Optional[str], per_template: Optional[int],
            train_per_template: Optional[int], budget: int, bins: int, scan: str):
    from simpatterns.agents.folds import parse_seeds
    from simpatterns.agents.runner import EvalConfig

    return EvalConfig(setup=None if tasks else setup, seeds=tuple(parse_seeds(seeds)),
                      tasks=tuple(_split(tasks)) if tasks else None, per_template=per_template,
                      train_per_template=train_per_template, budget=budget, bins=bins, scan=scan)


def _client_factory(llm, base_url, model, api_key, grammar, timeout, retries, max_requests, max_total_tokens,
                    opened: list, choice_grammar: bool = False, images: bool = False):
    """Clients for the runs; ``--choice-grammar`` sends its grammar wherever the server takes one
    (``--grammar off`` contradicts it), and a run that shows images first establishes that the model
    takes them."""
    if choice_grammar and grammar == "off":
        _fail("--choice-grammar constrains answers with a grammar: it cannot go with --grammar off")

    def make(run_dir: Path):
        from simpatterns.agents.runner import TRANSCRIPT_FILE
        from simpatterns.llm.commands import client_from_options

        client = client_from_options(llm, base_url, model, api_key, grammar, run_dir / TRANSCRIPT_FILE, timeout,
                                     retries, max_requests, max_total_tokens)
        opened.append(client)
        if choice_grammar and not client.backend.grammar_enabled:
            typer.echo(f"note: --choice-grammar: {client.server_kind} takes no grammar here; answers are "
                       "decoded unconstrained and parsed", err=True)
        if images:
            client.require_images()
        return client

    return make


def _shows_images(scene_view: str, feedback: list[str] | str) -> bool:
    views = feedback if isinstance(feedback, list) else [feedback]
    return "image" in scene_view or any("frames" in f for f in views)


@agent_app.command("eval")
@executor_options
def eval_cmd(
    out: Out,
    agents: str = typer.Option("random,memory,oracle,anneal", "--agents",
                               help="Comma list of: random, memory, oracle, anneal, anneal-continuous, llm, "
                                    "value:PATH (a model from `simpatterns value train`)."),
    setup: Setup = "ball_within_template",
    seeds: Seeds = "0",
    tasks: Tasks = None,
    per_template: PerTemplate = None,
    train_per_template: Optional[int] = typer.Option(None, "--train-per-template",
                                                     help="Train the memory agent on N tasks per template."),
    budget: Budget = 100,
    bins: Bins = 6,
    scan: Scan = "full",
    programs: Optional[Path] = typer.Option(None, "--programs", help="Annealer's reward programs: a folder of "
                                                                     "TEMPLATE.rwd / TEMPLATE-VARIANT.rwd (default: "
                                                                     "the task's goal as a dense program)."),
    feedback: str = typer.Option("annotation", "--feedback", help="llm: comma list of outcome, frames, annotation, "
                                                                  "frames+annotation, state, summary."),
    history: History = "full",
    window: Window = 3,
    scene_view: SceneView = "objects",
    budget_chars: BudgetChars = 3000,
    temperature: Temperature = 0.0,
    max_tokens: MaxTokens = 1024,
    choice_grammar: ChoiceGrammar = False,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    grammar: Grammar = "auto",
    timeout: Timeout = None,
    retries: Retries = 4,
    max_requests: MaxRequests = None,
    max_total_tokens: MaxTotalTokens = None,
    cache: Cache = None,
    workers: Workers = 1,
    report: bool = typer.Option(True, "--report/--no-report", help="Write the report when done."),
    backend: Backend = LOCAL,
) -> None:
    """Run agents on test tasks (resumable); prints the AUCCESS table."""
    from simpatterns.agents.feedback import FEEDBACK
    from simpatterns.agents.runner import RunError, evaluate, make_conditions
    from simpatterns.agents.tasks import TaskError
    from simpatterns.llm.errors import LLMError

    names = _split(agents)
    fbs = _split(feedback)
    bad = [f for f in fbs if f not in FEEDBACK]
    if bad:
        _fail(f"--feedback {bad[0]!r} is not one of {', '.join(FEEDBACK)}")
    try:
        config = _config(setup, seeds, tasks, per_template, train_per_template, budget, bins, scan)
        llm_opts = {"history": history, "window": window, "scene_view": scene_view, "budget_chars": budget_chars,
                    "temperature": temperature, "max_tokens": max_tokens,
                    **_grammar_opt(choice_grammar)}
        conditions = make_conditions(names, fbs, llm_opts, _programs(programs))
    except (ValueError, TaskError) as exc:
        _fail(str(exc))

    opened: list = []
    try:
        outcome = evaluate(out, config, conditions, workers=workers, backend=backend, cache_dir=cache,
                           client_factory=_client_factory(llm, base_url, model, api_key, grammar, timeout, retries,
                                                          max_requests, max_total_tokens, opened, choice_grammar,
                                                          "llm" in names and _shows_images(scene_view, fbs)),
                           progress=True, log=lambda s: typer.echo(s, err=True))
    except KeyboardInterrupt:
        interrupted(f"finished episodes are in {out}")
    except (RunError, ValueError, TaskError, LLMError) as exc:
        _fail(f"{exc}; finished episodes are kept in {out}" if isinstance(exc, LLMError) else str(exc), 1)
    finally:
        for c in opened:
            c.close()
    typer.echo(f"{outcome.done} episodes run, {outcome.already} already in {out}")
    if report:
        _report(out, None, (10,))


def _report(run: Path, out: Optional[Path], caps: tuple[int, ...]) -> None:
    from simpatterns.agents.report import is_study, markdown_table, write_report, write_study_report
    from simpatterns.agents.runner import RunError

    try:
        if is_study(run):
            md = write_study_report(run, out)
            typer.echo(f"report -> {md}")
            return
        r = write_report(run, out, caps)
    except (RunError, ValueError, OSError) as exc:
        _fail(str(exc), 1)
    typer.echo(markdown_table(r["head"], r["rows"]))
    typer.echo(f"report -> {r['dir'] / 'report.md'}")


@agent_app.command("report")
def report_cmd(
    run: Path = typer.Argument(..., help="Run directory of `simpatterns agent eval`, or a study directory of "
                                         "`agent library-curve` / `agent importance`."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the report here (default: the run)."),
    cap: list[int] = typer.Option([10], "--cap", help="Also report AUCCESS@K for this K (repeatable)."),
) -> None:
    """The AUCCESS table and the pictures of a run (report.md, summary.json, two PNGs), or a study's page."""
    bad = [k for k in cap if not 1 <= k <= 100]
    if bad:
        _fail(f"--cap {bad[0]} must be in 1..100")
    _report(run, out, tuple(cap))


# ------------------------------------------------------------------ library studies
StudyOut = Annotated[Path, typer.Option("--out", "-o", help="Study directory (created; an existing study resumes).")]
StudyFeedback = Annotated[str, typer.Option("--feedback", help="The condition: annotation, frames+annotation or "
                                                               "summary (feedback that shows the annotation).")]
StudyBudget = Annotated[int, typer.Option("--attempts", help="Attempts per task (at most 100).")]
Cap = Annotated[int, typer.Option("--cap", help="Score views by AUCCESS@K (100: PHYRE's AUCCESS).")]


def _study_setup(feedback: str, setup: str, seeds: str, tasks: Optional[str], per_template: Optional[int],
                 budget: int, bins: int, scan: str, history: str, window: int, scene_view: str, budget_chars: int,
                 temperature: float, max_tokens: int, choice_grammar: bool):
    from simpatterns.agents.runner import make_conditions
    from simpatterns.agents.tasks import TaskError

    if feedback not in ("annotation", "frames+annotation", "summary"):
        _fail(f"--feedback {feedback!r}: a library study needs feedback that shows the annotation "
              "(annotation, frames+annotation or summary)")
    try:
        config = _config(setup, seeds, tasks, per_template, None, budget, bins, scan)
        [cond] = make_conditions(["llm"], [feedback], {"history": history, "window": window, "scene_view": scene_view,
                                                       "budget_chars": budget_chars, "temperature": temperature,
                                                       "max_tokens": max_tokens, **_grammar_opt(choice_grammar)})
    except (ValueError, TaskError) as exc:
        _fail(str(exc))
    return config, cond


def _run_study(out: Path, make_client, study) -> dict:
    from simpatterns.agents.runner import RunError
    from simpatterns.agents.tasks import TaskError
    from simpatterns.llm.errors import LLMError

    opened: list = []
    try:
        client = make_client(out)
        opened.append(client)
        return study(client)
    except KeyboardInterrupt:
        interrupted(f"finished views are in {out}")
    except (RunError, ValueError, TaskError, LLMError) as exc:
        _fail(str(exc), 1)
    finally:
        for c in opened:
            c.close()


@agent_app.command("library-curve")
@executor_options
def library_curve_cmd(
    out: StudyOut,
    sizes: str = typer.Option("0,1,2,4,8,16,all", "--sizes", help="Library sizes, e.g. 0,1,2,4,8,16,all."),
    trials: int = typer.Option(3, "--subsets", min=1, help="Random subsets per size."),
    seed: int = typer.Option(0, "--seed", help="Seed of the subsets."),
    feedback: StudyFeedback = "annotation",
    setup: Setup = "ball_within_template",
    seeds: Seeds = "0",
    tasks: Tasks = None,
    per_template: PerTemplate = None,
    budget: StudyBudget = 10,
    bins: Bins = 6,
    scan: Scan = "full",
    history: History = "full",
    window: Window = 3,
    scene_view: SceneView = "objects",
    budget_chars: BudgetChars = 3000,
    temperature: Temperature = 0.0,
    max_tokens: MaxTokens = 1024,
    choice_grammar: ChoiceGrammar = False,
    cap: Cap = 100,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    grammar: Grammar = "auto",
    timeout: Timeout = None,
    retries: Retries = 4,
    max_requests: MaxRequests = None,
    max_total_tokens: MaxTotalTokens = None,
    cache: Cache = None,
    workers: Workers = 1,
    backend: Backend = LOCAL,
) -> None:
    """AUCCESS against library size (§4.2): the language-model agent shown random pattern subsets of growing size."""
    from simpatterns.agents.report import markdown_table, write_study_report
    from simpatterns.agents.studies import library_curve
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.qa.studies import parse_sizes

    config, cond = _study_setup(feedback, setup, seeds, tasks, per_template, budget, bins, scan, history, window,
                                scene_view, budget_chars, temperature, max_tokens, choice_grammar)
    lib = PatternLibrary.builtin()
    try:
        size_list = parse_sizes(sizes, len(lib))
    except ValueError as exc:
        _fail(str(exc))
    make = _client_factory(llm, base_url, model, api_key, grammar, timeout, retries, max_requests, max_total_tokens,
                           [], choice_grammar, _shows_images(scene_view, feedback))
    curve = _run_study(out, make, lambda client: library_curve(
        config, cond, client, out, size_list, trials, seed, cap=cap, library=lib, cache_dir=cache, workers=workers,
        backend=backend,
        log=lambda s: typer.echo(s, err=True)))
    m = curve["metric"]
    typer.echo(markdown_table(["patterns shown", "trials", f"mean {m} %", "95% interval"],
                              [[str(p["size"]), str(p["trials"]), f"{100 * p['mean']:.1f}",
                                f"{100 * p['ci'][0]:.1f}-{100 * p['ci'][1]:.1f}"] for p in curve["summary"]]))
    typer.echo(f"report -> {write_study_report(out)}")


@agent_app.command("importance")
@executor_options
def importance_cmd(
    out: StudyOut,
    labels: Optional[str] = typer.Option(None, "--hold-out", help="Patterns to hold out (comma-separated); default "
                                                                "all."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Runs per point with different request seeds."),
    feedback: StudyFeedback = "annotation",
    setup: Setup = "ball_within_template",
    seeds: Seeds = "0",
    tasks: Tasks = None,
    per_template: PerTemplate = None,
    budget: StudyBudget = 10,
    bins: Bins = 6,
    scan: Scan = "full",
    history: History = "full",
    window: Window = 3,
    scene_view: SceneView = "objects",
    budget_chars: BudgetChars = 3000,
    temperature: Temperature = 0.0,
    max_tokens: MaxTokens = 1024,
    choice_grammar: ChoiceGrammar = False,
    cap: Cap = 100,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    grammar: Grammar = "auto",
    timeout: Timeout = None,
    retries: Retries = 4,
    max_requests: MaxRequests = None,
    max_total_tokens: MaxTotalTokens = None,
    cache: Cache = None,
    workers: Workers = 1,
    backend: Backend = LOCAL,
) -> None:
    """Leave-one-out importance (§4.4) on agents: drop a pattern and its dependents; importance = % AUCCESS drop."""
    from simpatterns.agents.report import markdown_table, write_study_report
    from simpatterns.agents.studies import importance
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.qa.studies import check_labels

    config, cond = _study_setup(feedback, setup, seeds, tasks, per_template, budget, bins, scan, history, window,
                                scene_view, budget_chars, temperature, max_tokens, choice_grammar)
    lib = PatternLibrary.builtin()
    held = _split(labels) if labels else None
    try:
        check_labels(lib, held)
    except ValueError as exc:
        _fail(str(exc))
    make = _client_factory(llm, base_url, model, api_key, grammar, timeout, retries, max_requests, max_total_tokens,
                           [], choice_grammar, _shows_images(scene_view, feedback))
    imp = _run_study(out, make, lambda client: importance(
        config, cond, client, out, held, repeats, cap=cap, library=lib, cache_dir=cache, workers=workers,
        backend=backend,
        log=lambda s: typer.echo(s, err=True)))
    m = imp["metric"]
    typer.echo(f"full library: {m} {100 * imp['baseline']:.1f} %")
    typer.echo(markdown_table(["pattern", "removed", f"{m} %", "importance %"],
                              [[r["label"], str(len(r["removed"])), f"{100 * r[m]:.1f}", f"{r['importance']:+.1f}"]
                               for r in sorted(imp["patterns"], key=lambda r: -r["importance"])]))
    typer.echo(f"report -> {write_study_report(out)}")


@agent_app.command("menu")
def menu_cmd(
    task: str = typer.Argument(..., help="Task id, e.g. 00007:042."),
    bins: int = typer.Option(6, "--bins", help="Menu grid: bins per axis of (x, y, r)."),
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


@agent_app.command("phyre-cache")
@executor_options
def phyre_cache_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Cache folder (default: the PHYRE cache folder for "
                                                                 "--action-count, ball tier; for 100000 it is where "
                                                                 "phyre_compat.get_default_100k_cache looks)."),
    actions: int = typer.Option(100000, "--action-count", help="How many of PHYRE's actions for --seed."),
    seed: int = typer.Option(42, "--seed", help="Seed of PHYRE's action list (42: PHYRE's simulation cache)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Comma list of task ids (default: every task)."),
    workers: Workers = 1,
    backend: Backend = LOCAL,
) -> None:
    """Simulate PHYRE's cached action list on our tasks: a SimulationCache for code written for PHYRE."""
    from simpatterns.agents.phyre_compat.simulation_cache import build_simulation_cache, get_cache_folder
    from simpatterns.agents.tasks import TaskError, all_task_ids

    ids = _split(tasks) if tasks else list(all_task_ids())
    folder = out if out is not None else get_cache_folder(actions) / "ball"
    try:
        cache = build_simulation_cache(folder, ids, actions, seed=seed, workers=workers, progress="phyre cache",
                                       backend=backend)
    except KeyboardInterrupt:
        interrupted("nothing written (a cache is written whole)", resume=False)
    except (TaskError, ValueError) as exc:
        _fail(str(exc))
    solved = sum(int((cache.load_simulation_states(t) == 1).any()) for t in cache.task_ids)
    typer.echo(f"{len(cache)} actions x {len(cache.task_ids)} tasks -> {folder} "
               f"({solved} tasks solved by at least one action)")


def register(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")
