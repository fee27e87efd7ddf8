"""Run a `PatternLibrary` over traces: the one annotation runner.

Patterns run in the library's dependency order, in phases that alternate
between trusted and untrusted detectors (`simpatterns.annotate.phases`; a
library of trusted detectors is a single phase). Trusted (hand-written,
built-in) detectors run in-process; untrusted (LLM-written,
``PatternLibrary.untrusted_labels``) ones only in the sandbox, from this
process (`simpatterns.annotate.sandboxed`), after the sandbox's AST gate has
looked at every one of them (`simpatterns.sandbox.gate.check_untrusted`: a
rejection raises `LibraryError` before anything runs).

Each detector receives only the events of the labels it declares in
``DEPENDS`` (as fresh lists, so one detector cannot corrupt what another
reads), and in-process detectors see the trace through read-only views of
its arrays. A detector that raises, returns something `validate_events`
rejects, or is rejected by the sandbox becomes an entry of
``Annotation.errors`` naming the pattern and the trace; patterns that depend
on it are skipped with an error saying so. The batch never crashes because
of a detector. Per-pattern wall time (seconds, including validation; for
sandboxed detectors the time ``detect`` took in the sandbox child) lands in
``Annotation.timings``; the evolver's time penalty reads it.

Many traces (`annotate_iter`, `annotate_many`): trusted phases map over
`simpatterns.parallel` (the library travels once per worker as its spec);
with untrusted detectors the traces go in batches (`SandboxPolicy.batch_traces`),
each batch through every phase, one sandbox job per pattern and batch.
"""

from __future__ import annotations

import operator
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from simpatterns.annotate.phases import (
    TRACE_ERROR_KEY,
    Phase,
    TraceState,
    guarded_view,
    needed_labels,
    plan_phases,
    unreadable,
)
from simpatterns.annotate.sandboxed import DEFAULT_POLICY, SandboxPolicy, run_untrusted_phase
from simpatterns.annotation import Annotation, EventList
from simpatterns.detectors.contract import Detector, DetectorError, validate_events
from simpatterns.detectors.library import PatternLibrary
from simpatterns.cli_support import ProgressBar
from simpatterns.parallel import Backend, Executor, WorkerSetup, make_executor, runs_inline
from simpatterns.sandbox.gate import check_untrusted
from simpatterns.trace import Trace, TraceFormatError

__all__ = ["TRACE_ERROR_KEY", "SandboxPolicy", "annotate", "annotate_iter", "annotate_many", "guarded_view",
           "run_detector", "trace_files"]


_FRAME = operator.itemgetter(0)


def run_detector(detector: Detector, trace: Trace, events: Mapping[str, Sequence[tuple[int, dict]]]) -> EventList:
    """Run one detector on ``trace``; ``events`` maps labels to earlier patterns' events
    (it may hold more labels than the detector declares; only ``DEPENDS`` are passed).

    Returns the validated events sorted by frame. Raises `DetectorError` naming the
    pattern (and the line of the detector's source where it failed, if known).
    """
    return _run_detector(detector, trace, events, _converted)


def _converted(events: Sequence[tuple[int, dict]]) -> EventList:
    return [(int(f), dict(p)) for f, p in events]


def _copied(events: EventList) -> EventList:
    """Fresh copies of events that ``validate_events`` returned (int frames, dict params):
    what `_converted` makes of them, for half its cost."""
    return [(f, p.copy()) for f, p in events]


def _run_detector(detector: Detector, trace: Trace, events: Mapping[str, Sequence[tuple[int, dict]]],
                  fresh: Callable[[Any], EventList]) -> EventList:
    """`run_detector`, each dependency's events passed as ``fresh(events)``: a new list of new
    params dicts, so one detector cannot change what another reads."""
    if not detector.trusted or detector.detect is None:
        raise DetectorError("untrusted (LLM-written) detector: it runs only in the sandbox; "
                            "annotate it with a library (annotate/annotate_many)", detector.pattern)
    deps: dict[str, EventList] = {}
    for label in detector.depends:
        if label not in events:
            raise DetectorError(f"dependency {label!r} has no events (it did not run)", detector.pattern)
        deps[label] = fresh(events[label])
    try:
        raw = detector.detect(trace, deps)
    except Exception as exc:  # any failure inside detector code is that detector's error
        raise DetectorError(
            f"detect raised {type(exc).__name__}: {exc}{_where_in(detector, exc)}", detector.pattern
        ) from exc
    out = validate_events(raw, detector.pattern, trace.num_frames, interval=detector.duration == "interval")
    out.sort(key=_FRAME)
    return out


