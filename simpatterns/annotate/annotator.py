"""Run a `PatternLibrary` over traces: one trace in-process, many in a process pool.

Patterns run in the library's dependency order. Each detector receives only
the events of the labels it declares in ``DEPENDS`` (as fresh lists, so one
detector cannot corrupt what another reads), and detectors see the trace
through read-only views of its arrays. A detector that raises, or returns something
`validate_events` rejects, becomes an entry of ``Annotation.errors`` naming
the pattern and the trace; patterns that depend on it are skipped with an
error saying so. The batch never crashes because of a detector.

Per-pattern wall time (seconds, including validation) lands in
``Annotation.timings``; the evolver's time penalty reads it.

Untrusted (LLM-written) detectors never run here: a library holding any
(``PatternLibrary.untrusted_labels``) is annotated by
`simpatterns.annotate.sandboxed`, which runs them in the evolver's sandbox
and the trusted ones in-process, with the same errors and timings.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from simpatterns.annotation import Annotation, EventList
from simpatterns.detectors.contract import Detector, DetectorError, validate_events
from simpatterns.detectors.library import PatternLibrary
from simpatterns.trace import _ARRAY_FIELDS, Trace, TraceFormatError

if TYPE_CHECKING:
    from simpatterns.annotate.sandboxed import SandboxPolicy

# Key of ``Annotation.errors`` for a trace that could not be read (``on_error="record"``);
# never a pattern label, since labels are non-empty.
TRACE_ERROR_KEY = ""


def run_detector(detector: Detector, trace: Trace, events: Mapping[str, Sequence[tuple[int, dict]]]) -> EventList:
    """Run one detector on ``trace``; ``events`` maps labels to earlier patterns' events
    (it may hold more labels than the detector declares; only ``DEPENDS`` are passed).

    Returns the validated events sorted by frame. Raises `DetectorError` naming the
    pattern (and the line of the detector's source where it failed, if known).
    """
    if not detector.trusted or detector.detect is None:
        raise DetectorError("untrusted (LLM-written) detector: it runs only in the sandbox; "
                            "annotate it with a library (annotate/annotate_many)", detector.pattern)
    deps: dict[str, EventList] = {}
    for label in detector.depends:
        if label not in events:
            raise DetectorError(f"dependency {label!r} has no events (it did not run)", detector.pattern)
        deps[label] = [(int(f), dict(p)) for f, p in events[label]]
    try:
        raw = detector.detect(trace, deps)
    except Exception as exc:  # any failure inside detector code is that detector's error
        raise DetectorError(
            f"detect raised {type(exc).__name__}: {exc}{_where_in(detector, exc)}", detector.pattern
        ) from exc
    out = validate_events(raw, detector.pattern, trace.num_frames, interval=detector.duration == "interval")
    out.sort(key=lambda e: e[0])
    return out


def _where_in(detector: Detector, exc: BaseException) -> str:
    lines = [fr.lineno for fr in traceback.extract_tb(exc.__traceback__) if fr.filename == detector.filename]
    return f" (at {detector.filename}:{lines[-1]})" if lines else ""


def _guarded(trace: Trace) -> Trace:
    """A shallow copy whose arrays are read-only views (no data copied): detectors
    cannot change what later detectors read, and the caller's trace is untouched."""
    views = {}
    for name in _ARRAY_FIELDS:
        v = getattr(trace, name).view()
        v.flags.writeable = False
        views[name] = v
    return replace(trace, events=list(trace.events), meta=dict(trace.meta), **views)


def annotate(trace: Trace, library: PatternLibrary, *, trace_id: str = "",
             sandbox: SandboxPolicy | None = None) -> Annotation:
    """Annotate one trace with every pattern of ``library`` (dependency order).
    Untrusted detectors run in the sandbox, under ``sandbox`` (default `SandboxPolicy()`)."""
    if library.untrusted_labels():
        from simpatterns.annotate.sandboxed import annotate_items

        return annotate_items([trace], [trace_id], library, policy=sandbox)[0]
    labels = library.order()
    events: dict[str, EventList] = {}
    timings: dict[str, float] = {}
    errors: dict[str, str] = {}
    guarded = _guarded(trace)
    for label in labels:
        det = library.get(label)
        failed = [d for d in det.depends if d in errors]
        if failed:
            errors[label] = (
                f"pattern {label!r} on trace {trace_id or _default_id(trace)!r}: skipped because its dependency "
                f"{', '.join(repr(d) for d in failed)} failed"
            )
            timings[label] = 0.0
            continue
        t0 = time.perf_counter()
        try:
            events[label] = run_detector(det, guarded, events)
        except DetectorError as exc:
            errors[label] = f"pattern {label!r} on trace {trace_id or _default_id(trace)!r}: {_strip_where(exc)}"
        timings[label] = time.perf_counter() - t0
    return Annotation(
        pattern_events=events,
        num_frames=trace.num_frames,
        patterns=labels,
        dt=trace.dt,
        trace_id=trace_id,
        timings=timings,
        errors=errors,
    )


def _strip_where(exc: DetectorError) -> str:
    text = str(exc)
    prefix = f"{exc.where}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _default_id(trace: Trace) -> str:
    meta = trace.meta
    parts = []
    if meta.get("template"):
        parts.append(f"template {meta['template']}")
    if meta.get("variant") is not None:
        parts.append(f"variant {meta['variant']}")
    if meta.get("action") is not None:
        parts.append("action (" + ", ".join(f"{v:.3f}" for v in meta["action"]) + ")")
    return ", ".join(parts) or "<trace>"


# ----------------------------------------------------------------- many traces
_WORKER_LIBRARY: PatternLibrary | None = None


def _worker_init(spec: list[tuple[dict[str, Any], str]]) -> None:
    global _WORKER_LIBRARY
    _WORKER_LIBRARY = PatternLibrary.from_spec(spec)


def _annotate_item(item: Trace | str, trace_id: str, library: PatternLibrary, on_error: str) -> Annotation:
    if isinstance(item, Trace):
        return annotate(item, library, trace_id=trace_id)
    try:
        trace = Trace.load(item)
    except TraceFormatError as exc:
        if on_error == "raise":
            raise
        return Annotation(pattern_events={}, num_frames=0, patterns=library.order(), trace_id=trace_id,
                          errors={TRACE_ERROR_KEY: str(exc)})
    return annotate(trace, library, trace_id=trace_id)


def _worker_run(index: int, item: Trace | str, trace_id: str, on_error: str) -> tuple[int, Annotation]:
    assert _WORKER_LIBRARY is not None
    return index, _annotate_item(item, trace_id, _WORKER_LIBRARY, on_error)


def annotate_many(
    traces_or_paths: Iterable[Trace | str | os.PathLike],
    library: PatternLibrary,
    workers: int = 1,
    progress: bool = False,
    *,
    trace_ids: Sequence[str] | None = None,
    on_error: str = "raise",
    sandbox: SandboxPolicy | None = None,
) -> list[Annotation]:
    """Annotate many traces (objects or ``.npz`` paths); results in input order.

    ``workers > 1`` uses a process pool (forkserver context); the library travels
    as manifest records plus sources and is rebuilt once per worker. Trace ids
    default to the file path for paths and ``#i`` for trace objects.
    ``on_error="record"`` turns an unreadable trace file into an empty annotation
    whose ``errors[TRACE_ERROR_KEY]`` says why, instead of raising `TraceFormatError`.
    Untrusted detectors run in one sandbox from this process (pool workers run only
    trusted ones), one job per pattern and batch of traces, under ``sandbox``.
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    items: list[Trace | str] = [t if isinstance(t, Trace) else str(t) for t in traces_or_paths]
    if trace_ids is not None and len(trace_ids) != len(items):
        raise ValueError(f"trace_ids has {len(trace_ids)} entries for {len(items)} traces")
    ids = list(trace_ids) if trace_ids is not None else [
        it if isinstance(it, str) else str(it.meta.get("trace_id") or f"#{i}") for i, it in enumerate(items)
    ]
    results: list[Annotation | None] = [None] * len(items)
    bar = _Progress(len(items)) if progress else None
    try:
        if library.untrusted_labels():
            from simpatterns.annotate.sandboxed import annotate_items

            return annotate_items(items, ids, library, workers=workers, on_error=on_error,
                                  advance=bar.advance if bar else None, policy=sandbox)
        if workers <= 1 or len(items) <= 1:
            for i, item in enumerate(items):
                results[i] = _annotate_item(item, ids[i], library, on_error)
                if bar:
                    bar.advance()
        else:
            ctx = multiprocessing.get_context(_pool_context())
            with ProcessPoolExecutor(
                max_workers=min(workers, len(items)), mp_context=ctx,
                initializer=_worker_init, initargs=(library.to_spec(),),
            ) as pool:
                futures = [pool.submit(_worker_run, i, item, ids[i], on_error) for i, item in enumerate(items)]
                for fut in as_completed(futures):
                    i, ann = fut.result()
                    results[i] = ann
                    if bar:
                        bar.advance()
    finally:
        if bar:
            bar.close()
    return [r for r in results if r is not None]


def _pool_context() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class _Progress:
    def __init__(self, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(
            TextColumn("annotating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=False
        )
        self._p.start()
        self._task = self._p.add_task("annotate", total=total)

    def advance(self) -> None:
        self._p.advance(self._task)

    def close(self) -> None:
        self._p.stop()


def trace_files(path: str | os.PathLike) -> list[Path]:
    """``path`` itself if it is a file, else the ``.npz`` files under it (recursively, sorted)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(q for q in p.rglob("*.npz") if q.is_file() and not q.name.startswith("."))
    raise FileNotFoundError(f"{p}: no such file or directory")
