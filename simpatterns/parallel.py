"""One way to map work over processes: the seam every parallel job goes through.

Dataset generation, annotation, candidate evaluation, variant building and the
optimizer's batches all submit a function over items here and get results as
they finish. The interface is small on purpose, so another backend (a cluster)
plugs in behind it without the callers changing:

- `Executor.imap(fn, items)` yields ``(index, result)`` as results finish;
  `Executor.map` returns them in input order.
- `WorkerSetup` is built once per worker (a pattern library, an objective) and
  passed to every call as its first argument: ``fn(state, item)``. Without a
  setup the call is ``fn(item)``.
- Items travel in chunks (one message per chunk, not per item).
- Ctrl-C stops promptly: pending work is cancelled, workers are killed (they
  ignore SIGINT themselves, so they print no tracebacks), and the caller keeps
  every result it already received; `KeyboardInterrupt` then propagates.
- `parallel_map` adds a progress bar with the time remaining.

``workers <= 1`` runs everything in this process (`InlineExecutor`): the
same results, no pickling, easy to debug. `ProcessExecutor` is the local pool.
Results never depend on the executor or the number of workers: each item is
computed by the same function from the same inputs.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence


@dataclass(frozen=True)
class WorkerSetup:
    """State built once per worker: ``build(*args)``; it must be picklable (args)
    to reach a worker process."""

    build: Callable[..., Any]
    args: tuple[Any, ...] = ()


class Executor(ABC):
    """Maps a function over items; see the module docstring."""

    workers: int = 1

    @abstractmethod
    def imap(self, fn: Callable[..., Any], items: Iterable[Any], *,
             chunksize: int | None = None) -> Iterator[tuple[int, Any]]:
        """``(index, fn(item))`` pairs as they finish (any order)."""

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *, chunksize: int | None = None) -> list[Any]:
        """``fn`` over ``items``, results in input order."""
        items = list(items)
        out: list[Any] = [None] * len(items)
        for i, r in self.imap(fn, items, chunksize=chunksize):
            out[i] = r
        return out

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release workers; the executor cannot be used afterwards."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # Ctrl-C or a failure: stop the work in flight instead of waiting for it
            self.stop()

    def stop(self) -> None:
        """Stop now: cancel pending work and stop the workers (results in flight are lost)."""
        self.close()


class InlineExecutor(Executor):
    """Everything in this process, in input order."""

    def __init__(self, setup: WorkerSetup | None = None):
        self.workers = 1
        self._setup = setup
        self._state: Any = None
        self._built = False

    def _call(self, fn: Callable[..., Any], item: Any) -> Any:
        if self._setup is None:
            return fn(item)
        if not self._built:
            self._state = self._setup.build(*self._setup.args)
            self._built = True
        return fn(self._state, item)

    def imap(self, fn: Callable[..., Any], items: Iterable[Any], *,
             chunksize: int | None = None) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            yield i, self._call(fn, item)


# ------------------------------------------------------------ process pool
_WORKER_STATE: Any = None
_WORKER_HAS_STATE = False


class WorkerStopped(Exception):
    """Raised inside a worker when the parent stops the work (SIGTERM), so the item in
    progress unwinds: its ``finally`` blocks run and no temporary file is left behind."""


_STOPPING = False


_IN_ITEM = False


def _on_sigterm(signum: int, frame: Any) -> None:
    global _STOPPING
    _STOPPING = True
    if not _IN_ITEM:  # waiting for work (or starting): nothing to unwind, exit without a traceback
        os._exit(1)
    raise WorkerStopped("stopped by the parent")


def _worker_init(setup: WorkerSetup | None) -> None:
    global _WORKER_STATE, _WORKER_HAS_STATE
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when work stops
    signal.signal(signal.SIGTERM, _on_sigterm)
    if setup is not None:
        _WORKER_STATE = setup.build(*setup.args)
        _WORKER_HAS_STATE = True


def _run_chunk(fn: Callable[..., Any], chunk: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    global _IN_ITEM
    out = []
    _IN_ITEM = True
    try:
        for i, item in chunk:
            if _STOPPING:
                raise WorkerStopped("stopped by the parent")
            out.append((i, fn(_WORKER_STATE, item) if _WORKER_HAS_STATE else fn(item)))
    except WorkerStopped:
        os._exit(1)  # the item has unwound; the pool would otherwise wait for the next one
    finally:
        _IN_ITEM = False
    return out


def start_method() -> str:
    """``fork`` when this process runs one thread (fast, and a script without a
    ``__main__`` guard is not re-run in the workers), else ``forkserver`` (forking a
    threaded process can deadlock on a lock another thread held), else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform != "darwin":
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