def _where_in(detector: Detector, exc: BaseException) -> str:
    lines = [fr.lineno for fr in traceback.extract_tb(exc.__traceback__) if fr.filename == detector.filename]
    return f" (at {detector.filename}:{lines[-1]})" if lines else ""


def _strip_where(exc: DetectorError) -> str:
    text = str(exc)
    prefix = f"{exc.where}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def run_trusted_phase(state: TraceState, library: PatternLibrary, labels: list[str],
                      detectors: Mapping[str, Detector] | None = None) -> None:
    """Run trusted ``labels`` in-process on one trace, in order, adding to ``state``;
    ``detectors`` stand in for the library's own of their labels (the same patterns,
    e.g. `IncrementalAnnotator`'s memoised ones)."""
    if not labels:  # a program reading only positions and contacts: no guarded copy to make
        return
    trace, events, timings = state.guarded, state.events, state.timings  # per label below: kept lean
    for label in labels:
        det = detectors.get(label) if detectors else None
        if det is None:
            det = library.get(label)
        failed = state.failed_dependencies(det.depends) if state.errors else None
        if failed:
            state.skip(label, failed)
            continue
        t0 = time.perf_counter()
        try:
            # a state's events were all validated (here, in the sandbox or in a worker): plain copies do
            events[label] = _run_detector(det, trace, events, _copied)
        except DetectorError as exc:
            state.fail(label, _strip_where(exc), time.perf_counter() - t0)
        else:
            timings[label] = time.perf_counter() - t0


# ----------------------------------------------------------------- one trace
def annotate(trace: Trace, library: PatternLibrary, *, trace_id: str = "",
             sandbox: SandboxPolicy | None = None) -> Annotation:
    """Annotate one trace with every pattern of ``library`` (dependency order).
    Untrusted detectors run in the sandbox, under ``sandbox`` (default `SandboxPolicy()`)."""
    check_untrusted(library)
    return annotate_state(trace, library, trace_id=trace_id, sandbox=sandbox)


def annotate_state(trace: Trace, library: PatternLibrary, *, trace_id: str = "",
                   sandbox: SandboxPolicy | None = None, detectors: Mapping[str, Detector] | None = None) -> Annotation:
    """`annotate` after the AST gate (the caller ran `check_untrusted`), with ``detectors``
    standing in for some trusted ones (see `run_trusted_phase`)."""
    state = TraceState(trace, trace_id)
    for trusted, phase_labels in plan_phases(library):
        if trusted:
            run_trusted_phase(state, library, phase_labels, detectors)
        else:
            run_untrusted_phase([state], library, phase_labels, sandbox or DEFAULT_POLICY)
    return state.annotation(library.order())


# ----------------------------------------------------------------- many traces
def _library_setup(library: PatternLibrary, workers: int, backend: Backend | None) -> WorkerSetup:
    """The library in every worker: itself in this process, else rebuilt once per worker
    from its spec (records and sources; detectors hold functions, which do not pickle)."""
    if runs_inline(workers, backend):
        return WorkerSetup(_same, (library,))
    return WorkerSetup(PatternLibrary.from_spec, (library.to_spec(),))


def _same(library: PatternLibrary) -> PatternLibrary:
    return library


def _load(item: Trace | str) -> Trace:
    return item if isinstance(item, Trace) else Trace.load(item)


