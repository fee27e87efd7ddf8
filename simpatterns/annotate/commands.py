"""CLI: ``simpatterns annotate DIR|FILE [--library builtin|PATH] [--out DIR] [--text] [--plot] [--gif]
[--trust-evolved] [--sandbox-timeout S]``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simpatterns.parallel import executor_options

console = Console()


def annotate_cmd(
    source: Path = typer.Argument(..., help="a trace (.npz) or a directory of traces (searched recursively)"),
    library: str = typer.Option("builtin", "--library", "-l", help="'builtin', 'builtin:3d' (MuJoCo and rope traces) or a library directory"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output directory (default: beside each trace)"),
    text: bool = typer.Option(False, "--text", help="also write the LLM text (<name>.txt); printed for one trace"),
    plot: bool = typer.Option(False, "--plot", help="also write the timeline plot (<name>.timeline.png)"),
    gif: bool = typer.Option(False, "--gif", help="also write the captioned rollout (<name>.annotated.gif)"),
    budget: int = typer.Option(6000, "--budget", help="character budget of the text"),
    workers: int = typer.Option(1, "--workers", "-j", help="parallel processes"),
    trust_evolved: bool = typer.Option(
        False, "--trust-evolved",
        help="run LLM-written (evolved) detectors in this process instead of the sandbox: faster, but the "
             "code gets this process's files, network and credentials; only for code you have read"),
    sandbox_timeout: float = typer.Option(
        10.0, "--sandbox-timeout", min=0.1, help="seconds per trace an untrusted detector may run in the sandbox"),
    unsafe_sandbox: bool = typer.Option(
        False, "--unsafe-sandbox",
        help="run untrusted detectors even where this machine cannot give the sandbox its stated minimum "
             "(namespaces and seccomp; see docs/sandbox.md)"),
) -> None:
    """Annotate traces with a pattern library; write <name>.annotation.jsonl per trace (as each is done)."""
    from simpatterns.annotate.annotator import TRACE_ERROR_KEY, SandboxPolicy, annotate_iter, trace_files
    from simpatterns.detectors.library import LibraryError
    from simpatterns.parallel import ProgressBar
    from simpatterns.sandbox.pool import allow_unsafe

    if unsafe_sandbox:
        allow_unsafe()
    try:
        files = trace_files(source)
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2)
    if not files:
        console.print(f"[red]error:[/red] {escape(str(source))}: no .npz traces found")
        raise typer.Exit(2)
    lib = _open_library(library, trust_evolved)
    untrusted = lib.untrusted_labels()
    if untrusted:
        console.print(f"{len(untrusted)} untrusted (LLM-written) pattern(s) run in the sandbox: "
                      f"{escape(', '.join(untrusted))}")
    elif trust_evolved and any(e.provenance == "evolved" for e in lib.entries()):
        console.print("[yellow]warning:[/yellow] --trust-evolved: LLM-written detectors run in this process")
    root = source if source.is_dir() else source.parent
    try:  # the sandbox's AST gate looks at every untrusted detector here, before any runs
        done = annotate_iter(files, lib, workers=workers, on_error="record",
                             sandbox=SandboxPolicy(trace_timeout_s=sandbox_timeout))
    except LibraryError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2)
    rows: dict[int, tuple[str, ...]] = {}
    n_bad = n_failed = 0
    with ProgressBar("annotating", len(files), enabled=len(files) > 1) as bar:

        def say(what: str, message: str) -> None:  # above the bar while it runs
            if bar.enabled:
                bar.log(f"{what} {message}")
            else:
                console.print(f"[yellow]{what}[/yellow] {escape(message)}")

        for i, ann in _refusal_exits(done):  # written as each is done, so an interrupted run keeps them
            bar.advance()
            file = files[i]
            dest_dir = (out / file.parent.relative_to(root)) if out else file.parent
            stem = file.name[: -len(".npz")] if file.name.endswith(".npz") else file.stem
            if TRACE_ERROR_KEY in ann.errors:
                n_bad += 1
                say("unreadable", ann.errors[TRACE_ERROR_KEY])
                continue
            try:
                dest_dir.mkdir(parents=True, exist_ok=True)
                ann.save(dest_dir / f"{stem}.annotation.jsonl")
            except OSError as exc:
                _write_failed(dest_dir, exc)
            fired = sum(1 for p in ann.patterns if ann.pattern_events.get(p))
            rows[i] = (escape(str(file)), str(ann.num_frames), str(len(ann.events)), f"{fired}/{len(ann.patterns)}",
                       f"{1000 * sum(ann.timings.values()):.0f}", str(len(ann.errors)) if ann.errors else "-")
            n_failed += bool(ann.errors)
            for msg in ann.errors.values():
                say("detector error", msg)
            if text or plot or gif:
                try:
                    _extras(file, ann, dest_dir, stem, text, plot, gif, budget, single=len(files) == 1)
                except OSError as exc:
                    _write_failed(dest_dir, exc)
    table = Table(title=f"{len(files)} trace(s), {len(lib)} patterns")
    for col in ("trace", "frames", "events", "patterns fired", "ms", "errors"):
        table.add_column(col)
    for i in sorted(rows):
        table.add_row(*rows[i])
    console.print(table)
    where = out if out else "beside the traces"
    console.print(f"annotations -> {where}")
    if n_bad or n_failed:
        raise typer.Exit(1)


def _refusal_exits(done):
    """The annotations as they come; exit 2 with its one line if the sandbox refuses this machine."""
    from simpatterns.sandbox.pool import SandboxRefused

    try:
        yield from done
    except SandboxRefused as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2)


def _write_failed(dest_dir: Path, exc: OSError) -> None:
    """Exit 2 with one line; a `WriteError` already names the file, others get the folder."""
    from simpatterns.files import WriteError

    message = str(exc) if isinstance(exc, WriteError) else f"{dest_dir}: cannot write ({exc.strerror or exc})"
    console.print(f"[red]error:[/red] {escape(message)}")
    raise typer.Exit(2)


def _open_library(spec: str, trust_evolved: bool):
    """``builtin``, ``builtin:3d`` or a library path -> `PatternLibrary`; exits 2 with the error."""
    from simpatterns.detectors.commands import open_library
    from simpatterns.detectors.library import LibraryError, PatternLibrary

    if spec == "builtin" or spec.startswith("builtin:"):
        return open_library(spec)
    try:
        return PatternLibrary.load(spec, trust_evolved=trust_evolved)
    except LibraryError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2)


def _extras(file: Path, ann, dest_dir: Path, stem: str, text: bool, plot: bool, gif: bool,
            budget: int, single: bool) -> None:
    from simpatterns.annotate.plots import captioned_gif, timeline_plot
    from simpatterns.annotate.text import annotation_text
    from simpatterns.files import atomic_write
    from simpatterns.trace import Trace

    trace = Trace.load(file)
    if text:
        body = annotation_text(trace, ann, budget_chars=budget)
        atomic_write(dest_dir / f"{stem}.txt", body + "\n")
        if single:
            typer.echo(body)  # plain: rich would re-wrap the lines
    if plot:
        timeline_plot(ann, dest_dir / f"{stem}.timeline.png", trace=trace)
    if gif:
        captioned_gif(trace, ann, dest_dir / f"{stem}.annotated.gif")


def register(app: typer.Typer) -> None:
    app.command("annotate")(executor_options(annotate_cmd))
