"""The processes a test (or a job it ran) started, found and ended, so no test leaves one behind.

Every process the suite starts carries ``SIMPATTERNS_TEST_JOB`` in its environment: the
suite's token (``.ci/run`` sets one and checks, after pytest, that no process carries it),
then ``<token>/<n>`` for the n-th test of this pytest process. After each test, passed,
failed or stopped by pytest-timeout (its default ``signal`` method unwinds the test, so the
teardown runs), `no_process_outlives_its_test` kills what that test started: the processes
marked with its token (found even once re-parented to init) and the new processes under
this one. Processes started under older ones (a session server's own workers) are left to
their owner. Run as a script, ``python tests/process_tree.py TOKEN`` lists the processes
still carrying TOKEN (or a token of one of its tests) and exits 1 if there are any.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

import pytest

TOKEN_VAR = "SIMPATTERNS_TEST_JOB"


@dataclass(frozen=True)
class Proc:
    """A process as /proc shows it; ``start`` (clock ticks after boot) tells a reused pid apart."""

    pid: int
    ppid: int
    start: int
    state: str


def _stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return Proc(pid, int(fields[1]), int(fields[19]), fields[0])


def processes() -> list[Proc]:
    """Every live process (zombies, already dead, are left out)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = _stat(int(entry))
            if p is not None and p.state not in ("Z", "X"):
                out.append(p)
    return out


def job_token(pid: int) -> str | None:
    """The ``SIMPATTERNS_TEST_JOB`` a process was started with (None: none, or not readable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{TOKEN_VAR}=".encode()
    for item in env:
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def now_ticks() -> int:
    """The clock `Proc.start` counts in (ticks since boot), now."""
    with open("/proc/uptime") as fh:
        return int(float(fh.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def marked(token: str, since: int = 0) -> list[Proc]:
    """Live processes started with ``token`` or with a token under it (``token/...``);
    ``since``: only those started from that tick on (fewer environments to read)."""
    me = os.getpid()
    out = []
    for p in processes():
        found = job_token(p.pid) if p.pid != me and p.start >= since else None
        if found is not None and (found == token or found.startswith(token + "/")):
            out.append(p)
    return out


def _children(procs: list[Proc]) -> dict[int, list[Proc]]:
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    return children


def descendants(root: int, procs: list[Proc] | None = None) -> list[Proc]:
    """The live processes under ``root`` (children, their children, ...)."""
    children = _children(processes() if procs is None else procs)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def alive(procs: list[Proc]) -> list[Proc]:
    """Those of ``procs`` still running (the same process: same pid and start time)."""
    now = {(p.pid, p.start) for p in processes()}
    return [p for p in procs if (p.pid, p.start) in now]


def kill(procs: list[Proc]) -> None:
    """SIGKILL each (checked against its start time, so a reused pid is spared)."""
    for p in alive(procs):
        try:
            os.kill(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(procs: list[Proc], timeout: float) -> tuple[float, list[Proc]]:
    """Poll until none of ``procs`` runs or ``timeout`` passed: (seconds waited, those left)."""
    t0 = time.monotonic()
    left = alive(procs)
    while left and time.monotonic() - t0 < timeout:
        time.sleep(0.02)
        left = alive(left)
    return time.monotonic() - t0, left


def new_tree(root: int, before: set[tuple[int, int]], keep: frozenset[int] | set[int] = frozenset()) -> list[Proc]:
    """Processes under ``root`` started since ``before`` was taken, reached only through new
    processes (what a session fixture's server started on its own is not the test's) or
    through ``keep``: this process's own helpers, which stay (their new children do not)."""
    children = _children(processes())
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child.pid in keep:
                todo.append(child.pid)
            elif (child.pid, child.start) not in before:
                out.append(child)
                todo.append(child.pid)
    return out


def _multiprocessing_helpers() -> set[int]:
    """multiprocessing's fork server and resource tracker: started once per process, on
    first use, and reused (a killed resource tracker is restarted with a warning)."""
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    pids = {getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
            getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)}
    return {p for p in pids if p}


_SUITE_TOKEN = os.environ.get(TOKEN_VAR) or f"pytest-{uuid.uuid4().hex[:12]}"
os.environ[TOKEN_VAR] = _SUITE_TOKEN
_counter = iter(range(1, 1 << 62))


