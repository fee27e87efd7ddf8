"""Annotating trace files on disk: what ``simpatterns annotate`` does, from Python.

`annotate_paths` finds the traces under a folder (or takes one file), skips
those whose annotation is up to date, annotates the rest over ``workers``
processes (each annotation written as its trace is done, by the worker that
made it), renders the extras asked for (text, timeline plot, captioned GIF;
in parallel, once the annotations are written), and returns an
`AnnotateReport`: one `TraceRow` per annotated trace, what was skipped,
unreadable or failed, and whether Ctrl-C stopped it (the annotations already
written stay; a second call resumes).

Examples:
    >>> from simpatterns.annotate.run import annotate_paths
    >>> report = annotate_paths("runs/ds", PatternLibrary.builtin(), workers=2)  # doctest: +SKIP
    >>> report.exit_code, len(report.rows), report.skipped  # doctest: +SKIP
    (0, 12, 0)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from simpatterns.errors import SimpatternsError
from simpatterns.annotate.annotator import TRACE_ERROR_KEY, annotate_iter, trace_files
from simpatterns.annotate.sandboxed import SandboxPolicy
from simpatterns.annotation import Annotation, AnnotationFormatError
from simpatterns.cli_support import ProgressBar, progress_map
from simpatterns.detectors.library import PatternLibrary
from simpatterns.files import WriteError, check_target
from simpatterns.parallel import Backend

COLUMNS = ("trace", "frames", "events", "patterns fired", "ms", "errors")
# file times come from the kernel's coarse clock (a few ms behind time_ns)
_CLOCK_MARGIN_NS = 50_000_000


class AnnotateError(SimpatternsError):
    """Nothing to annotate, or an annotation or extra that cannot be written: one line
    naming the path."""


@dataclass(frozen=True)
class Extras:
    """What is written beside each annotation: the LLM text (``<stem>.txt``, at most
    ``max_chars`` characters), the timeline plot and the captioned GIF (its scene
    ``gif_size`` pixels a side)."""

    text: bool = False
    plot: bool = False
    gif: bool = False
    max_chars: int = 6000
    gif_size: int = 256

    @property
    def wanted(self) -> bool:
        return self.text or self.plot or self.gif

    def missing(self, dest_dir: Path, stem: str) -> bool:
        """Whether an extra asked for is not there yet."""
        return any(on and not (dest_dir / f"{stem}{suffix}").exists()
                   for on, suffix in ((self.text, ".txt"), (self.plot, ".timeline.png"), (self.gif, ".annotated.gif")))


@dataclass(frozen=True)
class RenderJob:
    """The extras of one annotated trace, rendered from its saved annotation (in a worker)."""

    trace: Path
    dest_dir: Path
    stem: str
    extras: Extras


@dataclass(frozen=True)
class AnnotationSummary:
    """What the command keeps of one annotation: the worker that saved it sends this
    back instead of its events (`annotate_iter`'s ``summary``)."""

    frames: int
    events: int
    fired: int
    patterns: int
    ms: float
    errors: dict[str, str]

    @classmethod
    def of(cls, ann: Annotation) -> AnnotationSummary:
        return cls(ann.num_frames, ann.num_events, sum(1 for p in ann.patterns if ann.pattern_events.get(p)),
                   len(ann.patterns), 1000 * sum(ann.timings.values()), dict(ann.errors))


@dataclass(frozen=True)
class TraceRow:
    """One annotated trace: its frames, events, patterns that fired (of all), the
    detectors' milliseconds and its detector errors."""

    file: Path
    frames: int
    events: int
    fired: int
    patterns: int
    ms: float
    errors: int

    def cells(self) -> tuple[str, ...]:
        """The row under `COLUMNS`."""
        return (str(self.file), str(self.frames), str(self.events), f"{self.fired}/{self.patterns}",
                f"{self.ms:.0f}", str(self.errors) if self.errors else "-")


@dataclass
class AnnotateReport:
    """What `annotate_paths` did. ``rows[i]`` is trace ``files[i]`` if it was annotated
    this time; ``written`` counts the annotations written (with an interrupted run, also
    those whose result never reached this process)."""

    files: list[Path]
    out: Path | None = None
    skipped: int = 0
    rows: dict[int, TraceRow] = field(default_factory=dict)
    unreadable: int = 0
    failed: int = 0
    renders: int = 0
    rendered: int = 0
    interrupted: bool = False
    written: int = 0

    @property
    def exit_code(self) -> int:
        """1 when a trace was unreadable or a detector failed, else 0."""
        return 1 if self.unreadable or self.failed else 0

    def progress_line(self) -> str:
        """What was kept, for an interrupted run."""
        where = self.out if self.out else "beside the traces"
        extras = f"; {self.rendered} of {self.renders} trace(s) rendered (text, plot, GIF)" if self.renders else ""
        left = len(self.files) - self.written - self.skipped - self.unreadable
        return (f"{self.written + self.skipped} of {len(self.files)} annotation(s) written ({where}), "
                f"{left} left{extras}")


def annotation_file(dest_dir: Path, stem: str) -> Path:
    return dest_dir / f"{stem}.annotation.jsonl"


def up_to_date(trace: Path, annotation: Path, patterns: list[str]) -> bool:
    """``annotation`` exists, is newer than ``trace``, loads, and has the library's
    patterns (a detector changed under the same label needs ``force``)."""
    try:
        if annotation.stat().st_mtime_ns < trace.stat().st_mtime_ns:
            return False
        return Annotation.load(annotation).patterns == list(patterns)
    except (OSError, AnnotationFormatError):
        return False


def render(job: RenderJob) -> None:
    """Write ``job``'s extras from the trace and its saved annotation."""
    ann = Annotation.load(annotation_file(job.dest_dir, job.stem))
    write_extras(job.trace, ann, job.dest_dir, job.stem, job.extras)


def write_extras(file: Path, ann: Annotation, dest_dir: Path, stem: str, extras: Extras) -> str | None:
    """Write the extras of one trace; returns the annotation text when it was asked for."""
    from simpatterns.annotate.plots import captioned_gif, timeline_plot
    from simpatterns.annotate.text import annotation_text
    from simpatterns.files import atomic_write
    from simpatterns.trace import Trace

    trace = Trace.load(file)
    body = None
    if extras.text:
        body = annotation_text(trace, ann, budget_chars=extras.max_chars)
        atomic_write(dest_dir / f"{stem}.txt", body + "\n")
    if extras.plot:
        timeline_plot(ann, dest_dir / f"{stem}.timeline.png", trace=trace)
    if extras.gif:
        captioned_gif(trace, ann, dest_dir / f"{stem}.annotated.gif", size=extras.gif_size)
    return body


def _write_error(dest_dir: Path, exc: OSError) -> AnnotateError:
    """A `WriteError` already names the file; others get the folder."""
    return AnnotateError(str(exc) if isinstance(exc, WriteError) else
                         f"{dest_dir}: cannot write ({exc.strerror or exc})")


def _written_since(path: Path, started_ns: int) -> bool:
    try:
        return path.stat().st_mtime_ns >= started_ns
    except OSError:
        return False


def annotate_paths(
    source: str | os.PathLike,
    library: PatternLibrary,
    *,
    out: str | os.PathLike | None = None,
    extras: Extras = Extras(),
    workers: int = 1,
    force: bool = False,
    sandbox: SandboxPolicy | None = None,
    backend: Backend | None = None,
    progress: bool = False,
    log: Callable[[str], None] = lambda line: None,
    show_text: Callable[[str], None] = lambda text: None,
) -> AnnotateReport:
    """Annotate the traces of ``source`` (a ``.npz`` file or a folder, searched
    recursively) with ``library``; each ``<stem>.annotation.jsonl`` goes beside its trace
    or under ``out`` (same layout), written as the trace is done.

    An annotation newer than its trace, with the library's patterns, is skipped unless
    ``force`` (a single file is always redone). ``extras`` are written for every trace,
    also for a skipped one that lacks them. ``sandbox``: how untrusted detectors run;
    ``backend``: where the workers run (None: this machine's processes). ``progress``
    draws bars on stderr; ``log`` gets each line to show (what was skipped, unreadable
    traces, detector errors); ``show_text`` gets the annotation text of a single trace.

    Raises FileNotFoundError (no ``source``), `AnnotateError` (no traces; a file that
    cannot be written, checked before any work), `LibraryError` (the gate rejected an
    untrusted detector) and `SandboxRefused`. Ctrl-C is not raised: the report says
    ``interrupted`` and how much was kept.
    """
    src = Path(source)
    files = trace_files(src)
    if not files:
        raise AnnotateError(f"{src}: no .npz traces found")
    out_dir = Path(out) if out is not None else None
    root = src if src.is_dir() else src.parent

    def destination(file: Path) -> tuple[Path, str]:
        stem = file.name[: -len(".npz")] if file.name.endswith(".npz") else file.stem
        return ((out_dir / file.parent.relative_to(root)) if out_dir else file.parent), stem

    report = AnnotateReport(files, out_dir)
    todo = list(range(len(files))) if force or len(files) == 1 else [
        i for i, f in enumerate(files) if not up_to_date(f, annotation_file(*destination(f)), library.order())]
    report.skipped = len(files) - len(todo)
    if report.skipped:
        log(f"{report.skipped} of {len(files)} annotation(s) up to date, skipped (--force redoes them)")
    targets = [annotation_file(*destination(files[i])) for i in todo]  # written by the workers
    for target in targets:  # a file or folder in the way: before any work, nothing created
        try:
            check_target(target)
        except OSError as exc:
            raise _write_error(target.parent, exc) from None
    started_ns = time.time_ns() - _CLOCK_MARGIN_NS
    # the sandbox's AST gate looks at every untrusted detector here, before any runs
    done = annotate_iter([files[i] for i in todo], library, workers=workers, on_error="record", sandbox=sandbox,
                         save_to=targets, backend=backend, summary=AnnotationSummary.of)
    renders = [RenderJob(files[i], *destination(files[i]), extras) for i in sorted(set(range(len(files))) - set(todo))
               if extras.wanted and extras.missing(*destination(files[i]))]
    with ProgressBar("annotating", len(todo), enabled=progress and len(todo) > 1) as bar:
        say = bar.log if bar.enabled else log  # above the bar while it runs
        try:
            renders += _collect(done, todo, files, destination, extras, report, bar, say, show_text)
        except KeyboardInterrupt:
            report.interrupted = True
            done.close()  # stops the workers now if Ctrl-C came between two results
        except OSError as exc:  # an annotation could not be written (a WriteError names the file)
            done.close()
            raise _write_error(root, exc) from None
    report.renders = len(renders)
    if renders and not report.interrupted:  # plots and GIFs take seconds each: in parallel, with their own bar
        try:
            for _ in progress_map(render, renders, workers=workers, chunksize=1, backend=backend,
                                  progress="rendering" if progress else None):
                report.rendered += 1
        except KeyboardInterrupt:
            report.interrupted = True
        except OSError as exc:
            raise AnnotateError(str(exc)) from None
    # workers write as they finish, also results this process never received: count files
    report.written = max(len(report.rows), sum(1 for t in targets if _written_since(t, started_ns)))
    return report


def _collect(done: Iterator[tuple[int, AnnotationSummary]], todo: list[int], files: list[Path],
             destination: Callable[[Path], tuple[Path, str]], extras: Extras, report: AnnotateReport,
             bar: ProgressBar, say: Callable[[str], None], show_text: Callable[[str], None]) -> list[RenderJob]:
    """Take the annotations as they come into ``report``; the extras of several traces
    are rendered afterwards (returned), those of a single trace here."""
    renders = []
    for j, got in done:
        i = todo[j]
        file = files[i]
        dest_dir, stem = destination(file)
        if TRACE_ERROR_KEY in got.errors:
            report.unreadable += 1
            say(f"unreadable {got.errors[TRACE_ERROR_KEY]}")
            bar.advance()
            continue
        if extras.wanted and len(files) == 1:
            try:
                ann = Annotation.load(annotation_file(dest_dir, stem))  # as saved a moment ago
                text = write_extras(file, ann, dest_dir, stem, extras)
            except OSError as exc:
                raise _write_error(dest_dir, exc) from None
            if text is not None:
                show_text(text)
        elif extras.wanted:
            renders.append(RenderJob(file, dest_dir, stem, extras))
        bar.advance()
        report.rows[i] = TraceRow(file, got.frames, got.events, got.fired, got.patterns, got.ms, len(got.errors))
        report.failed += bool(got.errors)
        for msg in got.errors.values():
            say(f"detector error {msg}")
    return renders
