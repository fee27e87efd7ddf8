"""The sandbox's fork server: runs as ``python -I -c ... simpatterns.sandbox.server``.

The parent (`simpatterns.sandbox.pool.SandboxWorker`) starts this module in
an isolated interpreter with a scrubbed environment and its own session. It
imports numpy once, receives the job's traces once, and keeps one child
forked and confined ahead of time (the spare), so a candidate costs a pipe
round trip, not an interpreter start or even a fork on its critical path.

Each child, before it reads its candidate:

- starts its own session (``setsid``: pgid = pid) so it is killed as a group;
- points stdin at /dev/null and stdout/stderr at an anonymous in-memory file
  (``memfd``, capped by RLIMIT_FSIZE), and closes every other descriptor but
  its job and result pipes;
- when running as root: ``chroot``s into an empty read-only directory and
  drops to the ``nobody`` user (no capabilities, so RLIMIT_NPROC is enforced
  and no file outside is visible: /etc/passwd, the library, the traces on disk);
- sets RLIMIT_CPU, RLIMIT_AS (current size + the memory budget),
  RLIMIT_FSIZE (output cap), RLIMIT_NPROC = 1 (no fork, no threads),
  RLIMIT_NOFILE and RLIMIT_CORE = 0;
- executes the candidate with builtins stripped of file, code and
  introspection access and an ``__import__`` that only knows numpy and math.

The server itself runs in a fresh network namespace when the kernel allows
it (root), so children have no network at all. The server enforces the
wall clock (a short deadline until the smoke traces are done, then the
full one), kills the child's process group and reaps it. Messages between
the parent and this server are length-prefixed pickles (both are trusted
code); a child's result is JSON, size-capped here and parsed and checked
by the parent.
"""

from __future__ import annotations

import ast
import errno
import gc
import json
import math
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

# Pre-import the numpy parts a detector may reach lazily: inside the chroot the
# files are not visible, so a lazy import would fail there.
import numpy.fft  # noqa: F401
import numpy.linalg  # noqa: F401
import numpy.ma  # noqa: F401  (np.median, np.percentile, np.unique reach it)
import numpy.polynomial  # noqa: F401
import numpy.random  # noqa: F401
import numpy.lib.stride_tricks  # noqa: F401

for _lazy in ("numpy.exceptions", "numpy.dtypes", "numpy.strings"):  # numpy 2
    try:
        __import__(_lazy)
    except ImportError:
        pass

from simpatterns.annotation import EventList
from simpatterns.detectors.cost import COUNTER, StepCounter, instrument
from simpatterns.parallel import end_with_job
from simpatterns.sandbox import kernel
from simpatterns.sandbox.events import check_events, encode_events

HEADER = struct.Struct(">Q")
TAG_SMOKE = b"S"  # the smoke traces are done (cascade stage 1 passed)
TAG_EVENTS = b"E"  # canonical events JSON (sorted, sort_keys), trace index -> [[frame, params], ...]
TAG_RESULT = b"R"  # the final JSON: times, or a rejection reason
SETUP_FAILED = 70  # the child's exit status when confinement itself failed

# What candidates may use from builtins. No open/exec/eval/compile/globals/vars/
# type/object introspection, no input, no exit.
SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate", "filter", "float",
    "frozenset", "hash", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max",
    "min", "next", "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted",
    "str", "sum", "tuple", "zip", "bin", "hex", "oct", "chr", "ord", "format", "complex", "bytes",
    "ascii", "id", "hasattr", "object", "staticmethod", "classmethod", "property", "super",
    "True", "False", "None", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError", "KeyError",
    "LookupError", "NameError", "OverflowError", "RuntimeError", "StopIteration", "TypeError",
    "ValueError", "ZeroDivisionError", "FloatingPointError", "NotImplementedError",
    "UnboundLocalError", "BaseException",
)
ALLOWED_MODULES = ("numpy", "math")


# ----------------------------------------------------------------- framing
def read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError("pipe closed")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, obj: Any) -> None:
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    write_all(fd, HEADER.pack(len(blob)) + blob)


def recv(fd: int) -> Any:
    (n,) = HEADER.unpack(read_exact(fd, HEADER.size))
    return pickle.loads(read_exact(fd, n))


# ----------------------------------------------------------------- server
LIMIT_KEYS = ("cpu_s", "memory_mb", "output_bytes", "recursion_limit")
JOB_KEYS = ("source", "pattern", "params", "body_params", "interval", "depends", "order", "n_smoke",
            "max_events_per_trace", "max_result_bytes")