def _annotate_item(library: PatternLibrary,
                   job: tuple[Trace | str, str, str, str | None, Callable[[Annotation], Any] | None]) -> Any:
    """A whole trace through a trusted-only library (in a worker, or in this process),
    saved where it is made when a path is given (the parent does not write it), and
    reduced there by ``summary`` when given (less to send back)."""
    item, trace_id, on_error, save_path, summary = job
    try:
        trace = _load(item)
    except TraceFormatError as exc:
        if on_error == "raise":
            raise
        ann = unreadable(trace_id, library.order(), exc)
    else:
        state = TraceState(trace, trace_id)
        run_trusted_phase(state, library, library.order())
        ann = _saved(state.annotation(library.order()), save_path)
    return ann if summary is None else summary(ann)


def _saved(annotation: Annotation, path: str | None) -> Annotation:
    """``annotation``, written to ``path`` first (not an unreadable trace's empty one)."""
    if path is not None and TRACE_ERROR_KEY not in annotation.errors:
        annotation.save(path)  # a failure is a WriteError naming the file
    return annotation


def _trusted_phase_item(library: PatternLibrary, job: tuple[Any, ...]) -> tuple[dict, dict, dict]:
    """One trusted phase on one trace of a batch, in a worker, given what earlier phases
    produced; returns what it added. A path is read again here (it was read fine in the
    parent): smaller to send than the trace."""
    item, trace_id, labels, events, errors = job
    state = TraceState(_load(item), trace_id, dict(events), {}, dict(errors))
    run_trusted_phase(state, library, labels)
    return state.result(labels)


