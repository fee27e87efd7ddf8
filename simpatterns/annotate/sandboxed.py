"""Annotation with untrusted (LLM-written) detectors: they run only in the evolver's sandbox.

`simpatterns.annotate.annotator.annotate` / `annotate_many` hand a library
that holds untrusted detectors (``Detector.trusted`` is False, see
`simpatterns.detectors.library`) to `annotate_items`. Trusted detectors run
in-process as always; untrusted ones run in `simpatterns.evolve.sandbox.Sandbox`
(a fork server that already imported numpy; each job is one confined child),
one job per (pattern, batch of traces) rather than one per (pattern, trace).

The library is cut into *phases* that alternate trusted / untrusted:

- a trusted pattern runs in the earliest trusted phase after all its
  dependencies (trusted ones of the same phase run before it, in order);
- an untrusted pattern runs in the earliest untrusted phase after all its
  dependencies, and strictly after untrusted ones it reads, so the patterns
  of one untrusted phase are independent and share one set of dependency events.

Trusted phases run per trace (in the caller's process pool when ``workers > 1``,
whose workers never start a sandbox); untrusted phases run from the parent.
Dependencies travel as plain data both ways: a trusted detector may read an
untrusted one's events and the other way round.

A sandbox rejection (timeout, crash, exception, malformed events, ...) is that
pattern's entry in ``Annotation.errors`` on the traces it ran on; dependents
are skipped there as for in-process failures. When a multi-trace job fails for
a reason one trace can cause (an exception, bad events) each trace is run
again alone, so one bad trace costs only its own events; a job that runs out
of time or memory is not retried (that could cost the budget once per trace),
and every trace of it gets the error. Timings are the seconds ``detect`` took
per trace as measured in the sandbox child (a rejected job: its wall time
shared among its traces).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import re
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simpatterns.annotation import Annotation, EventList
from simpatterns.detectors.contract import DetectorError
from simpatterns.detectors.library import PatternLibrary
from simpatterns.trace import Trace, TraceFormatError

# Rejections that cost their whole budget: retrying trace by trace could cost it once per trace.
_NO_RETRY = frozenset({"timeout", "cpu_limit", "memory", "output_limit", "output_too_large", "sandbox_error"})


@dataclass(frozen=True)
class SandboxPolicy:
    """How annotation runs untrusted detectors in the sandbox."""

    trace_timeout_s: float = 10.0  # wall clock per trace; a job over n traces gets n times this ...
    job_timeout_s: float = 600.0  # ... up to this
    memory_mb: int = 2048  # address space a child may add to the pre-warmed server's
    max_events_per_trace: int = 100_000
    batch_traces: int = 256  # traces per sandbox job (and held in memory at once)
    workers: int = 1  # fork servers of the shared sandbox (untrusted patterns of a phase run in parallel)

    def limits(self, n_traces: int) -> Any:
        from simpatterns.evolve.sandbox import SandboxLimits

        n_smoke = min(2, n_traces)
        timeout = min(self.job_timeout_s, self.trace_timeout_s * n_traces)
        return SandboxLimits(timeout_s=timeout, smoke_timeout_s=min(timeout, self.trace_timeout_s * n_smoke),
                             n_smoke=n_smoke, memory_mb=self.memory_mb,
                             max_events_per_trace=self.max_events_per_trace, max_result_bytes=256 << 20)


DEFAULT_POLICY = SandboxPolicy()


def plan_phases(library: PatternLibrary) -> list[tuple[bool, list[str]]]:
    """``[(trusted, labels), ...]`` in run order; see the module docstring."""
    phase: dict[str, int] = {}
    for label in library.order():
        det = library.get(label)
        p = 0 if det.trusted else 1  # even phases: trusted, odd: untrusted
        for d in det.depends:
            d_trusted = library.get(d).trusted
            if det.trusted:
                need = phase[d] if d_trusted else phase[d] + 1
            else:
                need = phase[d] + 1 if d_trusted else phase[d] + 2
            p = max(p, need)
        phase[label] = p
    order = library.order()
    return [(n % 2 == 0, [k for k in order if phase[k] == n]) for n in sorted(set(phase.values()))]


# ------------------------------------------------------------ shared sandbox
class _SharedSandbox:
    """One sandbox per process, started on first use and reused across calls (a server
    start costs ~0.2 s; a job ~10 ms). A forked child never uses its parent's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sandbox: Any = None
        self.pid = 0
        self.workers = 0

    def get(self, traces: Sequence[Trace], policy: SandboxPolicy) -> Any:
        """The sandbox holding ``traces``; call with ``self.lock`` held."""
        from simpatterns.evolve.sandbox import Sandbox

        if self.sandbox is not None and (self.pid != os.getpid() or self.workers != max(1, policy.workers)):
            if self.pid == os.getpid():
                self.sandbox.close()
            self.sandbox = None  # inherited through fork: its servers belong to the parent
        if self.sandbox is None:
            self.sandbox = Sandbox(traces, workers=policy.workers, limits=policy.limits(len(traces)))
            self.pid, self.workers = os.getpid(), max(1, policy.workers)
        else:
            self.sandbox.load_traces(traces)
        # the parent-side event check reads the sandbox's own limits
        self.sandbox.limits = policy.limits(len(traces))
        return self.sandbox

    def close(self) -> None:
        with self.lock:
            if self.sandbox is not None and self.pid == os.getpid():
                self.sandbox.close()
            self.sandbox = None


