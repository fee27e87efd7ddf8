"""CLI: ``simpatterns reward check PROGRAM`` and ``simpatterns reward eval PROGRAM TRACES...``.

Further ``reward`` subcommands (e.g. ``compile``: NL goal -> program) attach
to the module-level `reward_app` with ``@reward_app.command("compile")``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()

reward_app = typer.Typer(
    name="reward",
    help="Reward programs (the DSL of paper §3.3): check them, evaluate them on traces.",
    no_args_is_help=True,
)

LIBRARY_HELP = "'builtin', 'builtin:3d', a library directory, or 'none' to skip pattern checks"


def _library(spec: str):
    if spec.lower() == "none":
        return None
    from simpatterns.detectors.commands import open_library

    return open_library(spec)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        console.print(f"[red]error:[/red] {escape(str(path))}: cannot read ({escape(str(exc))})")
        raise typer.Exit(2)


def _print_errors(errors) -> None:
    # plain print: the messages carry carets that rich markup must not touch
    typer.echo(str(errors), err=False)


@reward_app.command("check")
def check_cmd(
    program: Path = typer.Argument(..., help="reward program file (.rwd)"),
    library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_HELP),
    bodies: Optional[str] = typer.Option(None, "--bodies", help="comma-separated body names to check against"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="check body names against this trace (.npz)"),
    as_json: bool = typer.Option(False, "--json", help="print errors as JSON lines"),
    canonical: bool = typer.Option(False, "--format", help="print the canonical form of a valid program"),
) -> None:
    """Parse and check a program; print every error with its position. Exit 1 on errors."""
    from simpatterns.dsl import DSLError, check, format_program, parse

    text = _read(program)
    names: list[str] | None = [b.strip() for b in bodies.split(",") if b.strip()] if bodies else None
    if trace is not None:
        names = (names or []) + _load_trace(trace).names
    lib = _library(library)
    try:
        parsed = parse(text, filename=str(program))
        errors = check(parsed, lib, names)
    except DSLError as exc:
        parsed, errors = None, [exc]
    if as_json:
        for e in errors:
            typer.echo(json.dumps(e.to_json()))
    elif errors:
        from simpatterns.dsl import DSLErrors

        _print_errors(DSLErrors(errors))
    if errors:
        raise typer.Exit(1)
    assert parsed is not None
    if canonical:
        typer.echo(format_program(parsed), nl=False)
    elif not as_json:
        n = len(parsed.clauses)
        console.print(f"[green]ok[/green] {escape(str(program))}: {n} clause{'s' if n != 1 else ''}")


def _load_trace(path: Path):
    from simpatterns.trace import Trace, TraceFormatError

    try:
        return Trace.load(path)
    except TraceFormatError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2)


def _inputs(path: Path, lib):
    """(annotation, trace or None) from a trace (.npz, annotated now) or an annotation (.jsonl)."""
    if path.name.endswith(".jsonl"):
        from simpatterns.annotate.annotation import Annotation, AnnotationFormatError

        try:
            return Annotation.load(path), None
        except AnnotationFormatError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2)
    trace = _load_trace(path)
    if lib is None:
        console.print("[red]error:[/red] annotating a trace needs a library (--library builtin|PATH)")
        raise typer.Exit(2)
    from simpatterns.annotate.annotator import annotate

    return annotate(trace, lib, trace_id=path.stem), trace


@reward_app.command("eval")
def eval_cmd(
    program: Path = typer.Argument(..., help="reward program file (.rwd)"),
    traces: list[Path] = typer.Argument(..., help="traces (.npz, annotated with --library) or annotations (.jsonl)"),
    library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_HELP),
    explain: bool = typer.Option(False, "--explain", "-e", help="per-clause success, score and why"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per trace"),
) -> None:
    """Evaluate a program on traces: success and dense score per trace (and per clause)."""
    from simpatterns.dsl import DSLError, DSLErrors, RewardProgram, check

    lib = _library(library)
    text = _read(program)
    try:
        reward = RewardProgram.from_text(text, lib, filename=str(program))
    except DSLErrors as exc:
        _print_errors(exc)
        raise typer.Exit(1)
    table = Table(title=f"{escape(str(program))} on {len(traces)} trace(s)")
    table.add_column("trace")
    table.add_column("success")
    table.add_column("score")
    for k in range(len(reward.clauses)):
        table.add_column(f"c{k + 1}")
    failed = False
    for path in traces:
        ann, trace = _inputs(path, lib)
        if trace is not None:
            body_errors = check(reward.program, None, trace.names)
            if body_errors:
                _print_errors(DSLErrors(body_errors))
                failed = True
                continue
        try:
            res = reward.evaluate(ann, trace, explain=explain or as_json)
        except DSLError as exc:
            typer.echo(f"{path}: {exc}")
            failed = True
            continue
        if as_json:
            typer.echo(json.dumps({"trace": str(path), **res.to_json()}))
            continue
        if explain:
            typer.echo(f"== {path}")
            typer.echo(res.explain_text())
        table.add_row(escape(str(path)), "yes" if res.success else "no", f"{res.score:.3f}",
                      *[f"{c.score:.2f}" for c in res.clauses])
    if not as_json:
        console.print(table)
        for k, t in enumerate(reward.clauses, start=1):
            console.print(f"  c{k}: {escape(t)}")
    if failed:
        raise typer.Exit(1)


# ``reward compile`` (goal in words -> program, with an LLM) is defined with the LLM options it shares.
from simpatterns.llm.commands import add_compile_command  # noqa: E402

add_compile_command(reward_app)


def register(app: typer.Typer) -> None:
    app.add_typer(reward_app, name="reward")
