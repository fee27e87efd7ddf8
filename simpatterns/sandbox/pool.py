"""Running untrusted detector candidates: the parent side of the sandbox.

`Sandbox` owns a pool of fork servers (`simpatterns.sandbox.server`),
each an isolated interpreter (``python -I``, own session, scrubbed
environment) that already imported numpy and holds the job's traces. A
candidate is one fork of a server; see the server module for how the
child is confined. The parent keeps its own wall clock on every request and
kills and restarts a server that stops answering, together with the child it
last started.

Boundary, in order: the AST gate (`gate.py`, a filter), the restricted
builtins in the child, and the process: own session killed as a group,
``chroot`` into an empty directory and the ``nobody`` user when we are root
(RLIMIT_NPROC is not enforced for root, so dropping privileges is what
makes "no fork" hold), an empty network namespace when the kernel allows
it, and RLIMIT_CPU/AS/FSIZE/NPROC/NOFILE/CORE. Without root (a normal
user) there is no chroot and no network namespace; RLIMIT_NPROC is then
enforced for the user, files stay readable to the candidate but the gate
and the restricted builtins leave it no way to open them.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simpatterns.annotation import EventList
from simpatterns.detectors.contract import Candidate, Declarations, Detector
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.events import check_plain_events
from simpatterns.sandbox.kernel import Protection
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.sandbox.reasons import Reason, SandboxError, SandboxRefused
from simpatterns.sandbox.server import HEADER
from simpatterns.trace import Trace

# Variables a candidate could use to reach services (API keys, proxies, cloud
# credentials) never reach the server: it gets this environment and nothing else.
_KEEP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
             **({"SECCOMP_DEBUG_KILL": "1"} if os.environ.get("SECCOMP_DEBUG_KILL") else {})}
_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "NUMEXPR_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1"}

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding simpatterns/


def scrubbed_env() -> dict[str, str]:
    """The whole environment of a fork server (nothing inherited)."""
    return {**_KEEP_ENV, **_THREAD_ENV}


CONTAINER_BYTES = 12  # a result may hold one list or object per this many bytes (an event takes ~13 or more)

@dataclass
class SandboxResult:
    """What running a candidate produced.

    ``events[i]`` are the sorted ``(frame, params)`` of trace ``i`` (job
    order; of the ``i``-th requested trace when `Sandbox.evaluate` got
    ``traces``); both are None when rejected. ``cpu_s``: the CPU seconds the
    child spent on the job, read by the fork server from the child's CPU clock
    (from outside: the candidate cannot change it). ``times[i]``: that total
    shared among the traces in the proportions the child reported (the child
    can skew the split, never the sum): for reports and limits only, never for
    fitness (it differs between runs). ``steps[i]``: the lines of the candidate
    the child counted on trace ``i`` (`simpatterns.detectors.cost`), the same
    in every run: what the evolver's time penalty reads.
    """

    reason: Reason | None
    events: list[EventList] | None = None
    times: np.ndarray | None = None
    steps: np.ndarray | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    pid: int | None = None
    uid: int | None = None  # the uid the child ran as (root: one of `Sandbox.candidate_uids`)
    smoke_ok: bool = False
    events_hash: str = ""  # of the canonical events JSON (equal behaviour, equal hash)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.reason is None


class SandboxWorker:
    """One fork server process and the pipes to it."""

    def __init__(self, root: str, index: int = 0, namespaces: bool = True):
        self.root = root
        self.index = index
        self.namespaces = namespaces
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.last_child: int | None = None
        self.restarts = 0
        self.pids_seen: set[int] = set()  # every process this worker started: servers and children
        self._stderr_path = os.path.join(root, f"server-{index}.log")

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 60.0) -> None:
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from simpatterns.sandbox.server import main; sys.argv = sys.argv[1:]; main()"
        )
        stderr = open(self._stderr_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code, PACKAGE_ROOT, self.root, str(self.index),
                 "namespaces" if self.namespaces else "no-namespaces", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=scrubbed_env(),
                cwd=self.root,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            stderr.close()
        self.pids_seen.add(self.proc.pid)
        msg = self._recv(time.monotonic() + timeout_s)
        if msg.get("op") != "ready":
            raise SandboxError(f"fork server {self.index} sent {msg!r} instead of 'ready'")
        self.info = dict(msg["info"])
        self.pids_seen.add(int(self.info["pid"]))

    @property
    def server_pid(self) -> int | None:
        """The process that forks the candidates (pid 1 of the job's pid namespace, as the
        machine sees it)."""
        return int(self.info["pid"]) if self.proc is not None and self.info else None

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None and proc.stdin is not None:
                self.proc = proc
                try:
                    spare = self.call({"op": "ping"}, timeout_s=5).get("spare")
                    if spare:
                        self.pids_seen.add(int(spare))
                finally:
                    self.proc = None
                self._send_raw(proc, {"op": "quit"})
                proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired, BrokenPipeError):
            pass
        self._kill(proc)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        inner = int(self.info.get("pid", 0)) if self.info else 0
        for pgid in (self.last_child, proc.pid):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        # the forking server (pid 1 of the namespace, a child of proc) goes with its group;
        # wait until it is gone, so a caller that checks finds nothing left
        deadline = time.monotonic() + 2.0
        while inner and inner != proc.pid and _running(inner) and time.monotonic() < deadline:
            time.sleep(0.005)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def restart(self) -> None:
        if self.proc is not None:
            self._kill(self.proc)
            self.proc = None
        self.restarts += 1
        self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ------------------------------------------------------------ messages
    @staticmethod
    def _send_raw(proc: subprocess.Popen[bytes], obj: Any) -> None:
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        assert proc.stdin is not None
        proc.stdin.write(HEADER.pack(len(blob)) + blob)
        proc.stdin.flush()

    def send(self, obj: Any) -> None:
        if self.proc is None:
            raise SandboxError("fork server is not running")
        try:
            self._send_raw(self.proc, obj)
        except (BrokenPipeError, OSError) as exc:
            raise SandboxError(f"fork server {self.index} is gone ({exc}); see {self._stderr_path}") from exc

    def _recv(self, deadline: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        head = self._read(fd, HEADER.size, deadline)
        (n,) = HEADER.unpack(head)
        return pickle.loads(self._read(fd, n, deadline))

    def _read(self, fd: int, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        while n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("fork server did not answer in time")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            b = os.read(fd, min(n, 1 << 20))
            if not b:
                raise SandboxError(f"fork server {self.index} exited; see {self._stderr_path}")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def call(self, obj: Any, timeout_s: float = 120.0) -> dict[str, Any]:
        self.send(obj)
        return self._recv(time.monotonic() + timeout_s)

    # ------------------------------------------------------------ candidates
    def evaluate(self, request: dict[str, Any], wall_s: float) -> dict[str, Any]:
        """Send one eval request; the parent-side wall clock is ``wall_s``."""
        deadline = time.monotonic() + wall_s
        self.last_child = None
        self.send(request)
        while True:
            msg = self._recv(deadline)
            if msg.get("op") == "started":
                self.last_child = int(msg["pid"])
                self.pids_seen.add(self.last_child)
                continue
            if msg.get("op") == "result":
                return msg
            raise SandboxError(f"fork server {self.index} sent {msg.get('op')!r} during an evaluation")


class Sandbox:
    """A pool of fork servers holding the same traces; `evaluate` is thread-safe.

    Use as a context manager; `close` stops every server and removes the
    sandbox's temporary directory.
    """

    def __init__(self, traces: Sequence[Trace], workers: int = 2, limits: SandboxLimits | None = None,
                 unsafe: bool = False, namespaces: bool = True):
        """``unsafe``: run untrusted code even where the machine gives less than the stated
        minimum (`Protection.meets_minimum`): what ``--unsafe-sandbox`` asks for, passed by
        whoever starts this sandbox. ``namespaces=False`` does without them (tests)."""
        if not traces:
            raise ValueError("the sandbox needs at least one trace")
        self.unsafe = bool(unsafe)
        self.traces = list(traces)
        self.limits = limits or SandboxLimits()
        self.root = tempfile.mkdtemp(prefix="simpatterns-sandbox-")
        self._traces_blob = pickle.dumps(self.traces, protocol=pickle.HIGHEST_PROTOCOL)
        self._deps: dict[str, list[EventList]] = {}
        self._workers = [SandboxWorker(self.root, i, namespaces) for i in range(max(1, workers))]
        self._free: queue.Queue[SandboxWorker] = queue.Queue()
        self._lock = threading.Lock()
        # one result decoded at a time: JSON becomes ~14 times its size in Python objects, so
        # the parent's memory grows by at most one decode, not one per worker (docs/design/sandbox.md)
        self._decode_lock = threading.Lock()
        self._frames = [t.num_frames for t in self.traces]
        self._names = [set(t.names) for t in self.traces]
        # smoke traces first: the shortest ones (ties by index, so the order is stable)
        self.order = sorted(range(len(self.traces)), key=lambda i: (self._frames[i], i))
        try:
            for w in self._workers:
                self._boot(w)
                self._free.put(w)
                self._check_minimum(w)
        except BaseException:
            self.close()
            raise

    @property
    def info(self) -> dict[str, Any]:
        return dict(self._workers[0].info)

    @property
    def server_pids(self) -> list[int]:
        return [pid for w in self._workers if (pid := w.server_pid) is not None]

    @property
    def protection(self) -> Protection:
        """What confines a candidate here (`simpatterns.sandbox.kernel`)."""
        return Protection.from_json(self._workers[0].info.get("protection", {}))

    @property
    def candidate_uids(self) -> list[range]:
        """The uids this sandbox's candidates run as (root: one range per server; else none)."""
        return [range(*w.info["uids"]) for w in self._workers if w.info.get("uids")]

    @property
    def pids_seen(self) -> set[int]:
        """Every process the sandbox started (servers, candidate children, spares);
        after `close` none of them is alive."""
        return set().union(*(w.pids_seen for w in self._workers))

    def _check_minimum(self, w: SandboxWorker) -> None:
        prot = Protection.from_json(w.info.get("protection", {}))
        if not prot.meets_minimum and not self.unsafe:
            raise SandboxRefused(
                f"this machine cannot confine untrusted code (missing: {', '.join(prot.missing())}"
                f"{'; ' + prot.detail if prot.detail else ''}); see docs/design/sandbox.md, or pass --unsafe-sandbox "
                f"to run it anyway")

    def _boot(self, w: SandboxWorker) -> None:
        if w.proc is None:
            w.start()
        else:
            w.restart()
        ans = w.call({"op": "load", "traces": pickle.loads(self._traces_blob)})
        if ans.get("op") != "loaded":
            raise SandboxError(f"fork server {w.index} failed to load traces: {ans!r}")
        if self._deps:
            w.call({"op": "deps", "events": self._deps})

    def load_traces(self, traces: Sequence[Trace]) -> None:
        """Replace the job's traces (and drop the dependency events), reusing the running
        servers: a long-lived sandbox serves many small jobs without a server start each.
        Waits for idle workers."""
        if not traces:
            raise ValueError("the sandbox needs at least one trace")
        with self._lock:
            held = [self._free.get() for _ in self._workers]
            try:
                self.traces = list(traces)
                self._traces_blob = pickle.dumps(self.traces, protocol=pickle.HIGHEST_PROTOCOL)
                self._deps = {}
                self._frames = [t.num_frames for t in self.traces]
                self._names = [set(t.names) for t in self.traces]
                self.order = sorted(range(len(self.traces)), key=lambda i: (self._frames[i], i))
                for w in held:
                    if not w.alive:
                        self._boot(w)
                        continue
                    ans = w.call({"op": "load", "traces": self.traces})
                    if ans.get("op") != "loaded":
                        raise SandboxError(f"fork server {w.index} failed to load traces: {ans!r}")
                    w.call({"op": "deps", "events": {}})
            finally:
                for w in held:
                    self._free.put(w)

    def set_dependency_events(self, events: dict[str, list[EventList]]) -> None:
        """Events of library patterns per trace (job order): what ``detect`` gets as
        ``events[label]`` for the labels in its DEPENDS. Waits for idle workers."""
        for label, per_trace in events.items():
            if len(per_trace) != len(self.traces):
                raise ValueError(f"dependency events of {label!r} cover {len(per_trace)} traces, expected {len(self.traces)}")
        with self._lock:
            self._deps = {k: [list(v) for v in per] for k, per in events.items()}
            held = [self._free.get() for _ in self._workers]
            try:
                for w in held:
                    w.call({"op": "deps", "events": self._deps})
            finally:
                for w in held:
                    self._free.put(w)

    def settle(self) -> None:
        """Wait until every server has reaped its last child (servers answer first and
        reap while the parent scores; a ping is answered only after the reaping)."""
        with self._lock:
            held = [self._free.get() for _ in self._workers]
            try:
                for w in held:
                    w.call({"op": "ping"}, timeout_s=30)
            finally:
                for w in held:
                    self._free.put(w)

    @property
    def dependency_labels(self) -> list[str]:
        return sorted(self._deps)

    def evaluate(self, program: Candidate | Detector, limits: SandboxLimits | None = None,
                 traces: Sequence[int] | None = None) -> SandboxResult:
        """Run ``detect`` of ``program`` (a parsed `Candidate` or an untrusted `Detector`:
        its source and `Declarations`) on every trace in a confined child.

        ``traces``: run on these trace indices only (smoke traces first as always);
        the result's ``events[k]``/``times[k]`` are then those of ``traces[k]``. The
        events are checked against what the program declares: exactly its ``PARAMS``,
        body names in its ``BODY_PARAMS``, and with ``DURATION = "interval"`` an integer
        ``frames`` >= 1 on each. Nothing is parsed here: the child compiles the source."""
        decl = program.declarations
        lim = limits or self.limits
        missing = [d for d in decl.depends if d not in self._deps]
        if missing:
            return SandboxResult(Reason(R.UNKNOWN_DEPENDENCY, f"no events for {missing} in this job"))
        indices = list(range(len(self.traces))) if traces is None else [int(i) for i in traces]
        if not indices or any(not 0 <= i < len(self.traces) for i in indices) or len(set(indices)) < len(indices):
            raise ValueError(f"traces must be distinct indices in [0, {len(self.traces)}), got {traces!r}")
        wanted = set(indices)
        request = {
            "op": "eval",
            "source": program.source,
            "pattern": decl.pattern,
            "params": list(decl.params),
            "body_params": list(decl.body_params),
            "interval": decl.interval,
            "depends": list(decl.depends),
            "order": self.order if traces is None else [i for i in self.order if i in wanted],
            **lim.request_fields(),
            "n_smoke": min(lim.n_smoke, len(indices)),
        }
        wall = lim.timeout_s + lim.server_grace_s
        w = self._free.get()
        try:
            try:
                msg = w.evaluate(request, wall)
            except (TimeoutError, SandboxError, EOFError, pickle.UnpicklingError) as exc:
                # The server itself stopped answering: kill it (and its last child), restart.
                timed_out = isinstance(exc, TimeoutError)
                pid = w.last_child
                self._boot(w)
                code = R.TIMEOUT if timed_out else R.SANDBOX_ERROR
                return SandboxResult(Reason(code, f"sandbox server restarted: {exc}"), pid=pid)
        finally:
            self._free.put(w)
        with self._decode_lock:
            return self._result(msg, decl, indices, lim)

    def _result(self, msg: dict[str, Any], decl: Declarations, indices: list[int],
                lim: SandboxLimits) -> SandboxResult:
        common = {"wall_s": float(msg.get("wall_s", 0.0)), "cpu_s": float(msg.get("cpu_s", 0.0)), "pid": msg.get("pid"),
                  "uid": msg.get("uid"),
                  "smoke_ok": bool(msg.get("smoke_done", False))}
        if "reason" in msg:
            return SandboxResult(_reason(msg["reason"], msg.get("detail", "")), **common)
        try:
            result = json.loads(msg.get("result_json", b"{}"), parse_constant=_no_constants)
        except (ValueError, RecursionError) as exc:
            return SandboxResult(Reason(R.INVALID_EVENTS, f"result is not plain JSON ({exc})"), **common)
        if not isinstance(result, dict):
            return SandboxResult(Reason(R.INVALID_EVENTS, "result is not an object"), **common)
        if "reason" in result:
            return SandboxResult(_reason(str(result["reason"]), str(result.get("detail", ""))), **common)
        raw_times = result.get("times")
        raw_steps = result.get("steps")
        events_json = msg.get("events_json", b"")
        # Empty lists and objects are the JSON that grows most when parsed (3 bytes become 64):
        # counted before parsing, so no result can cost the parent more than ~14 bytes per byte.
        containers = events_json.count(b"[") + events_json.count(b"{")
        most = max(1024, lim.max_result_bytes // CONTAINER_BYTES)
        if containers > most:
            return SandboxResult(Reason(R.INVALID_EVENTS, f"result has {containers} lists and objects, limit {most}"),
                                 **common)
        try:
            raw_events = json.loads(events_json, parse_constant=_no_constants)
        except (ValueError, RecursionError) as exc:
            return SandboxResult(Reason(R.INVALID_EVENTS, f"events are not plain JSON ({exc})"), **common)
        if not isinstance(raw_events, dict) or not isinstance(raw_times, dict) or not isinstance(raw_steps, dict):
            return SandboxResult(Reason(R.INVALID_EVENTS, "result lacks events or times"), **common)
        param_set = frozenset(decl.params)
        body_set = frozenset(decl.body_params)
        events: list[EventList] = []
        times = np.zeros(len(indices))
        steps = np.zeros(len(indices), dtype=np.int64)
        for k, i in enumerate(indices):
            key = str(i)
            if key not in raw_events or key not in raw_times or key not in raw_steps:
                return SandboxResult(Reason(R.INVALID_EVENTS, f"no result for trace {i}"), **common)
            t, n = raw_times[key], raw_steps[key]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 <= t < 1e6):
                return SandboxResult(Reason(R.INVALID_EVENTS, f"bad time for trace {i}"), **common)
            if isinstance(n, bool) or not isinstance(n, int) or not (0 <= n < 1 << 62):
                return SandboxResult(Reason(R.INVALID_EVENTS, f"bad step count for trace {i}"), **common)
            times[k], steps[k] = float(t), n
            checked = check_plain_events(raw_events[key], self._frames[i], param_set, self._names[i],
                                         lim.max_events_per_trace, i, body_set, decl.interval)
            if isinstance(checked, Reason):
                return SandboxResult(checked, **common)
            events.append(checked)
        digest = hashlib.blake2b(events_json, digest_size=12).hexdigest()
        total = times.sum()
        share = times / total if total > 0 else np.full(len(times), 1.0 / max(1, len(times)))
        return SandboxResult(None, events=events, times=share * common["cpu_s"], steps=steps, events_hash=digest,
                             **common)

    def close(self) -> None:
        for w in self._workers:
            w.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _reason(code: str, detail: str) -> Reason:
    return Reason(code if code in R.ALL else R.SANDBOX_ERROR, str(detail)[:500])


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