@pytest.fixture(autouse=True)
def no_process_outlives_its_test() -> Iterator[None]:
    """Mark what the test starts with its own token; afterwards kill whatever it left."""
    me = os.getpid()
    before = {(p.pid, p.start) for p in descendants(me)}
    since = now_ticks() - 1
    held = _process_wide_workers()
    token = f"{_SUITE_TOKEN}/{os.getpid()}-{next(_counter)}"
    os.environ[TOKEN_VAR] = token
    try:
        yield
    finally:
        os.environ[TOKEN_VAR] = _SUITE_TOKEN
        _close_process_wide_workers(held)
        helpers = _multiprocessing_helpers()
        found = [*new_tree(me, before, helpers), *marked(token, since)]
        left = list({(p.pid, p.start): p for p in found if p.pid not in helpers}.values())
        if left:
            kill(left)
            wait_gone(left, 5.0)


def _process_wide_workers() -> set[int]:
    """What this process keeps for later calls: its annotation sandbox, pools left open."""
    held: list[object] = []
    sandboxed = sys.modules.get("simpatterns.annotate.sandboxed")
    if sandboxed is not None and sandboxed._SHARED.sandbox is not None:
        held.append(sandboxed._SHARED.sandbox)
    parallel = sys.modules.get("simpatterns.parallel")
    if parallel is not None:
        held.extend(parallel._OPEN_POOLS)
    return {id(x) for x in held}


def _close_process_wide_workers(before: set[int]) -> None:
    """Close those the test started the proper way, so the next test starts them afresh
    instead of finding them killed (a fixture's, older than the test, are left alone)."""
    sandboxed = sys.modules.get("simpatterns.annotate.sandboxed")
    if sandboxed is not None and id(sandboxed._SHARED.sandbox) not in before:
        sandboxed.close_shared_sandbox()
    parallel = sys.modules.get("simpatterns.parallel")
    for pool in list(getattr(parallel, "_OPEN_POOLS", ())):
        if id(pool) not in before:
            pool.stop()


@dataclass
class Killed:
    """A job SIGKILLed mid-run by `kill_mid_run`."""

    workers: int  # processes of the job besides its parent, running at the kill
    seconds: float  # from the kill until none of them ran
    left: list[Proc]  # those still running after the grace


def kill_mid_run(argv: list[str], cwd: str | os.PathLike[str], started: Callable[[], bool], *,
                 workers: int = 2, timeout: float = 300.0, grace: float = 30.0,
                 env: dict[str, str] | None = None) -> Killed:
    """Run ``argv``, SIGKILL it once ``started()`` holds and ``workers`` processes run under
    it, and wait (up to ``grace`` s) until no process of the job runs: those under it at the
    kill and any carrying the job's own token. ``env``: the job's environment (default: ours)."""
    token = f"{os.environ.get(TOKEN_VAR, _SUITE_TOKEN)}/kill-{uuid.uuid4().hex[:8]}"
    with open(os.path.join(cwd, f"stderr-{token[-8:]}.txt"), "w+") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env={**(os.environ if env is None else env), TOKEN_VAR: token},
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + timeout
            while not (started() and len(descendants(proc.pid)) >= workers):
                if proc.poll() is not None:
                    err.seek(0)
                    raise AssertionError(f"the job ended (exit {proc.returncode}) before it could be killed: "
                                         f"{err.read()[-3000:]}")
                assert time.monotonic() < deadline, "the job never started its workers"
                time.sleep(0.02)
            job = descendants(proc.pid)
            proc.kill()
            proc.wait()
            seconds, left = wait_gone([*job, *marked(token)], grace)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return Killed(len(job), seconds, left)


def main(argv: list[str]) -> int:
    """``TOKEN [GRACE_S]``: list the processes still carrying TOKEN (after up to GRACE_S
    seconds for them to end, 5 by default); exit 1 when there are any."""
    token = argv[0]
    grace = float(argv[1]) if len(argv) > 1 else 5.0
    _, left = wait_gone(marked(token), grace)
    for p in left:
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        print(f"left running by the test suite: pid {p.pid} ({job_token(p.pid)}): {cmd[:200]}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
