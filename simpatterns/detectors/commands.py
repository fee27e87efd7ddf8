"""CLI: ``simpatterns library list`` and ``simpatterns library show NAME``."""

from __future__ import annotations

import typer
from rich.syntax import Syntax
from rich.table import Table
from simpatterns.cli_support import fail, out as console, print_table

library_app = typer.Typer(help="Inspect a pattern library (the built-in guided one by default).", no_args_is_help=True)

LIBRARY_OPTION_HELP = "'builtin', 'builtin:3d' or a library directory (with library.json)"


def open_library(spec: str):
    """``builtin`` (PHYRE's), ``builtin:3d`` or a directory/manifest path -> `PatternLibrary`;
    exits with a clear error."""
    from simpatterns.detectors.library import LibraryError, resolve_library

    try:
        return resolve_library(spec)
    except LibraryError as exc:
        fail(f"{exc}")


@library_app.command("list")
def list_cmd(library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_OPTION_HELP)) -> None:
    """Every pattern in run order: label, provenance, dependencies, params."""
    lib = open_library(library)
    table = Table(title=f"{len(lib)} patterns ({library})")
    for col in ("#", "pattern", "provenance", "depends on", "params", "fitness"):
        table.add_column(col, no_wrap=col in ("#", "pattern", "provenance", "fitness"))
    for k, entry in enumerate(lib.entries(), start=1):
        table.add_row(
            str(k), entry.label, entry.provenance, ", ".join(entry.depends) or "-",
            ", ".join(entry.params) or "-", "-" if entry.fitness is None else f"{entry.fitness:.3f}",
        )
    print_table(table, drop=("params", "provenance"))  # `library show NAME` has both


@library_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="pattern label, e.g. 'bounce'"),
    library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_OPTION_HELP),
    source: bool = typer.Option(True, "--source/--no-source", help="print the detector's code"),
) -> None:
    """One pattern: description, dependencies, dependents, params and declarations, provenance and code."""
    lib = open_library(library)
    if name not in lib:
        fail(f"{str(f'no pattern {name!r}; patterns are: ' + ', '.join(lib.labels))}")
    entry = lib.entry(name)
    console.print(f"{entry.label}  ({entry.provenance}"
                  + ("" if entry.fitness is None else f", fitness {entry.fitness:.3f}") + ")")
    console.print(entry.description, markup=False)
    console.print(f"depends on: {', '.join(entry.depends) or '-'}")
    console.print(f"used by:    {', '.join(lib.dependents(entry.label, transitive=False)) or '-'}")
    console.print(f"params:     {', '.join(entry.params) or '-'}")
    console.print(f"bodies:     {', '.join(entry.body_params) or '-'}  (params naming bodies)")
    console.print(f"pair:       {'directed (object_a is the subject)' if entry.directed else 'unordered'}"
                  if {"object_a", "object_b"} <= set(entry.params) else "pair:       -")
    console.print("events:     " + ("intervals (each lasts 'frames' frames)" if entry.duration == "interval"
                                   else "instants"))
    console.print(f"file:       {entry.file}  (source hash {entry.source_hash})")
    if source:
        console.print(Syntax(lib.get(name).source, "python", line_numbers=True))


def register(app: typer.Typer) -> None:
    app.add_typer(library_app, name="library")
