"""CLI: ``simpatterns annotate DIR|FILE [--library builtin|PATH] [--out DIR] [--text] [--plot] [--captioned-gif]
[--trust-evolved] [--sandbox-timeout S]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from simpatterns.cli_support import add_rows, executor_options, fail, interrupted, new_table, note, print_table, warn
from simpatterns.cli_support import out as console
from simpatterns.parallel import LOCAL, Backend


def annotate_cmd(
    source: Path = typer.Argument(..., help="a trace (.npz) or a directory of traces (searched recursively)"),
    library: str = typer.Option("builtin", "--library", "-l",
                                help="'builtin', 'builtin:3d' (MuJoCo and rope traces) or a library directory"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output directory (default: beside each trace)"),
    text: bool = typer.Option(False, "--text", help="also write the LLM text (<name>.txt); printed for one trace"),
    plot: bool = typer.Option(False, "--plot", help="also write the timeline plot (<name>.timeline.png)"),
    gif: bool = typer.Option(False, "--captioned-gif", help="also write the captioned rollout (<name>.annotated.gif)"),
    gif_size: int = typer.Option(256, "--gif-size", min=64, help="side of the GIF's scene in pixels"),
    budget: int = typer.Option(6000, "--max-chars", min=1, help="characters of the text, at most"),
    workers: int = typer.Option(1, "--workers", "-j", min=1, help="parallel processes"),
    force: bool = typer.Option(False, "--force/--no-force", help="redo annotations that are up to date"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON instead of a table"),
    trust_evolved: bool = typer.Option(
        False, "--trust-evolved",
        help="run LLM-written (evolved) detectors in this process instead of the sandbox: faster, but the "
             "code gets this process's files, network and credentials; only for code you have read"),
    sandbox_timeout: float = typer.Option(
        10.0, "--sandbox-timeout", min=0.1, help="seconds per trace an untrusted detector may run in the sandbox"),
    unsafe_sandbox: bool = typer.Option(
        False, "--unsafe-sandbox",
        help="run untrusted detectors even where this machine cannot give the sandbox its stated minimum "
             "(namespaces and seccomp; see docs/design/sandbox.md)"),
    backend: Backend = LOCAL,
) -> None:
    """Annotate traces with a pattern library; write <name>.annotation.jsonl per trace (as each is done)."""
    from simpatterns.annotate.run import COLUMNS, AnnotateError, Extras, annotate_paths
    from simpatterns.annotate.sandboxed import SandboxPolicy
    from simpatterns.detectors.library import LibraryError
    from simpatterns.sandbox.reasons import SandboxRefused

    lib = _open_library(library, trust_evolved)
    untrusted = lib.untrusted_labels()
    if untrusted:
        note(f"{len(untrusted)} untrusted (LLM-written) pattern(s) run in the sandbox: {', '.join(untrusted)}")
    elif trust_evolved and any(e.provenance == "evolved" for e in lib.entries()):
        warn("--trust-evolved: LLM-written detectors run in this process")
    try:
        policy = SandboxPolicy(trace_timeout_s=sandbox_timeout, unsafe=unsafe_sandbox)
        report = annotate_paths(source, lib, out=out, extras=Extras(text, plot, gif, budget, gif_size), workers=workers,
                                force=force, sandbox=policy, backend=backend, progress=not quiet, log=note,
                                show_text=typer.echo)  # plain: rich would re-wrap the lines
    except (FileNotFoundError, AnnotateError, LibraryError, SandboxRefused) as exc:
        fail(f"{exc}")
    if report.interrupted:  # after the bars are gone
        interrupted(report.progress_line())
    if as_json:
        console.print(json.dumps([dict(zip(COLUMNS, report.rows[i].cells())) for i in sorted(report.rows)]))
    elif report.rows:  # every annotation up to date: the note above says so, no empty table
        table = new_table(f"{len(report.files)} trace(s), {len(lib)} patterns", COLUMNS,
                          right=("frames", "events", "patterns fired", "ms", "errors"))
        add_rows(table, [report.rows[i].cells() for i in sorted(report.rows)])
        print_table(table)
    note(f"annotations -> {out if out else 'beside the traces'}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _open_library(spec: str, trust_evolved: bool):
    """``builtin``, ``builtin:3d`` or a library path -> `PatternLibrary`; exits 2 with the error."""
    from simpatterns.detectors.commands import open_library
    from simpatterns.detectors.library import LibraryError, PatternLibrary

    if spec == "builtin" or spec.startswith("builtin:"):
        return open_library(spec)
    try:
        return PatternLibrary.load(spec, trust_evolved=trust_evolved)
    except LibraryError as exc:
        fail(f"{exc}")




def register(app: typer.Typer) -> None:
    app.command("annotate")(executor_options(annotate_cmd))
