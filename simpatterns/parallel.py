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
- No worker outlives its job, however the job ends (SIGKILL and the OOM killer
  included): each worker calls `end_with_job` as it starts (see there for how,
  per platform).

``workers <= 1`` runs everything in this process (`InlineExecutor`): the
same results, no pickling, easy to debug. `ProcessExecutor` is the local pool.
`RayExecutor` runs the same work on a Ray cluster (``pip install
simpatterns[ray]``): ``workers`` Ray actors, each building the setup once, on
an existing cluster (``address``) or on a local one started on first use.
Which backend `make_executor` uses is its ``backend`` argument, or else the
process's default (`use_backend`, which the commands' ``--executor`` and
``--address`` options set), so every caller runs on a cluster unchanged.
`Executor.submit` runs one item and returns a `concurrent.futures.Future`, for
callers that feed work as it arrives (the evolver's evaluator threads).
Results never depend on the executor or the number of workers: each item is
computed by the same function from the same inputs.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import math
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from simpatterns.errors import SimpatternsError

BACKENDS = ("local", "ray")
EXECUTOR_HELP = "where work runs: 'local' (this machine's processes) or 'ray' (a Ray cluster; needs the ray extra)"
ADDRESS_HELP = "with --executor ray: the address of an existing Ray cluster (default: start a local one)"


@dataclass(frozen=True)
class Backend:
    """Where mapped work runs: ``name`` is ``"local"`` (this machine's processes) or
    ``"ray"`` (a Ray cluster); ``address`` is an existing Ray cluster's address (None:
    a local cluster is started on first use). Raises ValueError naming a bad value."""

    name: str = "local"
    address: str | None = None

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ValueError(f"--executor must be one of {', '.join(BACKENDS)}, got {self.name!r}")
        if self.address is not None and self.name != "ray":
            raise ValueError(f"--address {self.address!r} needs --executor ray")

    @staticmethod
    def from_options(executor: str, address: str | None = None) -> "Backend":
        """What the commands' ``--executor``/``--address`` name, checked before any work
        starts: ValueError with one line for a bad name or a missing Ray install."""
        backend = Backend(executor, address or None)
        if backend.name == "ray":
            try:
                _import_ray()
                check_ray_address(backend.address)
            except (ImportError, ConnectionError) as exc:
                raise ValueError(str(exc)) from None
        return backend


_default_backend = Backend()


def default_backend() -> Backend:
    """The backend `make_executor` uses when not told (see `use_backend`)."""
    return _default_backend


@contextlib.contextmanager
def use_backend(name: str | Backend = "local", address: str | None = None) -> Iterator[Backend]:
    """Within the block, executors made without an explicit ``backend`` run on this one
    (how ``--executor``/``--address`` reach every job of a command). With ``"ray"`` it
    checks that Ray is installed before anything runs."""
    global _default_backend
    backend = name if isinstance(name, Backend) else Backend(name, address)
    if backend.name == "ray":
        _import_ray()
    previous, _default_backend = _default_backend, backend
    try:
        yield backend
    finally:
        _default_backend = previous


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

    def submit(self, fn: Callable[..., Any], item: Any) -> Future[Any]:
        """Run ``fn`` on one item; the `Future` holds its result (or its exception).
        Safe to call from several threads; items submitted together run in parallel."""
        fut: Future[Any] = Future()
        try:
            fut.set_result(next(iter(self.imap(fn, [item])))[1])
        except Exception as exc:  # noqa: BLE001 - the future carries it to the caller
            fut.set_exception(exc)
        return fut

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


_BUILD_LOCK = threading.Lock()


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
            with _BUILD_LOCK:
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


class WorkerStopped(SimpatternsError):
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


def _install_stop_handlers() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when work stops
    signal.signal(signal.SIGTERM, _on_sigterm)
    sys.unraisablehook = _quiet_stop


def _quiet_stop(unraisable: Any) -> None:
    """A stop that landed inside a ``__del__`` cannot unwind the item (Python prints it and
    goes on): say nothing; `_run_items` stops before the next item."""
    if not isinstance(unraisable.exc_value, WorkerStopped):
        sys.__unraisablehook__(unraisable)


def _worker_init(setup: WorkerSetup | None, job_pid: int, parent_signal: bool) -> None:
    global _WORKER_STATE, _WORKER_HAS_STATE
    end_with_job(job_pid, parent_signal=parent_signal)
    _install_stop_handlers()
    if setup is not None:
        _WORKER_STATE = setup.build(*setup.args)
        _WORKER_HAS_STATE = True


def _run_items(fn: Callable[..., Any], chunk: list[tuple[int, Any]], state: Any, has_state: bool
               ) -> list[tuple[int, Any]]:
    global _IN_ITEM
    out = []
    _IN_ITEM = True
    try:
        for i, item in chunk:
            if _STOPPING:
                raise WorkerStopped("stopped by the parent")
            out.append((i, fn(state, item) if has_state else fn(item)))
    finally:
        _IN_ITEM = False
    return out


def _run_chunk(fn: Callable[..., Any], chunk: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    try:
        return _run_items(fn, chunk, _WORKER_STATE, _WORKER_HAS_STATE)
    except WorkerStopped:
        os._exit(1)  # the item has unwound; the pool would otherwise wait for the next one


# ------------------------------------------------------------ ending with the job
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_POLL_S = 0.2  # how often a process without pidfds (macOS, BSD) looks at its job
END_GRACE_S = 0.5  # how long a process ended by a signal it handles may clean up before SIGKILL


def end_with_job(job_pid: int, *, parent_signal: bool = True, end_signal: int = signal.SIGKILL) -> None:
    """End this process (``end_signal``: SIGKILL, or a signal its handler cleans up on) as
    soon as process ``job_pid`` ends, however it ended (SIGKILL and the OOM killer
    included): call it first thing in a process the job started.

    Linux: the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), then a
    check that the parent is still ``job_pid``, which closes the race with a job that died
    before the signal was set. The signal fires when the *thread* that forked this process
    ends, so ``parent_signal=False`` where that may be a passing thread. When the parent is
    not the job (a fork server forked this process; the job already died) or without the
    signal, a daemon thread waits for the job to end (`JobWatch`). Windows: nothing."""
    if sys.platform == "win32":  # os.kill(pid, 0) sends Ctrl-C there: no probe to poll with
        return
    if parent_signal and _set_parent_death_signal(end_signal) and os.getppid() == job_pid:
        return
    watch = JobWatch(job_pid)
    threading.Thread(target=_end_when_ended, args=(watch, end_signal), name="end-with-job", daemon=True).start()


def _set_parent_death_signal(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class JobWatch:
    """Whether process ``job_pid`` has ended, for a process it started: on a pidfd (Linux
    5.3+: readable once the process has exited), else by polling every `WATCH_POLL_S`
    whether this process's parent changed (it was re-parented) or the pid is gone (macOS,
    BSD). Made before the job can have ended; a pidfd held from then on cannot be fooled
    by the pid's reuse."""

    def __init__(self, job_pid: int):
        self.pid = job_pid
        self._parent = os.getppid()
        self._fd: int | None = None
        self._ended = False
        opener = getattr(os, "pidfd_open", None)
        if opener is not None:
            try:
                self._fd = opener(job_pid)
            except ProcessLookupError:
                self._ended = True
            except OSError:  # a kernel before 5.3: poll
                pass

    def ended(self, timeout: float | None = None) -> bool:
        """Whether the job has ended, waiting up to ``timeout`` seconds for it (None: until it has)."""
        if not self._ended and self._fd is not None:
            self._ended = bool(select.select([self._fd], [], [], timeout)[0])
        elif not self._ended:
            deadline = None if timeout is None else time.monotonic() + timeout
            while os.getppid() == self._parent and _exists(self.pid):
                left = WATCH_POLL_S if deadline is None else min(WATCH_POLL_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                time.sleep(left)
            self._ended = True
        return self._ended


def _end_when_ended(watch: JobWatch, sig: int) -> None:
    watch.ended()
    os.kill(os.getpid(), sig)
    if sig != signal.SIGKILL:  # its handler runs in the main thread; one stuck there is still ended
        time.sleep(END_GRACE_S)
        os.kill(os.getpid(), signal.SIGKILL)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_method() -> str:
    """``fork`` when this process runs one thread (fast, and a script without a
    ``__main__`` guard is not re-run in the workers), else ``forkserver`` (forking a
    threaded process can deadlock on a lock another thread held), else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and sys.platform != "darwin":
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


STOP_GRACE_S = 0.5  # how long a stopped worker may take to unwind its item before SIGKILL
_WAIT_S = 0.1  # the longest a Ctrl-C waits (`_shielded`) while results are awaited


def split_chunks(indexed: list[tuple[int, Any]], workers: int, chunksize: int | None = None
                 ) -> list[list[tuple[int, Any]]]:
    """``indexed`` in chunks of ``chunksize`` items; by default about eight chunks per worker
    (load balance), at most 64 items per chunk. (Guided chunks, shrinking toward the end,
    were tried: over 200 traces on 2 workers they were no faster, within run-to-run noise.)"""
    size = chunksize or max(1, min(64, math.ceil(len(indexed) / max(1, workers * 8))))
    return [indexed[k:k + size] for k in range(0, len(indexed), size)]


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
_OPEN_POOLS: "set[ProcessExecutor]" = set()


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
        indexed = list(enumerate(items))
        if not indexed:
            return
        chunks = split_chunks(indexed, self.workers, chunksize)
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


# ------------------------------------------------------------ Ray
def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("--executor ray needs Ray: pip install 'simpatterns[ray]'") from None
    return ray


RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Raise ConnectionError (one line naming the address) when nothing listens at a Ray
    cluster's ``host:port`` (or ``ray://host:port``): ``ray.init`` would otherwise retry
    silently for minutes on a mistyped or stopped cluster. None, ``auto`` and ``local``
    are Ray's own lookups and are left to it."""
    if address is None or address in ("auto", "local"):
        return
    import socket

    where = address.split("://", 1)[-1]
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConnectionError(f"Ray address {address!r} is not host:port (e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(f"cannot reach a Ray cluster at {address}: {reason}") from None


def ensure_ray(address: str | None = None) -> Any:
    """The ``ray`` module, connected: to ``address`` if given, else to the cluster this
    process is already connected to, else to a new local one (as many CPUs as the machine).
    Raises ConnectionError when nothing listens at ``address`` (`check_ray_address`)."""
    ray = _import_ray()
    if not ray.is_initialized():
        import logging

        check_ray_address(address)
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=True, configure_logging=True)
        if started_local_ray(ray):
            _start_cluster_reaper()
    return ray


def _start_cluster_reaper() -> None:
    """Ray's own fate sharing ends the cluster's core processes with this one, but its node
    agents (dashboard and runtime-env agents) outlive a SIGKILLed driver by many seconds:
    a small process of ours (Linux: it reads /proc) ends them with the job (`reap_with_job`)."""
    if not os.path.isdir("/proc/self/task"):
        return
    import subprocess

    subprocess.Popen([sys.executable, "-c", "import sys; from simpatterns.parallel import reap_with_job; "
                      "reap_with_job(int(sys.argv[1]))", str(os.getpid())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
                     env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})


REAP_POLL_S = 1.0  # how often the reaper looks at the job's processes


def reap_with_job(job_pid: int) -> None:
    """Wait for process ``job_pid`` to end, however it ends, then SIGKILL every process that
    was under it when last looked at (a process's start time tells a reused pid apart)."""
    watch = JobWatch(job_pid)
    seen: list[tuple[int, str]] = []
    while True:
        seen = [(pid, start) for pid in _descendants(job_pid)
                if pid != os.getpid() and (start := _start_time(pid))] or seen
        if watch.ended(REAP_POLL_S):
            break
    for pid, start in seen:
        if _start_time(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out.extend(kids)
        todo.extend(kids)
    return out


def started_local_ray(ray: Any) -> bool:
    """Whether this process started the Ray cluster it is connected to (``ray.init()`` found
    none to join), rather than joining a user's: only then are its actors on this machine,
    in this pid namespace, and ours to end with the job. Read from Ray's private driver
    state (``_global_node.head``); False when that is not there."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    return bool(getattr(getattr(worker, "_global_node", None), "head", False))


class _RayWorker:
    """A Ray actor: builds the setup once, then runs chunks (cf. `_worker_init`)."""

    def __init__(self, setup: WorkerSetup | None, job_pid: int | None = None):
        if job_pid is not None:  # a cluster the job started: the actor ends with it, not seconds later
            end_with_job(job_pid, parent_signal=False)
        try:  # SIGTERM unwinds the item in progress, as in the local pool
            signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread: the actor is only killed
            pass
        self.state = None if setup is None else setup.build(*setup.args)
        self.has_state = setup is not None

    def where(self) -> tuple[str, int]:
        import socket

        return socket.gethostname(), os.getpid()

    def run(self, fn: Callable[..., Any], chunk: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        return _run_items(fn, chunk, self.state, self.has_state)


_RAY_ACTOR: Any = None


def _ray_actor_class() -> Any:
    global _RAY_ACTOR
    if _RAY_ACTOR is None:
        _RAY_ACTOR = _import_ray().remote(num_cpus=1, max_restarts=0)(_RayWorker)
    return _RAY_ACTOR


class RayExecutor(Executor):
    """``workers`` Ray actors (one CPU each) on an existing cluster (``address``) or a
    local one, each building the `WorkerSetup` once. The setup and each function go
    to the object store once; chunks go to the least busy actor, two in flight per
    actor; numpy arrays in results come back without copies. ``workers`` is capped
    at the cluster's CPUs (an actor beyond them would wait forever). Stopping
    cancels queued chunks, sends SIGTERM to actors on this host so the item in
    progress unwinds, then kills every actor. The cluster itself stays up for the
    next executor of this process. On a local cluster this process started, each actor
    also ends with this process, however it ends (`end_with_job`); Ray's own fate
    sharing takes the cluster's processes down with it. A user's cluster is left alone."""

    def __init__(self, workers: int, setup: WorkerSetup | None = None, *, address: str | None = None):
        self._ray = ensure_ray(address)
        cpus = int(self._ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, min(int(workers), cpus))
        self._setup = setup
        self._actors: list[Any] | None = None
        self._where: list[Any] = []
        self._busy: list[int] = []
        self._lock = threading.Lock()
        self._fn_refs: dict[int, tuple[Any, Any]] = {}

    def _ensure_actors(self) -> list[Any]:
        with self._lock:
            if self._actors is None:
                setup_ref = self._ray.put(self._setup)
                cls = _ray_actor_class()
                job_pid = os.getpid() if started_local_ray(self._ray) else None
                self._actors = [cls.remote(setup_ref, job_pid) for _ in range(self.workers)]
                self._where = [a.where.remote() for a in self._actors]  # answered before any chunk
                self._busy = [0] * self.workers
            return self._actors

    def _fn_ref(self, fn: Callable[..., Any]) -> Any:
        with self._lock:  # keyed by id, the function kept alive beside its ref
            if id(fn) not in self._fn_refs:
                self._fn_refs[id(fn)] = (fn, self._ray.put(fn))
            return self._fn_refs[id(fn)][1]

    def _send(self, fn_ref: Any, chunk: list[tuple[int, Any]]) -> tuple[Any, int]:
        actors = self._ensure_actors()
        with self._lock:
            k = min(range(len(actors)), key=self._busy.__getitem__)
            self._busy[k] += 1
        return actors[k].run.remote(fn_ref, chunk), k

    def _done(self, k: int) -> None:
        with self._lock:
            self._busy[k] -= 1

    def imap(self, fn: Callable[..., Any], items: Iterable[Any], *,
             chunksize: int | None = None) -> Iterator[tuple[int, Any]]:
        indexed = list(enumerate(items))
        if not indexed:
            return
        chunks = split_chunks(indexed, self.workers, chunksize)
        fn_ref = self._fn_ref(fn)
        pending: dict[Any, int] = {}
        next_chunk = 0
        try:
            while next_chunk < len(chunks) or pending:
                while next_chunk < len(chunks) and len(pending) < 2 * self.workers:
                    ref, k = self._send(fn_ref, chunks[next_chunk])
                    pending[ref] = k
                    next_chunk += 1
                done, _ = self._ray.wait(list(pending), num_returns=1)
                for ref in done:
                    self._done(pending.pop(ref))
                    yield from self._get(ref)
        except BaseException:
            for ref in pending:
                try:
                    self._ray.cancel(ref)
                except Exception:  # noqa: BLE001 - best effort: the actors are killed next
                    pass
            self.stop()
            raise

    def _get(self, ref: Any) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:  # the item's own exception, as locally
            raise _cause(exc) from None

    def submit(self, fn: Callable[..., Any], item: Any) -> Future[Any]:
        ref, k = self._send(self._fn_ref(fn), [(0, item)])
        inner = ref.future()
        inner.add_done_callback(lambda _f: self._done(k))
        return _first_result(inner, unwrap=_cause)

    def stop(self) -> None:
        with self._lock:
            actors, self._actors = self._actors, None
        if not actors:
            return
        import socket

        host = socket.gethostname()
        try:
            where = self._ray.get(self._where, timeout=STOP_GRACE_S)
        except Exception:  # noqa: BLE001 - an actor that never started: it is only killed
            where = []
        for h, pid in where:
            if h == host:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
        if where:
            time.sleep(STOP_GRACE_S)
        for a in actors:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._fn_refs.clear()

    def close(self) -> None:
        with self._lock:
            actors, self._actors = self._actors, None
        for a in actors or []:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._fn_refs.clear()


def _cause(exc: BaseException) -> BaseException:
    """The exception an item raised inside a Ray worker (Ray wraps it)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _first_result(inner: Future[list[tuple[int, Any]]],
                  unwrap: Callable[[BaseException], BaseException] = lambda e: e) -> Future[Any]:
    """A future of a one-item chunk's result -> a future of the item's result."""
    outer: Future[Any] = Future()

    def done(f: Future[list[tuple[int, Any]]]) -> None:
        if f.cancelled():
            outer.cancel()
            outer.set_running_or_notify_cancel()
        elif f.exception() is not None:
            outer.set_exception(unwrap(f.exception()))
        else:
            outer.set_result(f.result()[0][1])

    inner.add_done_callback(done)
    return outer


def runs_inline(workers: int, backend: str | Backend | None = None) -> bool:
    """Whether `make_executor` with these arguments runs in this process (no pickling)."""
    name = (backend.name if isinstance(backend, Backend) else backend) or default_backend().name
    return name == "local" and workers <= 1


def make_executor(workers: int = 1, setup: WorkerSetup | None = None, *,
                  backend: str | Backend | None = None) -> Executor:
    """The executor for ``workers`` on ``backend`` (a name or a `Backend`; None: the
    process default, see `use_backend`). Local: ``workers <= 1`` runs in this process,
    more in a process pool started now. Ray: ``workers`` actors on the cluster."""
    if backend is None:
        chosen = default_backend()
    elif isinstance(backend, Backend):
        chosen = backend
    else:
        chosen = Backend(backend)
    if chosen.name == "ray":
        return RayExecutor(workers, setup, address=chosen.address)
    if workers <= 1:
        return InlineExecutor(setup)
    return ProcessExecutor(workers, setup, start=True)


def default_workers() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def executor_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a typer command that maps work the ``--executor`` and ``--address`` options
    (named and explained the same on every command) and run it on that backend
    (`use_backend`); a bad value or a missing Ray install exits with one line."""
    import functools
    import inspect

    import typer

    signature = inspect.signature(command, eval_str=True)
    extra = [
        inspect.Parameter("executor", inspect.Parameter.KEYWORD_ONLY, annotation=str,
                          default=typer.Option("local", "--executor", help=EXECUTOR_HELP)),
        inspect.Parameter("address", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                          default=typer.Option(None, "--address", help=ADDRESS_HELP)),
    ]

    @functools.wraps(command)
    def run(*args: Any, executor: str = "local", address: str | None = None, **kwargs: Any) -> Any:
        try:
            backend = Backend.from_options(executor, address)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        with use_backend(backend):
            return command(*args, **kwargs)

    params = list(signature.parameters.values())
    tail = [p for p in params if p.kind == inspect.Parameter.VAR_KEYWORD]
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD] + extra + tail)
    run.__annotations__ = {**command.__annotations__, "executor": str, "address": Optional[str]}
    return run


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
    backend: str | Backend | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(index, result)`` as they finish, over a fresh executor for ``workers`` on
    ``backend`` (default: the process's, see `use_backend`) or the given ``executor``,
    with a progress bar labelled ``progress`` when given."""
    own = executor is None
    ex = executor or make_executor(workers, setup, backend=backend)
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
