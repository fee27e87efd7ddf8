"""The sandbox over an executor: every worker holds its own `Sandbox` of the job's traces.

On the local backend a job uses one `Sandbox` (a pool of fork servers on this
machine). On a cluster (``--executor ray``) `ExecutorSandbox` offers the same
interface, but each of the executor's workers builds its own one-server
`Sandbox` of the same traces (once per worker, `simpatterns.parallel.WorkerSetup`),
and `evaluate` sends the candidate to the least busy worker, so a candidate still
only ever runs in a confined child of a fork server. What a candidate reads
from the library (its ``DEPENDS``) travels with it, tagged with the version of
the library's events, and a worker replaces its server's copy when the version
moves on. `open_sandbox` picks the one that fits the backend it is given.
"""

from __future__ import annotations

from typing import Any, Sequence

from simpatterns.annotation import EventList
from simpatterns.detectors.contract import Candidate, Detector
from simpatterns.parallel import Backend, WorkerSetup, as_backend, make_executor
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.sandbox.pool import Sandbox, SandboxResult
from simpatterns.sandbox.reasons import Reason
from simpatterns.trace import Trace


class _WorkerSandbox:
    """A worker's own sandbox, and which version of the dependency events its server holds."""

    def __init__(self, traces: list[Trace], limits: SandboxLimits, unsafe: bool = False):
        self.sandbox = Sandbox(traces, workers=1, limits=limits, unsafe=unsafe)
        self.version = -1
        self.deps: dict[str, list[EventList]] = {}

    def evaluate(self, job: tuple[Any, ...]) -> SandboxResult:
        program, limits, traces, version, deps = job
        if version != self.version or not set(deps) <= set(self.deps):
            self.deps = dict(deps) if version != self.version else {**self.deps, **deps}
            self.version = version
            self.sandbox.set_dependency_events(self.deps)
        return self.sandbox.evaluate(program, limits, traces)


def _evaluate(worker: _WorkerSandbox, job: tuple[Any, ...]) -> SandboxResult:
    return worker.evaluate(job)


class ExecutorSandbox:
    """`Sandbox`'s interface (`evaluate`, `set_dependency_events`, `close`, ...) over
    ``workers`` executor workers, each with a one-server `Sandbox` of ``traces``;
    ``evaluate`` is thread-safe and returns what a local `Sandbox` would."""

    def __init__(self, traces: Sequence[Trace], workers: int = 2, limits: SandboxLimits | None = None,
                 backend: str | Backend | None = None, unsafe: bool = False):
        if not traces:
            raise ValueError("the sandbox needs at least one trace")
        self.traces = list(traces)
        self.limits = limits or SandboxLimits()
        self.unsafe = bool(unsafe)  # travels to every worker's sandbox with the setup
        self.root = ""  # no directory on this machine: each worker's sandbox has its own
        self._executor = make_executor(workers, WorkerSetup(_WorkerSandbox, (self.traces, self.limits, self.unsafe)),
                                       backend=backend)
        self._deps: dict[str, list[EventList]] = {}
        self._version = 0

    @property
    def info(self) -> dict[str, Any]:
        return {"executor": type(self._executor).__name__, "workers": self._executor.workers}

    @property
    def server_pids(self) -> list[int]:
        return []  # the servers live on the workers' machines

    @property
    def pids_seen(self) -> set[int]:
        return set()

    @property
    def dependency_labels(self) -> list[str]:
        return sorted(self._deps)

    def set_dependency_events(self, events: dict[str, list[EventList]]) -> None:
        """As `Sandbox.set_dependency_events`; the workers get them with their next candidate."""
        for label, per_trace in events.items():
            if len(per_trace) != len(self.traces):
                raise ValueError(f"dependency events of {label!r} cover {len(per_trace)} traces, expected {len(self.traces)}")
        self._deps = {k: [list(v) for v in per] for k, per in events.items()}
        self._version += 1

    def settle(self) -> None:
        """Nothing to wait for here: each worker's sandbox settles its own server."""

    def evaluate(self, program: Candidate | Detector, limits: SandboxLimits | None = None,
                 traces: Sequence[int] | None = None) -> SandboxResult:
        """As `Sandbox.evaluate`, on the least busy worker's sandbox."""
        depends = program.declarations.depends
        missing = [d for d in depends if d not in self._deps]
        if missing:
            return SandboxResult(Reason(R.UNKNOWN_DEPENDENCY, f"no events for {missing} in this job"))
        deps = {d: self._deps[d] for d in depends}
        job = (program, limits, None if traces is None else list(traces), self._version, deps)
        return self._executor.submit(_evaluate, job).result()

    def close(self) -> None:
        self._executor.close()

    def __enter__(self) -> "ExecutorSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sandbox(traces: Sequence[Trace], workers: int = 2, limits: SandboxLimits | None = None,
                 unsafe: bool = False, backend: str | Backend | None = None) -> Sandbox | ExecutorSandbox:
    """The job's sandbox on ``backend`` (None: this machine): a local `Sandbox` of ``workers``
    fork servers, or on a cluster an `ExecutorSandbox` of ``workers`` workers with one
    server each. ``unsafe``: run candidates even below the stated minimum (``--unsafe-sandbox``)."""
    if as_backend(backend).name == "local":
        return Sandbox(traces, workers=workers, limits=limits, unsafe=unsafe)
    return ExecutorSandbox(traces, workers=workers, limits=limits, unsafe=unsafe, backend=backend)
