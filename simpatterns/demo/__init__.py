"""``simpatterns demo``: the whole pipeline on a fresh install, no LLM and no network.

The pipeline is `simpatterns.demo.pipeline.run_demo`; this module shows its
steps as they are done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simpatterns.cli_support import executor_options, fail, print_table
from simpatterns.parallel import LOCAL, Backend

SHOWN_LINES = 28  # of the annotation text; the rest is in annotation.txt


def demo(
    out: Path = typer.Option(Path("demo-report"), "--out", help="report folder"),
    seed: int = typer.Option(0, "--seed", help="seed of the data set and the search"),
    budget: int = typer.Option(60, "--rollouts", help="simulated rollouts per annealing run"),
    trials: int = typer.Option(6, "--trials", help="seeds per arm in the dense-vs-sparse comparison (0: skip)"),
    workers: int = typer.Option(2, "--workers", "-j", help="processes for rollouts, annotation and trials"),
    backend: Backend = LOCAL,
) -> None:
    """The end-to-end pipeline on a fresh install: dataset, annotation, reward program, annealing, report."""
    from simpatterns.demo.pipeline import DemoError, run_demo

    console = Console()
    try:
        report = run_demo(out, seed=seed, budget=budget, trials=trials, workers=workers, backend=backend,
                          on_event=lambda event: _show(console, event))
    except DemoError as exc:
        fail(str(exc))
    console.print(f"report -> {escape(str(report.readme))} ({report.seconds:.1f} s)")


def _show(console: Console, event: Any) -> None:
    """Print one step's start or result."""
    from simpatterns.demo import pipeline as p

    if isinstance(event, p.StepStarted):
        console.rule(f"[bold]{event.title}[/bold]  ({event.seconds:.1f} s)")
    elif isinstance(event, p.DatasetDone):
        console.print(f"{len(event.rows)} rollouts of templates {', '.join(event.templates)} -> "
                      f"{escape(str(event.folder))}/")
    elif isinstance(event, p.AnnotationDone):
        table = Table(title=f"{event.patterns} patterns, {event.events} events")
        for col in ("rollout", "frames", "events", "most frequent patterns", "solved"):
            table.add_column(col)
        for file, frames, events, top, solved in event.rollouts:
            table.add_row(file, str(frames), str(events), top, "yes" if solved else "no")
        print_table(table, console)  # the rollout column is never cut
    elif isinstance(event, p.TextDone):
        console.print(escape(event.excerpt(SHOWN_LINES)))
    elif isinstance(event, p.ProgramDone):
        _show_program(console, event)
    elif isinstance(event, p.AnnealDone):
        best, base = event.dense, event.sparse
        console.print(
            f"dense program reward: best action {[round(v, 3) for v in best.best_action]}, score "
            f"{best.best_score:.3f}, found after {best.first_success or best.samples} of {event.budget} samples; "
            f"green ball ends {event.distance:.1f} px from black jar {p.ANNEAL_GOAL}: "
            f"[bold]{'SUCCESS' if best.best_goal_success else 'failure'}[/bold]")
        console.print(f"sparse 0/1 reward, same seed: {'success' if base.best_goal_success else 'failure'} "
                      f"after {base.samples} samples")
        console.print(escape(event.explain))
    elif isinstance(event, p.ComparisonDone):
        console.print(f"{event.trials} more seeds at budget {event.budget}: dense program {event.dense}/{event.trials} "
                      f"successes, sparse reward {event.sparse}/{event.trials} "
                      "(benchmarks/anneal_dense_vs_sparse.py runs the full experiment)")


def _show_program(console: Console, event: Any) -> None:
    console.print(f"goal: {event.goal}\n" + escape(event.program.split("\n", 1)[1]))
    table = Table(title="reward program on the dataset")
    for col in ("rollout", "PHYRE solved", "program success", "dense score",
                *[f"c{k + 1}" for k in range(event.clauses)]):
        table.add_column(col)
    for e in event.rollouts:
        table.add_row(e["rollout"], "yes" if e["solved"] else "no", "yes" if e["success"] else "no",
                      f"{e['score']:.3f}", *[f"{c:.2f}" for c in e["clauses"]])
    print_table(table, console)  # the rollout column is never cut


def register(app: typer.Typer) -> None:
    app.command("demo")(executor_options(demo))
