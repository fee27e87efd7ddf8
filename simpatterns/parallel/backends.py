"""Which executor runs a job: a `Backend` names where (this machine, a Ray cluster), and
`make_executor` builds the executor for it. The backend is always passed explicitly
(``backend=``); none given means this machine."""

from __future__ import annotations

from dataclasses import dataclass

from simpatterns.parallel.base import Executor, InlineExecutor, WorkerSetup
from simpatterns.parallel.process import ProcessExecutor

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Backend:
    """Where mapped work runs: ``name`` is ``"local"`` (this machine's processes) or
    ``"ray"`` (a Ray cluster); ``address`` is an existing Ray cluster's address (None:
    a local cluster is started on first use). Raises ValueError naming a bad value.

    Examples:
        >>> Backend("ray", "10.0.0.5:6379").address
        '10.0.0.5:6379'
    """

    name: str = "local"
    address: str | None = None

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ValueError(f"--executor must be one of {', '.join(BACKENDS)}, got {self.name!r}")
        if self.address is not None and self.name != "ray":
            raise ValueError(f"--address {self.address!r} needs --executor ray")

    @staticmethod
    def from_options(executor: str, address: str | None = None) -> Backend:
        """What the commands' ``--executor``/``--address`` name, checked before any work
        starts: ValueError with one line for a bad name, a missing Ray install or an
        address where nothing listens."""
        from simpatterns.parallel.ray_backend import check_ray_address, import_ray

        backend = Backend(executor, address or None)
        if backend.name == "ray":
            try:
                import_ray()
                check_ray_address(backend.address)
            except (ImportError, ConnectionError) as exc:
                raise ValueError(str(exc)) from None
        return backend


LOCAL = Backend()


def as_backend(backend: str | Backend | None) -> Backend:
    """``backend`` as a `Backend` (a name, a `Backend`, or None for this machine)."""
    if backend is None:
        return LOCAL
    return backend if isinstance(backend, Backend) else Backend(backend)


def runs_inline(workers: int, backend: str | Backend | None = None) -> bool:
    """Whether `make_executor` with these arguments runs in this process (no pickling)."""
    return as_backend(backend).name == "local" and workers <= 1


def make_executor(workers: int = 1, setup: WorkerSetup | None = None, *,
                  backend: str | Backend | None = None) -> Executor:
    """The executor for ``workers`` on ``backend`` (a name or a `Backend`; None: this
    machine). Local: ``workers <= 1`` runs in this process, more in a process pool
    started now. Ray: ``workers`` actors on the cluster.

    Examples:
        >>> with make_executor(1) as ex:
        ...     ex.map(abs, [-2, 3])
        [2, 3]
    """
    chosen = as_backend(backend)
    if chosen.name == "ray":
        from simpatterns.parallel.ray_backend import (
            RayExecutor,  # Ray is an optional extra
        )

        return RayExecutor(workers, setup, address=chosen.address)
    if workers <= 1:
        return InlineExecutor(setup)
    return ProcessExecutor(workers, setup, start=True)
