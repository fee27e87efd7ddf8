"""``simpatterns optimize``: search an action that achieves a goal on one scene."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer
from simpatterns.cli_support import err, fail, interrupted, out as console, print_table
from simpatterns.parallel import executor_options




def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


def _scene(template: Optional[str], variant: Optional[int], scene: Optional[str]):
    from simpatterns.simulators.phyre import get_template

    if scene is not None:
        if template is not None:
            _fail("give --scene or --template, not both")
        from simpatterns.envs.scenes import named_scene

        try:
            return named_scene(scene)
        except KeyError as exc:
            _fail(str(exc.args[0]))
    if template is None:
        _fail("give --template T --variant V, or --scene NAME (e.g. --scene buckets)")
    try:
        t = get_template(template)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    if t.num_variants == 0:
        _fail(f"template {t.id} has no shipped variants")
    v = 0 if variant is None else variant
    if not 0 <= v < t.num_variants:
        _fail(f"template {t.id} has variants 0..{t.num_variants - 1}, not {v}")
    return t.variant_scene(v)


def optimize(
    template: Optional[str] = typer.Option(None, "--template", "-t", help="PHYRE template id, e.g. 00000"),
    variant: Optional[int] = typer.Option(None, "--variant", "-v", help="variant of the template (default 0)"),
    scene: Optional[str] = typer.Option(None, "--scene", help="a purpose-built scene instead: 'buckets'"),
    goal: Optional[Path] = typer.Option(None, "--goal", "-g", help="reward program (.rwd); default: the PHYRE task"),
    budget: int = typer.Option(100, "--rollouts", "-n", help="simulated rollouts to spend"),
    sparse: bool = typer.Option(False, "--sparse", help="optimise the program's 0/1 success, not its dense score"),
    method: str = typer.Option("anneal", "--method", help="anneal | random"),
    seed: int = typer.Option(0, "--seed", help="seed of the search"),
    bins: Optional[int] = typer.Option(None, "--bins", help="search the quantised bins^3 action grid"),
    workers: int = typer.Option(1, "--workers", "-j", help="processes evaluating each batch"),
    batch_size: int = typer.Option(1, "--batch-size", help="proposals per annealing round (parallel with -j)"),
    t_start: float = typer.Option(0.1, "--t-start", help="annealing temperature at the start"),
    t_end: float = typer.Option(0.002, "--t-end", help="annealing temperature at the end"),
    schedule: str = typer.Option("geometric", "--schedule", help="geometric | linear"),
    step_size: float = typer.Option(0.15, "--step-size", help="proposal std in the unit action cube"),
    step_decay: float = typer.Option(0.3, "--step-decay", help="factor: final step = step-size x step-decay"),
    settle: Optional[bool] = typer.Option(
        None, "--settle/--no-settle",
        help="end rollouts once everything rests (default: on for scenes without a PHYRE goal)"),
    keep_going: bool = typer.Option(False, "--keep-going", help="spend all --rollouts after a success"),
    gif: Optional[Path] = typer.Option(None, "--gif", help="write the best rollout as a captioned GIF"),
    trace_out: Optional[Path] = typer.Option(None, "--trace", help="write the best rollout's trace (.npz)"),
    out_json: Optional[Path] = typer.Option(None, "--out", "-o",
                                            help="write the result (with the curve) as JSON (folders are created)"),
) -> None:
    """Simulated annealing (or random search) over the red ball's (x, y, r)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from simpatterns.dsl import DSLErrors
    from simpatterns.files import WriteError, atomic_write_json, check_target
    from simpatterns.optimize import (AnnealConfig, CheckpointError, EvaluationLog, Objective, RolloutPool, anneal,
                                      random_search)

    if method not in ("anneal", "random"):
        _fail(f"--method must be anneal or random, got {method!r}")
    if budget < 1:
        _fail("--rollouts must be >= 1")
    if sparse and goal is None:
        _fail("--sparse needs --goal (without a goal the PHYRE task reward is already sparse)")
    sc = _scene(template, variant, scene)
    try:  # before the search: a bad output path fails now, not after it (losing the result)
        for target in (out_json, gif, trace_out):
            if target is not None:
                check_target(target)
    except WriteError as exc:
        _fail(str(exc))
    program_text = None
    if goal is not None:
        try:
            program_text = goal.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"{goal}: cannot read ({exc})")
    if program_text is None and sc.goal is None:
        _fail("this scene has no PHYRE goal; give --goal PROGRAM.rwd")
    reward = "task" if program_text is None else ("success" if sparse else "score")
    try:
        config = AnnealConfig(t_start=t_start, t_end=t_end, schedule=schedule, step_size=step_size,
                              step_decay=step_decay, batch_size=batch_size)
        objective = Objective(sc, program=program_text, reward=reward,
                              stop_when_settled=(sc.goal is None) if settle is None else settle)
    except (ValueError, DSLErrors) as exc:  # bad settings, or a program that does not parse or fit the scene
        typer.echo(str(exc), err=True)  # plain: DSL errors carry caret snippets
        raise typer.Exit(1) from None
    where = f"scene {sc.template}" + (f" variant {sc.variant}" if sc.variant is not None else "")
    console.print(f"{method} on {where}: {str(str(goal) if goal else 'PHYRE task success')} "
                  f"({'sparse 0/1' if reward != 'score' else 'dense score'})")
    console.print(f"{budget} rollouts at most, seed {seed}")
    progress = Progress(TextColumn(method), BarColumn(), MofNCompleteColumn(), TextColumn("best {task.fields[best]}"),
                        TimeElapsedColumn(), console=err,
                        auto_refresh=False)  # no refresh thread: the rollout pool forks safely
    parallel = method == "random" or batch_size > 1  # annealing one proposal at a time has nothing to share
    checkpoint = None
    if out_json is not None:  # every evaluation kept as it finishes: a re-run replays them and goes on
        settings = {"scene": scene, "template": sc.template, "variant": sc.variant, "program": program_text,
                    "reward": reward, "settle": objective.stop_when_settled, "max_steps": objective.max_steps}
        try:
            checkpoint = EvaluationLog(out_json.with_name(out_json.stem + ".evaluations.jsonl"), settings)
        except CheckpointError as exc:
            _fail(str(exc))
    try:
        with progress, RolloutPool(objective, workers if parallel else 1, checkpoint=checkpoint) as pool:
            task = progress.add_task(method, total=budget, best="-")

            def on_progress(done: int, total: int, best: float) -> None:
                progress.update(task, completed=done, best=f"{best:.3f}", refresh=True)

            if method == "anneal":
                res = anneal(objective, budget, seed=seed, config=config, bins=bins, pool=pool,
                             stop_on_success=not keep_going, progress=on_progress)
            else:
                res = random_search(objective, budget, seed=seed, bins=bins, batch_size=max(batch_size, workers),
                                    pool=pool, stop_on_success=not keep_going, progress=on_progress)
            progress.update(task, total=res.samples)
    except KeyboardInterrupt:
        if checkpoint is None:
            interrupted("the search is lost (give -o/--out to keep a checkpoint that a re-run resumes)",
                        resume=False)
        interrupted(f"{len(checkpoint.known)} evaluation(s) kept in {checkpoint.path}")
    if checkpoint is not None and pool.replayed:
        err.print(f"resumed: {pool.replayed} evaluation(s) replayed from {checkpoint.path}")

    table = Table(title="best action")
    for col in ("x", "y", "r", "score", "success", "samples", "first success", "invalid proposals", "seconds"):
        table.add_column(col)
    table.add_row(*(f"{v:.4f}" for v in res.best_action), f"{res.best_score:.3f}", "yes" if res.best_success else "no",
                  str(res.samples), str(res.first_success or "-"), str(res.invalid_proposals), f"{res.seconds:.1f}")
    print_table(table, drop=("seconds", "invalid proposals"))
    trace = res.best_trace
    assert trace is not None
    if objective.reward_program is not None:
        ev = objective.reward_program.evaluate(None, trace, explain=True)
        console.print(str(ev.explain_text()))
    if out_json is not None:
        data = {"scene": sc.template, "variant": sc.variant, "goal": str(goal) if goal else None, "reward": reward,
                "seed": seed, **res.to_json()}
        try:
            atomic_write_json(out_json, data)
        except OSError as exc:  # a WriteError names the user's path
            _fail(str(exc))
        console.print(f"result -> {out_json}")
    if trace_out is not None:
        try:
            trace.save(trace_out)
        except OSError as exc:  # a WriteError names the user's path
            _fail(str(exc))
        console.print(f"best trace -> {trace_out}")
    if gif is not None:
        from simpatterns.annotate.annotator import annotate
        from simpatterns.annotate.plots import captioned_gif
        from simpatterns.dsl import builtin_library

        try:
            captioned_gif(trace, annotate(trace, builtin_library()), gif, stride=4)
        except OSError as exc:
            _fail(str(exc))
        console.print(f"best rollout -> {gif}")


def register(app: typer.Typer) -> None:
    app.command("optimize")(executor_options(optimize))