_SHARED = _SharedSandbox()
atexit.register(_SHARED.close)


def close_shared_sandbox() -> None:
    """Stop this process's annotation sandbox now (it is stopped at exit anyway)."""
    _SHARED.close()


# ------------------------------------------------------------ one trace's state
@dataclass
class _State:
    trace: Trace
    trace_id: str
    events: dict[str, EventList] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        from simpatterns.annotate.annotator import _default_id

        return self.trace_id or _default_id(self.trace)


def _skip_message(label: str, name: str, failed: list[str]) -> str:
    return (f"pattern {label!r} on trace {name!r}: skipped because its dependency "
            f"{', '.join(repr(d) for d in failed)} failed")


def _run_trusted(trace: Trace, trace_id: str, library: PatternLibrary, labels: list[str],
                 events: dict[str, EventList], errors: dict[str, str]) -> tuple[dict, dict, dict]:
    """Run trusted ``labels`` in-process on one trace, given earlier phases' events and
    errors; returns this phase's (events, timings, errors)."""
    from simpatterns.annotate.annotator import _default_id, _guarded, _strip_where, run_detector

    name = trace_id or _default_id(trace)
    guarded = _guarded(trace)
    events, errors = dict(events), dict(errors)
    new_events: dict[str, EventList] = {}
    timings: dict[str, float] = {}
    new_errors: dict[str, str] = {}
    for label in labels:
        det = library.get(label)
        failed = [d for d in det.depends if d in errors]
        if failed:
            errors[label] = new_errors[label] = _skip_message(label, name, failed)
            timings[label] = 0.0
            continue
        t0 = time.perf_counter()
        try:
            events[label] = new_events[label] = run_detector(det, guarded, events)
        except DetectorError as exc:
            errors[label] = new_errors[label] = f"pattern {label!r} on trace {name!r}: {_strip_where(exc)}"
        timings[label] = time.perf_counter() - t0
    return new_events, timings, new_errors


def _pool_run_trusted(index: int, item: Trace | str, trace_id: str, labels: list[str],
                      events: dict[str, EventList], errors: dict[str, str]) -> tuple[int, tuple[dict, dict, dict]]:
    from simpatterns.annotate import annotator

    assert annotator._WORKER_LIBRARY is not None
    trace = item if isinstance(item, Trace) else Trace.load(item)  # read fine in the parent
    return index, _run_trusted(trace, trace_id, annotator._WORKER_LIBRARY, labels, events, errors)


