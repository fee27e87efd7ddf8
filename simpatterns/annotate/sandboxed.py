"""Running a phase of untrusted (LLM-written) detectors: in the sandbox, from this process.

The annotation runner (`simpatterns.annotate.annotator`) hands every untrusted
phase (see `simpatterns.annotate.phases`) here, with the `TraceState` of each
trace of the batch. Untrusted detectors run in one process-wide
`simpatterns.sandbox.pool.Sandbox` (a fork server that already imported numpy;
each job is one confined child), one job per (pattern, batch of traces) rather
than one per (pattern, trace); the sandbox is started on first use and reused.
Their code has passed the AST gate (`simpatterns.sandbox.gate.check_untrusted`)
before the runner got here.

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
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from simpatterns.annotate.phases import TraceState, needed_labels
from simpatterns.detectors.library import PatternLibrary
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.trace import Trace

if TYPE_CHECKING:
    from simpatterns.sandbox.pool import Sandbox, SandboxResult

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
    unsafe: bool = False  # run even where the machine gives less than the stated minimum (--unsafe-sandbox)

    def limits(self, n_traces: int) -> SandboxLimits:
        n_smoke = min(2, n_traces)
        timeout = min(self.job_timeout_s, self.trace_timeout_s * n_traces)
        return SandboxLimits(timeout_s=timeout, smoke_timeout_s=min(timeout, self.trace_timeout_s * n_smoke),
                             n_smoke=n_smoke, memory_mb=self.memory_mb,
                             max_events_per_trace=self.max_events_per_trace, max_result_bytes=256 << 20)


DEFAULT_POLICY = SandboxPolicy()


# ------------------------------------------------------------ shared sandbox
class _SharedSandbox:
    """One sandbox per process, started on first use and reused across calls (a server
    start costs ~0.2 s; a job ~10 ms). A forked child never uses its parent's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sandbox: Sandbox | None = None
        self.pid = 0
        self.workers = 0
        self.unsafe = False

    def get(self, traces: Sequence[Trace], policy: SandboxPolicy) -> Sandbox:
        """The sandbox holding ``traces``; call with ``self.lock`` held."""
        from simpatterns.sandbox.pool import Sandbox  # the sandbox machinery only when it is used

        if self.sandbox is not None and (self.pid != os.getpid() or self.workers != max(1, policy.workers)
                                         or self.unsafe != policy.unsafe):
            if self.pid == os.getpid():
                self.sandbox.close()
            self.sandbox = None  # inherited through fork: its servers belong to the parent
        if self.sandbox is None:
            self.sandbox = Sandbox(traces, workers=policy.workers, limits=policy.limits(len(traces)),
                                   unsafe=policy.unsafe)
            self.pid, self.workers, self.unsafe = os.getpid(), max(1, policy.workers), policy.unsafe
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


def run_untrusted_phase(states: list[TraceState], library: PatternLibrary, labels: list[str],
                        policy: SandboxPolicy) -> None:
    """Run the untrusted ``labels`` (one phase: independent of each other) on every trace
    of ``states`` in the shared sandbox, adding their events, timings and errors."""
    from simpatterns.sandbox.pool import SandboxError, SandboxRefused

    needed = sorted(needed_labels(library, labels))
    traces = [st.trace for st in states]
    with _SHARED.lock:
        t0 = time.perf_counter()
        try:
            try:
                sandbox = _SHARED.get(traces, policy)
            except SandboxRefused:
                raise  # not a detector's failure: the whole run stops with the one line it says
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
                    st.fail(label, f"the sandbox failed to start: {exc}", wall)
            return
        broken: list[BaseException] = []

        def one(label: str) -> None:
            try:
                _run_untrusted(sandbox, states, library, label, policy)
            except (SandboxError, OSError, TimeoutError, EOFError) as exc:  # the machinery, not the detector
                broken.append(exc)
                for st in states:
                    if label not in st.events and label not in st.errors:
                        st.fail(label, f"the sandbox failed: {exc}", 0.0)

        if policy.workers > 1 and len(labels) > 1:
            with ThreadPoolExecutor(max_workers=policy.workers) as threads:
                list(threads.map(one, labels))
        else:
            for label in labels:
                one(label)
        if broken:  # start afresh next time
            _close_quietly(sandbox)
            _SHARED.sandbox = None


def _close_quietly(sandbox: Sandbox) -> None:
    try:
        sandbox.close()
    except Exception:  # noqa: BLE001 - already failing; the error is reported per pattern
        pass


def _run_untrusted(sandbox: Sandbox, states: list[TraceState], library: PatternLibrary, label: str,
                   policy: SandboxPolicy) -> None:
    """One pattern on every trace of the phase: one sandbox job, per-trace retries when
    the job fails for a reason one trace can cause."""
    det = library.get(label)
    run: list[int] = []
    for k, st in enumerate(states):
        failed = st.failed_dependencies(det.depends)
        if failed:
            st.skip(label, failed)
        else:
            run.append(k)
    if not run:
        return
    res = sandbox.evaluate(det, limits=policy.limits(len(run)), traces=run)
    if res.ok:
        for j, k in enumerate(run):
            states[k].done(label, res.events[j], float(res.times[j]))
        return
    if len(run) == 1 or res.reason.code in _NO_RETRY:
        _fail(states, run, label, res)
        return
    for n, k in enumerate(run):
        one = sandbox.evaluate(det, limits=policy.limits(1), traces=[k])
        if one.ok:
            states[k].done(label, one.events[0], float(one.times[0]))
        elif one.reason.code in _NO_RETRY:  # stop paying the budget trace after trace
            _fail(states, run[n:], label, one)
            return
        else:
            _fail(states, [k], label, one)


def _fail(states: list[TraceState], run: list[int], label: str, res: SandboxResult) -> None:
    share = res.wall_s / max(1, len(run))
    reason = res.reason
    detail = reason.detail
    if len(run) == 1:  # "trace 3: ..." counts traces inside the job; the message names the trace already
        detail = re.sub(r"^trace \d+:? ", "", detail)
    text = f"{reason.code}: {' '.join(detail.split())}" if detail else reason.code
    for k in run:
        states[k].fail(label, f"rejected by the sandbox ({text[:300]})", share)
