"""CLI: ``simpatterns annotate DIR|FILE [--library builtin|PATH] [--out DIR] [--text] [--plot] [--captioned-gif]
[--trust-evolved] [--sandbox-timeout S]``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from simpatterns.cli_support import err, fail, interrupted, new_table, note, out as console, print_table, progress, warn
from simpatterns.parallel import executor_options



def annotate_cmd(
    source: Path = typer.Argument(..., help="a trace (.npz) or a directory of traces (searched recursively)"),
    library: str = typer.Option("builtin", "--library", "-l",
                                help="'builtin', 'builtin:3d' (MuJoCo and rope traces) or a library directory"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output directory (default: beside each trace)"),
    text: bool = typer.Option(False, "--text", help="also write the LLM text (<name>.txt); printed for one trace"),
    plot: bool = typer.Option(False, "--plot", help="also write the timeline plot (<name>.timeline.png)"),
    gif: bool = typer.Option(False, "--captioned-gif", help="also write the captioned rollout (<name>.annotated.gif)"),
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
             "(namespaces and seccomp; see docs/sandbox.md)"),
) -> None:
    """Annotate traces with a pattern library; write <name>.annotation.jsonl per trace (as each is done)."""
    from simpatterns.annotate.annotator import TRACE_ERROR_KEY, SandboxPolicy, annotate_iter, trace_files
    from simpatterns.detectors.library import LibraryError
    from simpatterns.files import check_target
    from simpatterns.parallel import parallel_map
    from simpatterns.sandbox.pool import allow_unsafe

    if unsafe_sandbox:
        allow_unsafe()
    try:
        files = trace_files(source)
    except FileNotFoundError as exc:
        fail(f"{exc}")
    if not files:
        fail(f"{source}: no .npz traces found")
    lib = _open_library(library, trust_evolved)
    untrusted = lib.untrusted_labels()
    if untrusted:
        note(f"{len(untrusted)} untrusted (LLM-written) pattern(s) run in the sandbox: {', '.join(untrusted)}")
    elif trust_evolved and any(e.provenance == "evolved" for e in lib.entries()):
        warn("--trust-evolved: LLM-written detectors run in this process")
    root = source if source.is_dir() else source.parent

    def destination(file: Path) -> tuple[Path, str]:
        stem = file.name[: -len(".npz")] if file.name.endswith(".npz") else file.stem
        return ((out / file.parent.relative_to(root)) if out else file.parent), stem

    todo = list(range(len(files))) if force or len(files) == 1 else [
        i for i, f in enumerate(files) if not up_to_date(f, annotation_file(*destination(f)), lib.order())]
    skipped = len(files) - len(todo)
    if skipped:
        note(f"{skipped} of {len(files)} annotation(s) up to date, skipped (--force redoes them)")
    targets = [annotation_file(*destination(files[i])) for i in todo]  # written by the workers
    for target in targets:  # a file or folder in the way: one line before any work, nothing created
        try:
            check_target(target)
        except OSError as exc:
            _write_failed(target.parent, exc)
    # file times come from the kernel's coarse clock (a few ms behind time_ns): a margin keeps this run's first writes
    started_ns = time.time_ns() - 50_000_000
    try:  # the sandbox's AST gate looks at every untrusted detector here, before any runs
        done = annotate_iter([files[i] for i in todo], lib, workers=workers, on_error="record",
                             sandbox=SandboxPolicy(trace_timeout_s=sandbox_timeout), save_to=targets)
    except LibraryError as exc:
        fail(f"{exc}")
    rows: dict[int, tuple[str, ...]] = {}
    n_bad = n_failed = 0
    stopped = False
    renders: list[RenderJob] = []
    rendered = 0
    if text or plot or gif:  # an up-to-date annotation still gets the extras it lacks
        for i in sorted(set(range(len(files))) - set(todo)):
            dest_dir, stem = destination(files[i])
            wanted = [(text, ".txt"), (plot, ".timeline.png"), (gif, ".annotated.gif")]
            if any(on and not (dest_dir / f"{stem}{suffix}").exists() for on, suffix in wanted):
                renders.append(RenderJob(files[i], dest_dir, stem, text, plot, gif, budget))
    with progress("annotating", len(todo), quiet=quiet or len(todo) <= 1) as bar:

        def say(what: str, message: str) -> None:  # above the bar while it runs
            if bar.enabled:
                bar.log(f"{what} {message}")
            else:
                err.print(f"{what} {message}")

        try:
            for j, ann in _refusal_exits(done):  # written as each trace is done, so an interrupted run keeps them
                i = todo[j]
                file = files[i]
                dest_dir, stem = destination(file)
                if TRACE_ERROR_KEY in ann.errors:
                    n_bad += 1
                    say("unreadable", ann.errors[TRACE_ERROR_KEY])
                    bar.advance()
                    continue
                try:  # the annotation itself was written by the worker that made it
                    if (text or plot or gif) and len(files) == 1:
                        _extras(file, ann, dest_dir, stem, text, plot, gif, budget, single=True)
                except OSError as exc:
                    _write_failed(dest_dir, exc)
                if (text or plot or gif) and (len(files) > 1):
                    renders.append(RenderJob(file, dest_dir, stem, text, plot, gif, budget))
                bar.advance()
                fired = sum(1 for p in ann.patterns if ann.pattern_events.get(p))
                rows[i] = (str(file), str(ann.num_frames), str(len(ann.events)), f"{fired}/{len(ann.patterns)}",
                           f"{1000 * sum(ann.timings.values()):.0f}", str(len(ann.errors)) if ann.errors else "-")
                n_failed += bool(ann.errors)
                for msg in ann.errors.values():
                    say("detector error", msg)
        except KeyboardInterrupt:
            stopped = True
            done.close()  # stops the workers now if Ctrl-C came between two results
        except OSError as exc:  # an annotation could not be written (a WriteError names the file)
            done.close()
            _write_failed(root, exc)
    if renders and not stopped:  # plots and GIFs take seconds each: in parallel, with their own bar
        try:
            for _ in parallel_map(render, renders, workers=workers, chunksize=1,
                                  progress=None if quiet else "rendering"):
                rendered += 1
        except KeyboardInterrupt:
            stopped = True
        except OSError as exc:
            fail(str(exc))
    if stopped:  # after the bar is gone
        where = out if out else "beside the traces"
        extras = f"; {rendered} of {len(renders)} trace(s) rendered (text, plot, GIF)" if renders else ""
        # workers write as they finish, also results this process never received: count files
        written = max(len(rows), sum(1 for t in targets if _written_since(t, started_ns)))
        interrupted(f"{written + skipped} of {len(files)} annotation(s) written ({where}), "
                    f"{len(files) - written - skipped - n_bad} left{extras}")
    if as_json:
        import json

        console.print(json.dumps([dict(zip(COLUMNS, rows[i])) for i in sorted(rows)]))
    elif rows:  # every annotation up to date: the note above says so, no empty table
        table = new_table(f"{len(files)} trace(s), {len(lib)} patterns", COLUMNS,
                          right=("frames", "events", "patterns fired", "ms", "errors"))
        for i in sorted(rows):
            table.add_row(*rows[i])
        print_table(table)
    note(f"annotations -> {out if out else 'beside the traces'}")
    if n_bad or n_failed:
        raise typer.Exit(1)


COLUMNS = ("trace", "frames", "events", "patterns fired", "ms", "errors")


def annotation_file(dest_dir: Path, stem: str) -> Path:
    return dest_dir / f"{stem}.annotation.jsonl"


def up_to_date(trace: Path, annotation: Path, patterns: list[str]) -> bool:
    """``annotation`` exists, is newer than ``trace``, loads, and has the library's
    patterns (a detector changed under the same label needs ``--force``)."""
    from simpatterns.annotation import Annotation, AnnotationFormatError

    try:
        if annotation.stat().st_mtime_ns < trace.stat().st_mtime_ns:
            return False
        return Annotation.load(annotation).patterns == list(patterns)
    except (OSError, AnnotationFormatError):
        return False


def _written_since(path: Path, started_ns: int) -> bool:
    try:
        return path.stat().st_mtime_ns >= started_ns
    except OSError:
        return False


def _refusal_exits(done):
    """The annotations as they come; exit 2 with its one line if the sandbox refuses this machine."""
    from simpatterns.sandbox.pool import SandboxRefused

    try:
        yield from done
    except SandboxRefused as exc:
        fail(str(exc))


def _write_failed(dest_dir: Path, exc: OSError) -> None:
    """Exit 2 with one line; a `WriteError` already names the file, others get the folder."""
    from simpatterns.files import WriteError

    message = str(exc) if isinstance(exc, WriteError) else f"{dest_dir}: cannot write ({exc.strerror or exc})"
    fail(f"{message}")


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


@dataclass(frozen=True)
class RenderJob:
    """The extra outputs (text, timeline plot, captioned GIF) of one annotated trace."""

    trace: Path
    dest_dir: Path
    stem: str
    text: bool
    plot: bool
    gif: bool
    budget: int


def render(job: RenderJob) -> None:
    """Write ``job``'s extras from the trace and its saved annotation (in a worker)."""
    from simpatterns.annotation import Annotation

    ann = Annotation.load(annotation_file(job.dest_dir, job.stem))
    _extras(job.trace, ann, job.dest_dir, job.stem, job.text, job.plot, job.gif, job.budget, single=False)


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