# ------------------------------------------------------------ the driver
def annotate_items(
    items: Sequence[Trace | str],
    trace_ids: Sequence[str],
    library: PatternLibrary,
    *,
    workers: int = 1,
    on_error: str = "raise",
    advance: Callable[[], None] | None = None,
    policy: SandboxPolicy | None = None,
) -> list[Annotation]:
    """Annotate traces (objects or ``.npz`` paths) with a library holding untrusted
    detectors; results in input order, as `annotator.annotate_many` documents."""
    from simpatterns.annotate.annotator import TRACE_ERROR_KEY, _pool_context, _worker_init

    policy = policy or DEFAULT_POLICY
    phases = plan_phases(library)
    labels = library.order()
    out: list[Annotation] = []
    pool: ProcessPoolExecutor | None = None
    try:
        for start in range(0, len(items), max(1, policy.batch_traces)):
            chunk = list(range(start, min(len(items), start + max(1, policy.batch_traces))))
            states: list[_State] = []
            results: dict[int, Annotation] = {}
            for i in chunk:
                item = items[i]
                if isinstance(item, Trace):
                    trace = item
                else:
                    try:
                        trace = Trace.load(item)
                    except TraceFormatError as exc:
                        if on_error == "raise":
                            raise
                        results[i] = Annotation(pattern_events={}, num_frames=0, patterns=labels, trace_id=trace_ids[i],
                                                errors={TRACE_ERROR_KEY: str(exc)})
                        continue
                states.append(_State(trace, trace_ids[i]))
            index = [i for i in chunk if i not in results]
            for trusted, phase_labels in phases:
                if not states:
                    break
                if trusted:
                    if workers > 1 and len(states) > 1 and pool is None:
                        ctx = multiprocessing.get_context(_pool_context())
                        pool = ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx,
                                                   initializer=_worker_init, initargs=(library.to_spec(),))
                    _trusted_phase(states, [items[i] for i in index], library, phase_labels, pool)
                else:
                    _untrusted_phase(states, library, phase_labels, policy)
            for i, st in zip(index, states):
                results[i] = Annotation(pattern_events=st.events, num_frames=st.trace.num_frames, patterns=labels,
                                        dt=st.trace.dt, trace_id=st.trace_id,
                                        timings={k: st.timings.get(k, 0.0) for k in labels}, errors=st.errors)
            for i in chunk:
                out.append(results[i])
                if advance:
                    advance()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return out


def _needed(library: PatternLibrary, labels: list[str]) -> set[str]:
    """Labels outside ``labels`` that they read."""
    inside = set(labels)
    return {d for k in labels for d in library.get(k).depends if d not in inside}


def _trusted_phase(states: list[_State], items: list[Trace | str], library: PatternLibrary,
                   labels: list[str], pool: ProcessPoolExecutor | None) -> None:
    needed = _needed(library, labels)

    def given(st: _State) -> tuple[dict, dict]:
        return ({k: v for k, v in st.events.items() if k in needed},
                {k: v for k, v in st.errors.items() if k in needed})

    if pool is None:
        for st in states:
            ev, tm, er = _run_trusted(st.trace, st.trace_id, library, labels, *given(st))
            st.events.update(ev), st.timings.update(tm), st.errors.update(er)
        return
    futures = [pool.submit(_pool_run_trusted, k, item, st.trace_id, labels, *given(st))
               for k, (st, item) in enumerate(zip(states, items))]
    for fut in futures:
        k, (ev, tm, er) = fut.result()
        states[k].events.update(ev), states[k].timings.update(tm), states[k].errors.update(er)