def annotate_iter(
    traces_or_paths: Iterable[Trace | str | os.PathLike],
    library: PatternLibrary,
    workers: int = 1,
    *,
    trace_ids: Sequence[str] | None = None,
    on_error: str = "raise",
    sandbox: SandboxPolicy | None = None,
    save_to: Sequence[str | os.PathLike] | None = None,
    backend: Backend | None = None,
    summary: Callable[[Annotation], Any] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Annotate many traces (objects or ``.npz`` paths), yielding ``(index, annotation)``
    as each trace is done (with ``workers > 1`` not necessarily in input order).

    Arguments as `annotate_many`; ``save_to`` (one path per trace) writes each
    annotation (`Annotation.save`) before it is yielded, in the worker that made it
    when the library is trusted (the writes run in parallel too; on a cluster the
    path must be on a shared file system), else in this process. An unreadable
    trace's empty annotation is not written. A write that fails raises `WriteError`
    naming the file. The arguments are checked, and the AST gate has
    looked at every untrusted detector, when this is called (a rejection raises
    `LibraryError` before anything runs). Stopping the iteration (or Ctrl-C) stops
    the workers; the annotations already yielded are complete. ``summary`` (a picklable
    function of an annotation) is applied where each annotation is made and its result
    yielded instead: a caller that saved the annotations and needs only a few numbers
    back spares the pickling of every event.
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    items: list[Trace | str] = [t if isinstance(t, Trace) else str(t) for t in traces_or_paths]
    if trace_ids is not None and len(trace_ids) != len(items):
        raise ValueError(f"trace_ids has {len(trace_ids)} entries for {len(items)} traces")
    if save_to is not None and len(save_to) != len(items):
        raise ValueError(f"save_to has {len(save_to)} paths for {len(items)} traces")
    paths = [str(p) for p in save_to] if save_to is not None else [None] * len(items)
    ids = list(trace_ids) if trace_ids is not None else [
        it if isinstance(it, str) else str(it.meta.get("trace_id") or f"#{i}") for i, it in enumerate(items)
    ]
    check_untrusted(library)
    workers = max(1, min(workers, len(items)))
    # started here, not on the first result: a local pool forks now, before the caller's
    # progress bar starts a thread (forking a threaded process needs a slow fork server)
    executor = make_executor(workers, _library_setup(library, workers, backend), backend=backend)
    return _run(items, ids, paths, library, executor, on_error, sandbox or DEFAULT_POLICY, summary)


def _run(items: list[Trace | str], ids: list[str], paths: list[str | None], library: PatternLibrary,
         executor: Executor, on_error: str, policy: SandboxPolicy,
         summary: Callable[[Annotation], Any] | None) -> Iterator[tuple[int, Any]]:
    phases = plan_phases(library)
    with executor:
        if len(phases) == 1 and phases[0][0]:  # trusted only: each trace is one job
            yield from executor.imap(_annotate_item, [(it, ids[i], on_error, paths[i], summary)
                                                      for i, it in enumerate(items)])
        else:
            for i, ann in _batched(items, ids, library, phases, executor, on_error, policy):
                ann = _saved(ann, paths[i])
                yield i, ann if summary is None else summary(ann)


def _batched(items: list[Trace | str], ids: list[str], library: PatternLibrary, phases: list[Phase],
             executor: Executor, on_error: str, policy: SandboxPolicy) -> Iterator[tuple[int, Annotation]]:
    """Batches of traces through every phase: trusted ones over the executor, untrusted
    ones in the sandbox from this process; a batch's annotations in input order."""
    labels = library.order()
    size = max(1, policy.batch_traces)
    for start in range(0, len(items), size):
        batch = range(start, min(len(items), start + size))
        states: dict[int, TraceState] = {}
        done: dict[int, Annotation] = {}
        for i in batch:
            try:
                states[i] = TraceState(_load(items[i]), ids[i])
            except TraceFormatError as exc:
                if on_error == "raise":
                    raise
                done[i] = unreadable(ids[i], labels, exc)
        index = list(states)
        for trusted, phase_labels in phases:
            if not index:
                break
            if not trusted:
                run_untrusted_phase([states[i] for i in index], library, phase_labels, policy)
                continue
            if executor.workers <= 1 or len(index) == 1:  # here, on the traces already loaded
                for i in index:
                    run_trusted_phase(states[i], library, phase_labels)
                continue
            needed = needed_labels(library, phase_labels)
            jobs = [(items[i], ids[i], phase_labels, *states[i].given(needed)) for i in index]
            for k, added in executor.imap(_trusted_phase_item, jobs):
                states[index[k]].merge(*added)
        for i in batch:
            yield i, done[i] if i in done else states[i].annotation(labels)


def annotate_many(
    traces_or_paths: Iterable[Trace | str | os.PathLike],
    library: PatternLibrary,
    workers: int = 1,
    progress: bool = False,
    *,
    trace_ids: Sequence[str] | None = None,
    on_error: str = "raise",
    sandbox: SandboxPolicy | None = None,
    backend: Backend | None = None,
) -> list[Annotation]:
    """Annotate many traces (objects or ``.npz`` paths); results in input order.

    ``workers > 1`` maps the work over a process pool (`simpatterns.parallel`; on a Ray
    cluster with ``backend=Backend("ray")``); the
    library travels as manifest records plus sources and is rebuilt once per worker.
    Trace ids default to the file path for paths and ``#i`` for trace objects.
    ``on_error="record"`` turns an unreadable trace file into an empty annotation
    whose ``errors[TRACE_ERROR_KEY]`` says why, instead of raising `TraceFormatError`.
    Untrusted detectors run in one sandbox from this process (pool workers run only
    trusted ones), one job per pattern and batch of traces, under ``sandbox``.
    `annotate_iter` yields each annotation as it is done instead.
    """
    items = list(traces_or_paths)
    out: list[Annotation | None] = [None] * len(items)
    with ProgressBar("annotating", len(items), enabled=progress) as bar:
        for i, ann in annotate_iter(items, library, workers, trace_ids=trace_ids, on_error=on_error,
                                    sandbox=sandbox, backend=backend):
            out[i] = ann
            bar.advance()
    return [a for a in out if a is not None]


def trace_files(path: str | os.PathLike) -> list[Path]:
    """``path`` itself if it is a file, else the ``.npz`` files under it (recursively, sorted)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(q for q in p.rglob("*.npz") if q.is_file() and not q.name.startswith("."))
    raise FileNotFoundError(f"{p}: no such file or directory")