STOP_GRACE_S = 0.5  # how long a stopped worker may take to unwind its item before SIGKILL


def default_chunksize(n_items: int, workers: int) -> int:
    """About eight chunks per worker (load balance), at most 64 items per chunk."""
    return max(1, min(64, math.ceil(n_items / max(1, workers * 8))))


class ProcessExecutor(Executor):
    """A local process pool; workers are started on first use and reused until `close`."""

    def __init__(self, workers: int, setup: WorkerSetup | None = None):
        self.workers = max(1, int(workers))
        self._setup = setup
        self._pool: ProcessPoolExecutor | None = None

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context(start_method())
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                             initializer=_worker_init, initargs=(self._setup,))
        return self._pool

    def imap(self, fn: Callable[..., Any], items: Iterable[Any], *,
             chunksize: int | None = None) -> Iterator[tuple[int, Any]]:
        indexed = list(enumerate(items))
        if not indexed:
            return
        size = chunksize or default_chunksize(len(indexed), self.workers)
        chunks = [indexed[k:k + size] for k in range(0, len(indexed), size)]
        pool = self._ensure_pool()
        pending: set[Future[list[tuple[int, Any]]]] = set()
        next_chunk = 0
        max_in_flight = 2 * self.workers  # bounded: Ctrl-C has little to cancel
        try:
            while next_chunk < len(chunks) or pending:
                while next_chunk < len(chunks) and len(pending) < max_in_flight:
                    pending.add(pool.submit(_run_chunk, fn, chunks[next_chunk]))
                    next_chunk += 1
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield from fut.result()
        except BaseException:
            # Ctrl-C, a failed item, or the caller stopped iterating: stop now, not after
            # the work in flight. (No Future.cancel here: the pool's manager thread would fail
            # on a future cancelled behind its back and print a traceback; `stop` cancels.)
            self.stop()
            raise

    def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # no public way to stop workers
        pool.shutdown(wait=False, cancel_futures=True)  # queued work is dropped by the pool itself
        # SIGTERM first: the item in progress unwinds (temporary files removed); then SIGKILL
        # whatever has not exited after a short grace (a long C call cannot be interrupted)
        for p in processes:
            try:
                p.terminate()
            except (OSError, AttributeError):
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        for p in processes:
            try:
                p.join(timeout=max(0.0, deadline - time.monotonic()))
            except (OSError, AssertionError):
                pass
        for p in processes:
            try:
                if p.is_alive():
                    p.kill()
            except (OSError, AttributeError, AssertionError):
                pass
        for p in processes:
            try:
                p.join(timeout=2)
            except (OSError, AssertionError):
                pass

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


BACKENDS = ("local",)


def make_executor(workers: int = 1, setup: WorkerSetup | None = None, *, backend: str = "local") -> Executor:
    """The executor for ``workers`` on ``backend`` (``"local"``: this machine)."""
    if backend not in BACKENDS:
        raise ValueError(f"executor backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers <= 1:
        return InlineExecutor(setup)
    return ProcessExecutor(workers, setup)


def default_workers() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# ------------------------------------------------------------ progress
class ProgressBar:
    """A progress bar on stderr with done/total, elapsed and remaining time.

    Use as a context manager; `advance` after each finished item and `log` for
    a line above the bar. ``enabled=False`` makes every call a no-op. ``console``:
    a Rich console (default: a new one on stderr)."""

    def __init__(self, description: str, total: int | None, enabled: bool = True, console: Any = None):
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                  console=console or Console(stderr=True), transient=False,
                                  auto_refresh=False)  # no refresh thread: a pool forks safely
        self._last_refresh = 0.0
        self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> "ProgressBar":
        if self._progress is not None:
            self._progress.start()
            self._progress.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.refresh()
            self._progress.stop()

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)
            now = time.monotonic()
            if now - self._last_refresh > 0.1:  # redrawn as items finish, at most 10 times a second
                self._last_refresh = now
                self._progress.refresh()

    def log(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
            self._progress.refresh()


def parallel_map(
    fn: Callable[..., Any],
    items: Sequence[Any],
    *,
    workers: int = 1,
    setup: WorkerSetup | None = None,
    progress: str | None = None,
    chunksize: int | None = None,
    executor: Executor | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(index, result)`` as they finish, over a fresh executor for ``workers`` (or
    the given ``executor``), with a progress bar labelled ``progress`` when given."""
    own = executor is None
    ex = executor or make_executor(workers, setup)
    results = ex.imap(fn, items, chunksize=chunksize)
    try:
        with ProgressBar(progress or "", len(items), enabled=progress is not None) as bar:
            for pair in results:
                bar.advance()
                yield pair
    finally:
        results.close()  # an interrupted or abandoned map stops its workers first
        if own:
            ex.close()
