"""`RayExecutor`: the same work on a Ray cluster (``pip install simpatterns[ray]``), an
existing one (``address``) or a local one started on first use."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any

from simpatterns.parallel.base import Executor, WorkerSetup, _first_result
from simpatterns.parallel.lifetime import end_with_job
from simpatterns.parallel.worker import STOP_GRACE_S, _on_sigterm, _run_items


def import_ray() -> Any:
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
    ray = import_ray()
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

    subprocess.Popen([sys.executable, "-c", "import sys; from simpatterns.parallel.lifetime import reap_with_job; "
                      "reap_with_job(int(sys.argv[1]))", str(os.getpid())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
                     env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})



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
        _RAY_ACTOR = import_ray().remote(num_cpus=1, max_restarts=0)(_RayWorker)
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
        chunks = self.chunks(items, chunksize)
        if not chunks:
            return
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

