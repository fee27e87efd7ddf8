"""One way to map work over processes: the seam every parallel job goes through.

Dataset generation, annotation, candidate evaluation, variant building and the
optimizer's batches all submit a function over items here and get results as
they finish. The interface is small on purpose, so another backend (a cluster)
plugs in behind it without the callers changing:

- `Executor.imap(fn, items)` yields ``(index, result)`` as results finish;
  `Executor.map` returns them in input order (`base`).
- `WorkerSetup` is built once per worker (a pattern library, an objective) and
  passed to every call as its first argument: ``fn(state, item)``. Without a
  setup the call is ``fn(item)``.
- Items travel in chunks (one message per chunk, not per item).
- Ctrl-C stops promptly: pending work is cancelled, workers are killed (they
  ignore SIGINT themselves, so they print no tracebacks), and the caller keeps
  every result it already received; `KeyboardInterrupt` then propagates.
- No worker outlives its job, however the job ends (SIGKILL and the OOM killer
  included): each worker calls `end_with_job` as it starts (`lifetime`).

``workers <= 1`` runs everything in this process (`InlineExecutor`): the
same results, no pickling, easy to debug. `ProcessExecutor` is the local pool
(`process`). `RayExecutor` runs the same work on a Ray cluster (``pip install
simpatterns[ray]``, `ray_backend`): ``workers`` Ray actors, each building the
setup once, on an existing cluster (``address``) or on a local one started on
first use. Which backend `make_executor` uses is its ``backend`` argument (a
`Backend`; none means this machine): callers take a ``backend`` (or a ready
``executor``) and pass it down, so nothing process-wide decides where work runs.
`Executor.submit` runs one item and returns a `concurrent.futures.Future`, for
callers that feed work as it arrives (the evolver's evaluator threads).
Results never depend on the executor or the number of workers: each item is
computed by the same function from the same inputs. The progress bar the
commands draw is `simpatterns.cli_support.ProgressBar`; `parallel_map` advances
any object with an ``advance()`` method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from simpatterns.parallel.backends import (
    BACKENDS,
    LOCAL,
    Backend,
    as_backend,
    make_executor,
    runs_inline,
)
from simpatterns.parallel.base import (
    Executor,
    InlineExecutor,
    WorkerSetup,
    default_workers,
    split_chunks,
)
from simpatterns.parallel.lifetime import (
    END_GRACE_S,
    JobWatch,
    end_with_job,
    reap_with_job,
)
from simpatterns.parallel.process import (
    _OPEN_POOLS,
    ProcessExecutor,
    _shielded,
    start_method,
)
from simpatterns.parallel.ray_backend import RayExecutor, check_ray_address, ensure_ray
from simpatterns.parallel.worker import WorkerStopped

__all__ = [
    "BACKENDS",
    "END_GRACE_S",
    "LOCAL",
    "_OPEN_POOLS",
    "Backend",
    "Executor",
    "InlineExecutor",
    "JobWatch",
    "ProcessExecutor",
    "Progress",
    "RayExecutor",
    "WorkerSetup",
    "WorkerStopped",
    "_shielded",
    "as_backend",
    "check_ray_address",
    "default_workers",
    "end_with_job",
    "ensure_ray",
    "make_executor",
    "parallel_map",
    "reap_with_job",
    "runs_inline",
    "split_chunks",
    "start_method",
]


class Progress(Protocol):
    """What `parallel_map` reports to: one ``advance()`` per finished item (a progress bar)."""

    def advance(self, n: int = 1) -> None: ...


def parallel_map(
    fn: Callable[..., Any],
    items: Sequence[Any],
    *,
    workers: int = 1,
    setup: WorkerSetup | None = None,
    progress: Progress | None = None,
    chunksize: int | None = None,
    executor: Executor | None = None,
    backend: str | Backend | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(index, result)`` as they finish, over a fresh executor for ``workers`` on
    ``backend`` (None: this machine) or the given ``executor``; ``progress`` is
    advanced once per finished item.

    Examples:
        >>> sorted(parallel_map(abs, [-1, 2, -3]))
        [(0, 1), (1, 2), (2, 3)]
    """
    own = executor is None
    ex = executor or make_executor(workers, setup, backend=backend)
    results = ex.imap(fn, items, chunksize=chunksize)
    try:
        for pair in results:
            if progress is not None:
                progress.advance()
            yield pair
    finally:
        results.close()  # an interrupted or abandoned map stops its workers first
        if own:
            ex.close()