@dataclass
class Spare:
    """A child forked and confined ahead of time, blocked reading its job: the
    fork and the confinement cost nothing on the candidate's critical path."""

    pid: int  # as this server sees it (its own pid namespace)
    job_w: int
    result_r: int
    out_fd: int
    key: tuple
    generation: int
    uid: int | None
    host_pid: int = 0  # as the machine sees it (read from the child on first use)


class Server:
    def __init__(self, proto_in: int, proto_out: int, root: str, slot: int = 0,
                 mode: str = "none", namespaces: tuple[str, ...] = (), why: str = ""):
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.root = root
        self.slot = slot
        self.mode = mode  # kernel.enter_namespaces: "root", "userns" or "none"
        self.namespaces = tuple(namespaces)
        self.why = why
        self.serial = 0  # candidates forked so far: each gets its own uid (root)
        self.seccomp, seccomp_why = kernel.make_filter()
        if seccomp_why:
            self.why = "; ".join(w for w in (self.why, seccomp_why) if w)
        # the one empty, read-only directory every child starts in (its root when chrooted)
        self.jail = tempfile.mkdtemp(prefix="jail-", dir=root)
        os.chmod(self.jail, 0o555)
        self.traces: list[Any] = []
        self.name_sets: list[frozenset[str]] = []
        self.deps: dict[str, list[EventList]] = {}
        self.generation = 0  # bumped when traces or dependency events change
        self.spare: Spare | None = None
        self.host_pid = kernel.host_pid()
        self.pid = os.getpid()  # as its children see it (1 in its own pid namespace)

    def protection(self) -> kernel.Protection:
        return kernel.Protection(self.mode, self.namespaces, chroot=self.mode in ("root", "userns"),
                                 distinct_uids=self.mode == "root", seccomp=self.seccomp is not None,
                                 detail=self.why)

    def info(self) -> dict[str, Any]:
        uids = kernel.uid_range(self.host_pid)
        return {
            "pid": self.host_pid,
            "root_user": os.geteuid() == 0 and self.mode != "userns",
            "protection": self.protection().to_json(),
            "uids": [uids.start, uids.stop] if self.mode == "root" else [],
            "python": sys.version.split()[0],
            "numpy": np.__version__,
        }

    def serve(self) -> None:
        send(self.proto_out, {"op": "ready", "info": self.info()})
        try:
            while True:
                try:
                    msg = recv(self.proto_in)
                except EOFError:
                    return
                op = msg.get("op")
                if op == "load":
                    self.traces = list(msg["traces"])
                    for t in self.traces:  # build cached views once, not in every child
                        t.touching_matrix()
                    self.name_sets = [frozenset(t.names) for t in self.traces]
                    self.generation += 1
                    send(self.proto_out, {"op": "loaded", "n": len(self.traces)})
                elif op == "deps":
                    self.deps = dict(msg["events"])
                    self.generation += 1
                    send(self.proto_out, {"op": "deps_set", "patterns": sorted(self.deps)})
                elif op == "eval":
                    self.evaluate(msg)
                elif op == "ping":
                    spare = None
                    if self.spare is not None:
                        spare = self.spare.host_pid = _read_host_pid(self.spare)
                    send(self.proto_out, {"op": "pong", "spare": spare})
                elif op == "quit":
                    return
                else:
                    send(self.proto_out, {"op": "error", "detail": f"unknown op {op!r}"})
        finally:
            if self.spare is not None:
                self._discard(self.spare)

    # ------------------------------------------------------------ one candidate
    def _fork_spare(self, req: dict[str, Any]) -> Spare:
        # stdout/stderr go to an anonymous in-memory file (RLIMIT_FSIZE caps it):
        # nothing reaches the disk and there is nothing to clean up
        out_fd = os.memfd_create("candidate-output", 0)
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        vm_kb = _vm_size_kb()
        uid = kernel.candidate_uid(self.host_pid, self.serial) if self.mode == "root" else None
        self.serial += 1
        gc.freeze()  # keep the collector from touching (and so copying) every inherited page
        pid = os.fork()
        if pid == 0:  # ---- child: never returns
            try:
                os.close(job_w)
                os.close(result_r)
                _child(req, self, out_fd, job_r, result_w, vm_kb, uid)
            finally:
                os._exit(SETUP_FAILED)
        os.close(job_r)
        os.close(result_w)
        return Spare(pid, job_w, result_r, out_fd, tuple(req[k] for k in LIMIT_KEYS), self.generation, uid)

    def _discard(self, spare: Spare) -> int:
        for fd in (spare.job_w, spare.result_r, spare.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        _kill_group(spare.pid)
        status = _reap(spare.pid)
        _kill_group(spare.pid)  # anything it left in its group (it cannot fork, but be sure)
        return status

    def evaluate(self, req: dict[str, Any]) -> None:
        key = tuple(req[k] for k in LIMIT_KEYS)
        spare, self.spare = self.spare, None
        if spare is not None and (spare.key != key or spare.generation != self.generation):
            self._discard(spare)
            spare = None
        if spare is None:
            spare = self._fork_spare(req)
        spare.host_pid = _read_host_pid(spare)
        send(self.proto_out, {"op": "started", "pid": spare.host_pid})
        clock = _cpu_clock(spare.pid)
        t_start = time.perf_counter()
        try:
            cpu_start = time.clock_gettime(clock)  # what its confinement cost, not counted
            job = pickle.dumps({k: req[k] for k in JOB_KEYS}, protocol=pickle.HIGHEST_PROTOCOL)
            write_all(spare.job_w, HEADER.pack(len(job)) + job)
            outcome = self._collect(spare.pid, spare.result_r, req, t_start)
            # measured here, from outside: the candidate cannot change what this clock says
            outcome["cpu_s"] = time.clock_gettime(clock) - cpu_start
        except (BrokenPipeError, OSError):  # died during its confinement: classify by status
            outcome = {}
        _kill_group(spare.pid)
        outcome["wall_s"] = time.perf_counter() - t_start
        outcome["pid"] = spare.host_pid
        outcome["uid"] = spare.uid
        if "reason" in outcome or "result_json" in outcome:
            # answer first: reaping and forking the next spare overlap with the parent's scoring
            send(self.proto_out, {"op": "result", **outcome})
            self._discard(spare)
        else:
            status = self._discard(spare)
            outcome.update(_status_reason(status, outcome.get("smoke_done", False)))
            outcome["exit_status"] = status
            send(self.proto_out, {"op": "result", **outcome})
        self._check_jail()
        self.spare = self._fork_spare(req)

    def _check_jail(self) -> None:
        """The jail must stay empty (it is read-only to candidates; be sure anyway)."""
        for name in os.listdir(self.jail):
            path = os.path.join(self.jail, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    def _collect(self, pid: int, r: int, req: dict[str, Any], t_start: float) -> dict[str, Any]:
        smoke_deadline = t_start + float(req["smoke_timeout_s"])
        full_deadline = t_start + float(req["timeout_s"])
        cap = int(req["max_result_bytes"])
        buf = bytearray()
        smoke_done = False
        events_json = b""
        while True:
            deadline = full_deadline if smoke_done else min(smoke_deadline, full_deadline)
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                _kill_group(pid)
                stage = "full run" if smoke_done else "smoke test"
                limit = req["timeout_s"] if smoke_done else req["smoke_timeout_s"]
                return {"reason": "timeout", "detail": f"{stage} exceeded {limit:g} s wall clock",
                        "smoke_done": smoke_done}
            ready, _, _ = select.select([r], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(r, 1 << 20)
            if not chunk:
                return {"smoke_done": smoke_done}  # EOF without a result: classify by exit status
            buf += chunk
            if len(buf) > cap + 16:
                _kill_group(pid)
                return {"reason": "output_too_large", "detail": f"result larger than {cap} bytes",
                        "smoke_done": smoke_done}
            while buf:
                tag = bytes(buf[:1])
                if tag == TAG_SMOKE:
                    del buf[:1]
                    smoke_done = True
                    continue
                if tag not in (TAG_RESULT, TAG_EVENTS):
                    _kill_group(pid)
                    return {"reason": "sandbox_error", "detail": "garbled result stream"}
                if len(buf) < 1 + HEADER.size:
                    break
                (n,) = HEADER.unpack(bytes(buf[1:1 + HEADER.size]))
                if n > cap:
                    _kill_group(pid)
                    return {"reason": "output_too_large", "detail": f"result of {n} bytes, limit {cap}"}
                if len(buf) < 1 + HEADER.size + n:
                    break
                payload = bytes(buf[1 + HEADER.size:1 + HEADER.size + n])
                del buf[:1 + HEADER.size + n]
                if tag == TAG_EVENTS:
                    events_json = payload
                    continue
                # parsed (and checked) by the parent; here only forwarded
                return {"result_json": payload, "events_json": events_json, "smoke_done": True,
                        "received": time.perf_counter(), "start": t_start}


def _read_host_pid(spare: Spare) -> int:
    """The child's first message: its pid as the machine sees it (4 bytes), written before
    its confinement (the child of a pid namespace cannot know it afterwards)."""
    if spare.host_pid:
        return spare.host_pid
    try:
        ready, _, _ = select.select([spare.result_r], [], [], 5.0)
        data = os.read(spare.result_r, 4) if ready else b""
    except OSError:
        data = b""
    return struct.unpack(">I", data)[0] if len(data) == 4 else spare.pid


def _cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (Linux: MAKE_PROCESS_CPUCLOCK(pid, SCHED))."""
    return (~pid << 3) | 2


def _vm_size_kb() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise


def _reap(pid: int) -> int:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return status
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue


def _status_reason(status: int, smoke_done: bool) -> dict[str, str]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU or sig == signal.SIGKILL:
            # SIGXCPU at the soft CPU limit, SIGKILL at the hard one (we only send
            # SIGKILL on the wall clock, which returns before reaching here)
            return {"reason": "cpu_limit", "detail": f"killed by {name} (CPU-time limit)"}
        if sig == signal.SIGXFSZ:
            return {"reason": "output_limit", "detail": "wrote more than the output cap"}
        return {"reason": "crashed", "detail": f"killed by {name}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if code == SETUP_FAILED:
        return {"reason": "sandbox_error", "detail": "the sandbox could not confine the child"}
    return {"reason": "exited", "detail": f"process exited with status {code} without a result"}


# ------------------------------------------------------------------ child
def _child(limits: dict[str, Any], server: Server, out_fd: int, job_r: int, w: int, vm_kb: int,
           uid: int | None) -> None:
    import resource

    os.setsid()
    write_all(w, struct.pack(">I", kernel.host_pid()))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    keep = sorted({job_r, w})
    os.closerange(3, keep[0])
    os.closerange(keep[0] + 1, keep[1])
    os.closerange(keep[1] + 1, 1 << 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(sig, signal.SIG_DFL)
    os.environ.clear()
    # Fail closed: any step that fails raises, and the child exits with SETUP_FAILED
    kernel.confine(server.jail, server.mode, uid, server.seccomp)
    kernel.die_with_parent(server.pid)  # after confine: a change of uid clears the parent-death signal
    cpu = max(1, int(math.ceil(float(limits["cpu_s"]))))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if vm_kb:
        extra = int(limits["memory_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm_kb * 1024 + extra, vm_kb * 1024 + extra))
    out_cap = int(limits["output_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (out_cap, out_cap))
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.setrecursionlimit(int(limits.get("recursion_limit", 1000)))
    builtins_ns = _restricted_builtins()
    kernel.seal(server.seccomp)
    try:
        job = recv(job_r)  # blocks until the server hands over a candidate
    except EOFError:
        os._exit(0)  # the server went away or discarded this spare
    t_job = time.perf_counter()
    os.close(job_r)
    result, events_json = _run_candidate(job, server, w, builtins_ns)
    cap = int(job["max_result_bytes"])
    if len(events_json) > cap:
        result, events_json = {"reason": "output_too_large",
                               "detail": f"events of {len(events_json)} bytes, limit {cap}"}, b""
    if events_json:
        write_all(w, TAG_EVENTS + HEADER.pack(len(events_json)) + events_json)
    result["profile"] = {"job": t_job, "done": time.perf_counter()}
    payload = json.dumps(result, allow_nan=False, separators=(",", ":")).encode()
    write_all(w, TAG_RESULT + HEADER.pack(len(payload)) + payload)
    sys.stdout.flush()
    os._exit(0)


def _restricted_builtins() -> dict[str, Any]:
    import builtins

    safe = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES if hasattr(builtins, name)}
    real_import = builtins.__import__
    real_getattr = builtins.getattr

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or name.split(".")[0] not in ALLOWED_MODULES:
            raise ImportError(f"import of {name!r} is not allowed")
        for item in fromlist or ():
            if str(item).startswith("_"):
                raise ImportError(f"import of {name}.{item} is not allowed")
        return real_import(name, globals, locals, fromlist, level)

    def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
        if not isinstance(name, str) or name.startswith("_"):
            raise AttributeError(f"attribute {name!r} is not allowed")
        return real_getattr(obj, name, *default)

    safe["__import__"] = guarded_import
    safe["getattr"] = guarded_getattr
    safe["__build_class__"] = builtins.__build_class__
    return safe


def _line_of(exc: BaseException) -> str:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<candidate>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (line {line})" if line is not None else ""


def _exc_reason(exc: BaseException) -> dict[str, Any]:
    text = f"{type(exc).__name__}: {exc}"[:300] + _line_of(exc)
    if isinstance(exc, MemoryError):
        return {"reason": "memory", "detail": text}
    if isinstance(exc, RecursionError):
        return {"reason": "recursion", "detail": text}
    if isinstance(exc, SystemExit):
        return {"reason": "exited", "detail": f"SystemExit({exc.code!r})"}
    if isinstance(exc, Exception):
        return {"reason": "exception", "detail": text}
    return {"reason": "base_exception", "detail": text}


def _run_candidate(req: dict[str, Any], server: Server, w: int, builtins_ns: dict[str, Any]
                   ) -> tuple[dict[str, Any], bytes]:
    """Run detect on every trace (smoke traces first); returns (times or a reason, events JSON)."""
    pattern = req["pattern"]
    params = list(req["params"])
    depends = list(req["depends"])
    order = list(req["order"])
    n_smoke = int(req["n_smoke"])
    max_events = int(req["max_events_per_trace"])
    cap = int(req["max_result_bytes"])
    size = 2
    ns: dict[str, Any] = {"__builtins__": builtins_ns, "__name__": "candidate",
                          "np": np, "numpy": np, "math": math}
    encoded: dict[int, str] = {}
    times: dict[str, float] = {}
    steps: dict[str, int] = {}
    counter = StepCounter()  # the steps the time penalty reads (`simpatterns.detectors.cost`)
    ns[COUNTER] = counter.tick
    try:
        exec(compile(instrument(ast.parse(req["source"], "<candidate>")), "<candidate>", "exec"), ns)
        counter.take()  # module-level work is not a trace's
        detect = ns.get("detect")
        if not callable(detect):
            return {"reason": "contract", "detail": "detect is not callable"}, b""
        param_set = frozenset(params)
        body_set = frozenset(req["body_params"])
        interval = bool(req["interval"])
        for k, idx in enumerate(order):
            trace = server.traces[idx]
            dep_events = {d: [(f, dict(p)) for f, p in server.deps[d][idx]] for d in depends}
            t0 = time.perf_counter()
            raw = detect(trace, dep_events)
            times[str(idx)] = time.perf_counter() - t0
            steps[str(idx)] = counter.take()
            checked = check_events(raw, pattern, trace.num_frames, param_set, server.name_sets[idx], max_events, idx,
                                   body_set, interval)
            if isinstance(checked, dict):
                return checked, b""
            encoded[idx] = encode_events(checked)
            size += len(encoded[idx]) + len(str(idx)) + 4
            if size > cap:  # stop as soon as the result cannot be sent
                return {"reason": "output_too_large", "detail": f"events of more than {cap} bytes"}, b""
            if k + 1 == n_smoke:
                write_all(w, TAG_SMOKE)
    except BaseException as exc:  # noqa: BLE001 - the candidate's failure is the result
        return _exc_reason(exc), b""
    body = ",".join(f'"{i}":{encoded[i]}' for i in sorted(encoded))
    return {"times": times, "steps": steps}, ("{" + body + "}").encode()


def main() -> None:
    # Keep the protocol pipes away from fds 0/1 so stray prints cannot corrupt them.
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    root = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="simpatterns-sandbox-")
    index = sys.argv[2] if len(sys.argv) > 2 else "0"
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    use_namespaces = (sys.argv[3] if len(sys.argv) > 3 else "namespaces") == "namespaces"
    job_pid = int(sys.argv[4]) if len(sys.argv) > 4 else None  # the process that started this server
    mode, namespaces, why = kernel.enter_namespaces(use_namespaces)  # before any thread: unshare refuses those
    if namespaces:
        kernel.become_init(job_pid)  # from here on this process is pid 1 of the job's pid namespace
    server = Server(proto_in, proto_out, root, int(index), mode, tuple(namespaces), why)
    # The job ended (however it died): remove what this server made and go, now. SIGTERM
    # comes from the waiting parent (`become_init`) or from `end_with_job`'s thread.
    signal.signal(signal.SIGTERM, lambda signum, frame: (_remove_files(server), os._exit(0)))
    if not namespaces and job_pid is not None:
        end_with_job(job_pid, parent_signal=False, end_signal=signal.SIGTERM)  # started by any thread of the job
    try:
        server.serve()
    except Exception:  # noqa: BLE001 - report and die; the parent restarts us
        traceback.print_exc()
        sys.exit(1)
    _remove_files(server)  # a normal end (quit, or the parent is gone: EOF)


def _remove_files(server: Server) -> None:
    """If the parent was killed it cannot clean up, so every server removes what it made;
    the last one the root."""
    shutil.rmtree(server.jail, ignore_errors=True)
    try:
        os.unlink(os.path.join(server.root, f"server-{server.slot}.log"))
    except OSError:
        pass
    try:
        os.rmdir(server.root)
    except OSError:
        pass


if __name__ == "__main__":
    main()
