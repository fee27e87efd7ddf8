"""``simpatterns optimize``: search an action that achieves a goal on one scene."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer

from simpatterns.cli_support import err, executor_options, fail, interrupted, out as console, print_table
from simpatterns.parallel import LOCAL, Backend




def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


def optimize(
    template: Optional[str] = typer.Option(None, "--template", "-t", help="PHYRE template id, e.g. 00000"),
    variant: Optional[int] = typer.Option(None, "--variant", "-v", help="variant of the template (default 0)"),
    scene: Optional[str] = typer.Option(None, "--scene", help="a purpose-built scene instead: 'buckets'"),
    goal: Optional[Path] = typer.Option(None, "--goal", "-g", help="reward program (.rwd); default: the PHYRE task"),
    budget: int = typer.Option(100, "--rollouts", help="simulated rollouts to spend"),
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
    gif_size: int = typer.Option(256, "--gif-size", min=64, help="side of the GIF's scene in pixels"),
    trace_out: Optional[Path] = typer.Option(None, "--trace", help="write the best rollout's trace (.npz)"),
    out_json: Optional[Path] = typer.Option(None, "--out", "-o",
                                            help="write the result (with the curve) as JSON (folders are created)"),
    backend: Backend = LOCAL,
) -> None:
    """Simulated annealing (or random search) over the red ball's (x, y, r)."""
    from rich.table import Table

    from simpatterns.dsl import DSLErrors
    from simpatterns.optimize import AnnealConfig
    from simpatterns.optimize.run import OptimizeError, Outputs, SearchSettings, optimize_scene

    bar = _SearchBar(method)
    try:
        settings = SearchSettings(method, budget, seed, sparse, bins, workers, AnnealConfig(
            t_start=t_start, t_end=t_end, schedule=schedule, step_size=step_size, step_decay=step_decay,
            batch_size=batch_size), settle, keep_going)
        with bar:
            report = optimize_scene(scene, goal, template=template, variant=variant, settings=settings,
                                    outputs=Outputs(out_json, trace_out, gif, gif_size), backend=backend,
                                    on_start=lambda r: console.print(r.header(settings, goal)), progress=bar)
            bar.ended(report.result.samples if report.result is not None else None)
    except OptimizeError as exc:
        _fail(str(exc))
    except (ValueError, DSLErrors) as exc:  # bad settings, or a program that does not parse or fit the scene
        typer.echo(str(exc), err=True)  # plain: DSL errors carry caret snippets
        raise typer.Exit(1) from None
    if report.interrupted:
        if report.checkpoint is None:
            interrupted("the search is lost (give -o/--out to keep a checkpoint that a re-run resumes)", resume=False)
        interrupted(f"{report.kept} evaluation(s) kept in {report.checkpoint}")
    if report.replayed:
        err.print(f"resumed: {report.replayed} evaluation(s) replayed from {report.checkpoint}")
    res = report.result
    table = Table(title="best action")
    for col in ("x", "y", "r", "score", "success", "samples", "first success", "invalid proposals", "seconds"):
        table.add_column(col)
    table.add_row(*(f"{v:.4f}" for v in res.best_action), f"{res.best_score:.3f}", "yes" if res.best_success else "no",
                  str(res.samples), str(res.first_success or "-"), str(res.invalid_proposals), f"{res.seconds:.1f}")
    print_table(table, drop=("seconds", "invalid proposals"))
    if report.explain is not None:
        console.print(report.explain)
    for what, path in report.written:
        console.print(f"{what} -> {path}")


class _SearchBar:
    """The search's progress bar on stderr, drawn from the first batch on."""

    def __init__(self, method: str):
        self.method = method
        self._progress = None
        self._task = None

    def __enter__(self) -> "_SearchBar":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def ended(self, samples: int | None) -> None:
        """The search stopped after ``samples`` rollouts (a success ends it early)."""
        if self._progress is not None and samples is not None:
            self._progress.update(self._task, total=samples)

    def __call__(self, done: int, total: int, best: float) -> None:
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn(self.method), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("best {task.fields[best]}"), TimeElapsedColumn(), console=err,
                                      auto_refresh=False)  # no refresh thread: the rollout pool forks safely
            self._task = self._progress.add_task(self.method, total=total, best="-")
            self._progress.start()
        self._progress.update(self._task, completed=done, total=total, best=f"{best:.3f}", refresh=True)


def register(app: typer.Typer) -> None:
    app.command("optimize")(executor_options(optimize))
