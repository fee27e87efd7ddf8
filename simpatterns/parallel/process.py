"""The local process pool: `ProcessExecutor`, and holding Ctrl-C back while the pool's
locks are taken (`_shielded`)."""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from simpatterns.parallel.base import Executor, WorkerSetup, _first_result
from simpatterns.parallel.lifetime import end_with_job
from simpatterns.parallel.worker import (
    STOP_GRACE_S,
    WorkerStopped,
    _install_stop_handlers,
    _run_items,
)

_WORKER_STATE: Any = None
_WORKER_HAS_STATE = False


def _worker_init(setup: WorkerSetup | None, job_pid: int, parent_signal: bool) -> None:
    global _WORKER_STATE, _WORKER_HAS_STATE
    end_with_job(job_pid, parent_signal=parent_signal)
    _install_stop_handlers()
    if setup is not None:
        _WORKER_STATE = setup.build(*setup.args)
        _WORKER_HAS_STATE = True



def _run_chunk(fn: Callable[..., Any], chunk: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    try:
        return _run_items(fn, chunk, _WORKER_STATE, _WORKER_HAS_STATE)
    except WorkerStopped:
        os._exit(1)  # the item has unwound; the pool would otherwise wait for the next one



def start_method() -> str:
    """``fork`` when this process runs one thread (fast, and a script without a
    ``__main__`` guard is not re-run in the workers), else ``forkserver`` (forking a
    threaded process can deadlock on a lock another thread held), else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform != "darwin":
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"



_WAIT_S = 0.1  # the longest a Ctrl-C waits (`_shielded`) while results are awaited


class _Held:
    """A signal handler that records its signal instead of acting on it (`_shielded`)."""

    def __init__(self) -> None:
        self.caught: list[int] = []

    def __call__(self, signum: int, frame: Any) -> None:
        self.caught.append(signum)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Ctrl-C (and SIGTERM) are held back while the block runs and acted on when it ends.

    The block calls into concurrent.futures, whose lock handling a KeyboardInterrupt can
    cut in half (raised between acquiring a future's lock and the ``try`` that releases
    it): the lock stays held, the pool's manager thread waits for it for ever, and the
    process never exits. Blocks are short (waits use a timeout), so a stop is still
    prompt. Only in the main thread, and only over Python's own or our handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = _Held()
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if isinstance(handler, _Held) or not callable(handler):
            continue  # already held by an outer block, or ignored / default (nothing to raise)
        previous[sig] = signal.signal(sig, held)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(held.caught):
            previous[sig](sig, None)  # what it would have done (KeyboardInterrupt), now, out here


# Pools still open when the interpreter exits are stopped first. A Ctrl-C that lands while a
# pool is being made or closed can leave it open, its workers idle, and multiprocessing's own
# exit handler would then wait for them for ever. Strong references: an executor dropped
# unclosed still has live workers.
_OPEN_POOLS: set[ProcessExecutor] = set()


def _stop_open_pools() -> None:
    for executor in list(_OPEN_POOLS):
        try:
            executor.stop()
        except Exception:  # noqa: BLE001 - exiting: the others still get stopped
            pass


atexit.register(_stop_open_pools)  # after multiprocessing's handler (imported above), so it runs first


class ProcessExecutor(Executor):
    """A local process pool, reused until `close`. With ``start=True`` (what
    `make_executor` does) the workers start at once: a process that has not started a
    thread yet (a progress bar's) can still fork them, far faster than a fork server
    that imports everything again."""

    def __init__(self, workers: int, setup: WorkerSetup | None = None, *, start: bool = False):
        self.workers = max(1, int(workers))
        self._setup = setup
        self._pool: ProcessPoolExecutor | None = None
        self._submit_lock = threading.Lock()
        if start:
            self._ensure_pool()

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            with _shielded():
                self._start_pool()
        assert self._pool is not None
        return self._pool

    def _start_pool(self) -> None:
        ctx = multiprocessing.get_context(start_method())
        # fork: this thread forks every worker now and it is the only one (`start_method`), so
        # it lasts as long as the job; forkserver: the fork server's only thread forks them
        parent_signal = ctx.get_start_method() != "spawn"
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_worker_init,
                                         initargs=(self._setup, os.getpid(), parent_signal))
        if ctx.get_start_method() == "fork":  # the first submit forks every worker, before
            # the pool's own thread (or a progress bar's) starts. This process's objects are
            # frozen meanwhile: a worker's garbage collection would otherwise write to every
            # one of them, copying all their memory pages (Python's advice for fork)
            ours = gc.get_freeze_count() == 0  # a caller's own freeze is left as it is
            if ours:
                gc.freeze()
            try:
                self._pool.submit(int)
            finally:
                if ours:
                    gc.unfreeze()
        _OPEN_POOLS.add(self)

    def submit(self, fn: Callable[..., Any], item: Any) -> Future[Any]:
        with self._submit_lock:
            pool = self._ensure_pool()
            with _shielded():
                inner = pool.submit(_run_chunk, fn, [(0, item)])
        return _first_result(inner)

    def imap(self, fn: Callable[..., Any], items: Iterable[Any], *,
             chunksize: int | None = None) -> Iterator[tuple[int, Any]]:
        chunks = self.chunks(items, chunksize)
        if not chunks:
            return
        pool = self._ensure_pool()
        pending: set[Future[list[tuple[int, Any]]]] = set()
        next_chunk = 0
        max_in_flight = 2 * self.workers  # bounded: Ctrl-C has little to cancel
        try:
            while next_chunk < len(chunks) or pending:
                with _shielded():  # Ctrl-C acts between these calls, never inside them
                    while next_chunk < len(chunks) and len(pending) < max_in_flight:
                        pending.add(pool.submit(_run_chunk, fn, chunks[next_chunk]))
                        next_chunk += 1
                    done, pending = wait(pending, timeout=_WAIT_S, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield from fut.result()
        except BaseException:
            # Ctrl-C, a failed item, or the caller stopped iterating: stop now, not after
            # the work in flight. (No Future.cancel here: the pool's manager thread would fail
            # on a future cancelled behind its back and print a traceback; `stop` cancels.)
            self.stop()
            raise

    def stop(self) -> None:
        with _shielded():  # a second Ctrl-C must not leave workers behind
            self._stop()

    def _stop(self) -> None:
        pool, self._pool = self._pool, None
        _OPEN_POOLS.discard(self)
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())  # no public way to stop workers
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
        # The pool's manager thread closes its wake-up pipe as it ends. Python 3.11's exit
        # handler writes to that pipe unless it is closed already, and a close landing between
        # that check and the write prints an OSError traceback at exit: let the thread end first.
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None and manager is not threading.current_thread():
            manager.join(timeout=STOP_GRACE_S)

    def close(self) -> None:
        pool = self._pool
        if pool is None:
            return
        try:
            with _shielded():
                pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
                _OPEN_POOLS.discard(self)
        except BaseException:  # shutting down failed: stop the workers now
            self.stop()
            raise