def _untrusted_phase(states: list[_State], library: PatternLibrary, labels: list[str], policy: SandboxPolicy) -> None:
    from simpatterns.evolve.sandbox import SandboxError

    needed = sorted(_needed(library, labels))
    traces = [st.trace for st in states]
    with _SHARED.lock:
        t0 = time.perf_counter()
        try:
            sandbox = _SHARED.get(traces, policy)
            # a dependency that failed on a trace: [] there (the pattern is skipped on it anyway)
            if needed or sandbox.dependency_labels:  # each change costs the servers' spare child
                sandbox.set_dependency_events({d: [st.events.get(d, []) for st in states] for d in needed})
        except (SandboxError, OSError, TimeoutError, EOFError) as exc:
            if _SHARED.sandbox is not None:  # start afresh next time
                _close_quietly(_SHARED.sandbox)
                _SHARED.sandbox = None
            wall = (time.perf_counter() - t0) / max(1, len(states))
            for label in labels:
                for st in states:
                    st.errors[label] = f"pattern {label!r} on trace {st.name!r}: the sandbox failed to start: {exc}"
                    st.timings[label] = wall
            return
        broken: list[BaseException] = []

        def one(label: str) -> None:
            try:
                _run_untrusted(sandbox, states, library, label, policy)
            except (SandboxError, OSError, TimeoutError, EOFError) as exc:  # the machinery, not the detector
                broken.append(exc)
                for st in states:
                    if label not in st.events and label not in st.errors:
                        st.errors[label] = f"pattern {label!r} on trace {st.name!r}: the sandbox failed: {exc}"
                        st.timings[label] = 0.0

        if policy.workers > 1 and len(labels) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=policy.workers) as threads:
                list(threads.map(one, labels))
        else:
            for label in labels:
                one(label)
        if broken:  # start afresh next time
            _close_quietly(sandbox)
            _SHARED.sandbox = None


def _close_quietly(sandbox: Any) -> None:
    try:
        sandbox.close()
    except Exception:  # noqa: BLE001 - already failing; the error is reported per pattern
        pass


def _run_untrusted(sandbox: Any, states: list[_State], library: PatternLibrary, label: str,
                   policy: SandboxPolicy) -> None:
    """One pattern on every trace of the phase: one sandbox job, per-trace retries when
    the job fails for a reason one trace can cause."""
    det = library.get(label)
    run: list[int] = []
    for k, st in enumerate(states):
        failed = [d for d in det.depends if d in st.errors]
        if failed:
            st.errors[label] = _skip_message(label, st.name, failed)
            st.timings[label] = 0.0
        else:
            run.append(k)
    if not run:
        return
    res = sandbox.evaluate(det.source, det.pattern, det.params, det.depends,
                           limits=policy.limits(len(run)), traces=run, body_params=det.body_params,
                           duration=det.duration)
    if res.ok:
        for j, k in enumerate(run):
            states[k].events[label] = res.events[j]
            states[k].timings[label] = float(res.times[j])
        return
    if len(run) == 1 or res.reason.code in _NO_RETRY:
        _fail(states, run, label, res)
        return
    for n, k in enumerate(run):
        one = sandbox.evaluate(det.source, det.pattern, det.params, det.depends,
                               limits=policy.limits(1), traces=[k], body_params=det.body_params,
                               duration=det.duration)
        if one.ok:
            states[k].events[label] = one.events[0]
            states[k].timings[label] = float(one.times[0])
        elif one.reason.code in _NO_RETRY:  # stop paying the budget trace after trace
            _fail(states, run[n:], label, one)
            return
        else:
            _fail(states, [k], label, one)


def _fail(states: list[_State], run: list[int], label: str, res: Any) -> None:
    share = res.wall_s / max(1, len(run))
    reason = res.reason
    detail = reason.detail
    if len(run) == 1:  # "trace 3: ..." counts traces inside the job; the message names the trace already
        detail = re.sub(r"^trace \d+:? ", "", detail)
    text = f"{reason.code}: {' '.join(detail.split())}" if detail else reason.code
    for k in run:
        st = states[k]
        st.errors[label] = f"pattern {label!r} on trace {st.name!r}: rejected by the sandbox ({text[:300]})"
        st.timings[label] = share