def export_cmd(
    source: Path = typer.Argument(..., help="a folder of traces (.npz, searched recursively) and their annotations"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="where the .parquet files go (default: SOURCE)"),
    fmt: str = typer.Option("parquet", "--format", help="file format (parquet)"),
    annotations: Optional[Path] = typer.Option(
        None, "--annotations", help="folder of the annotations (default: beside each trace; same layout)"),
    text: bool = typer.Option(True, "--text/--no-text", help="include each annotation's text"),
) -> None:
    """Write traces.parquet, events.parquet and annotations.parquet (for pandas, pyarrow, Hugging Face datasets)."""
    from simpatterns.annotate.exchange import ExchangeError, export_parquet
    from simpatterns.annotation import AnnotationFormatError
    from simpatterns.trace import TraceFormatError

    if fmt != "parquet":
        fail(f"--format {fmt!r}: the format is parquet")
    if not source.exists():
        fail(f"{source}: no such file or directory")
    try:
        counts = export_parquet(source, out, annotations=annotations, text=text)
    except (ExchangeError, TraceFormatError, AnnotationFormatError) as exc:
        fail(str(exc))
    where = out if out is not None else (source if source.is_dir() else source.parent)
    note(f"{counts['traces']} traces, {counts['annotations']} annotations, {counts['events']} events -> "
         f"{where}/{{traces,events,annotations}}.parquet")


def import_cmd(
    source: Path = typer.Argument(..., help="a folder written by `simpatterns export`"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="where traces and annotations go (default: SOURCE)"),
) -> None:
    """Read exported Parquet files back into traces (.npz) and annotations (.annotation.jsonl)."""
    from simpatterns.annotate.exchange import ExchangeError, import_parquet

    try:
        counts = import_parquet(source, out)
    except ExchangeError as exc:
        fail(str(exc))
    note(f"{counts['traces']} traces, {counts['annotations']} annotations -> {out if out is not None else source}")


def register(app: typer.Typer) -> None:
    app.command("annotate")(executor_options(annotate_cmd))
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
