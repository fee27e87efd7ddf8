"""The kernel is the boundary: namespaces, one uid per candidate, the seccomp allow-list, the
parent's own clock, and the refusal below the stated minimum.

Every program here runs with the AST gate switched off (``Candidate.parse`` does the contract
checks only): what is tested is what holds when the gate has been defeated, as the frame and
``match`` routes of `evolve_hostile.KERNEL` defeated the old one.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from simpatterns.detectors.contract import Candidate
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.gate import check_candidate
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.sandbox.pool import Sandbox, SandboxError
from simpatterns.sandbox.reasons import Rejected

from evolve_fixtures import alive
from evolve_hostile import FRAME_GLOBALS, KERNEL, MATCH_GLOBALS, NUMPY, RESULTS, program

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="sentinels of other uids and the uid ranges need root")
# Wall clocks generous enough for a loaded machine; the CPU limit is what stops a loop.
LIMITS = SandboxLimits(timeout_s=30.0, smoke_timeout_s=20.0, cpu_s=2.0, memory_mb=512, max_result_bytes=1 << 20)


def sysv_objects() -> dict[str, int]:
    """SysV IPC objects of the machine's IPC namespace (what ``ipcs`` lists)."""
    out = {}
    for kind in ("shm", "msg", "sem"):
        out[kind] = len(Path(f"/proc/sysvipc/{kind}").read_text().splitlines()) - 1
    return out


def processes_of(uids: set[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
        if line and int(line.split()[1]) in uids and " Z " not in status:
            found.append(int(entry))
    return alive(found)


def owned_by(folder: str, uids: set[int]) -> list[str]:
    out = []
    for name in os.listdir(folder):
        try:
            if os.lstat(os.path.join(folder, name)).st_uid in uids:
                out.append(name)
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def kernel_sandbox(traces):
    sb = Sandbox(traces[:4], workers=1, limits=LIMITS)
    yield sb
    sb.close()


def test_protection_on_this_machine(kernel_sandbox):
    prot = kernel_sandbox.protection
    assert prot.meets_minimum and prot.seccomp and prot.chroot, prot
    assert {"pid", "ipc", "mount", "uts", "net"} <= set(prot.namespaces)
    if ROOT:
        assert prot.mode == "root" and prot.distinct_uids
        [uids] = kernel_sandbox.candidate_uids
        assert 65534 not in uids and 0 not in uids
    else:
        assert prot.mode == "userns"


def test_below_the_minimum_is_refused_unless_unsafe(traces):
    with pytest.raises(SandboxError, match=r"missing: .*namespace.*--unsafe-sandbox"):
        Sandbox(traces[:2], workers=1, limits=LIMITS, namespaces=False)
    with Sandbox(traces[:2], workers=1, limits=LIMITS, namespaces=False, unsafe=True) as sb:
        assert not sb.protection.meets_minimum and sb.protection.seccomp
        res = sb.evaluate(Candidate.parse(program("fast", "    return [(1, {'object': 'ground'})]", "")))
        assert res.ok, res.reason


PROBE = FRAME_GLOBALS + '''    os = glb['os']
    ctypes = glb['sys'].modules['ctypes']
    libc = ctypes.CDLL(None, use_errno=True)
    out = {}
    def attempt(name, fn):
        try:
            r = fn()
            out[name] = 0 if r is None or r >= 0 else ctypes.get_errno()
        except Exception as e:
            out[name] = e.args[0]
    attempt('open', lambda: os.open('/', os.O_RDONLY))
    attempt('socket', lambda: libc.socket(2, 1, 0))
    attempt('fork', lambda: libc.fork())
    attempt('kill_parent', lambda: os.kill(os.getppid(), 0))
    attempt('ptrace', lambda: libc.ptrace(16, os.getppid(), 0, 0))
    attempt('unshare', lambda: libc.unshare(0x10000000))
    attempt('mount', lambda: libc.mount(b'none', b'/', b'tmpfs', 0, 0))
    attempt('personality', lambda: libc.personality(0x0040000))
    attempt('keyctl', lambda: libc.syscall(250, 0, 0, 0, 0, 0))
    attempt('bpf', lambda: libc.syscall(321, 0, 0, 0))
    attempt('setuid0', lambda: libc.setuid(0))
    attempt('shmget', lambda: libc.shmget(0, 4096, 0o1666))
    attempt('memfd', lambda: libc.memfd_create(b'x', 0))
    return [(0, {'object': 'PROBE' + ','.join(k + ':' + str(v) for k, v in out.items()) + ';'})]
'''


def test_seccomp_forbids_what_a_detector_never_needs(kernel_sandbox):
    res = kernel_sandbox.evaluate(Candidate.parse(program("fast", PROBE, "")))
    assert res.reason is not None and res.reason.code == R.UNKNOWN_OBJECT, res.reason
    text = res.reason.detail.split("PROBE", 1)[1].split(";", 1)[0]
    seen = {k: int(v) for k, v in (item.split(":") for item in text.split(","))}
    assert set(seen) == {"open", "socket", "fork", "kill_parent", "ptrace", "unshare", "mount", "personality",
                         "keyctl", "bpf", "setuid0", "shmget", "memfd"}
    assert all(v == 1 for v in seen.values()), seen  # EPERM, every one


def test_the_parent_measures_the_time(kernel_sandbox):
    """A candidate that replaces the child's clock still pays for the CPU it used."""
    forged = dict((n, b) for n, b, _, _ in KERNEL)["frame_forged_clock"]
    # a fifth of the hostile loop: about 0.3 s of CPU on 4 traces, far under the 2 s limit on a
    # loaded machine (the full loop, 1.6 s, once read 2.0 s in CI and was killed)
    assert "range(3_000_000)" in forged
    forged = forged.replace("range(3_000_000)", "range(600_000)")
    honest = forged.replace("    glb['time'].perf_counter = lambda: start\n", "")
    a = kernel_sandbox.evaluate(Candidate.parse(program("fast", forged, "")))
    b = kernel_sandbox.evaluate(Candidate.parse(program("fast", honest, "")))
    assert a.ok and b.ok, (a.reason, b.reason)
    assert a.cpu_s > 0.05 and b.cpu_s > 0.05
    assert a.times.sum() == pytest.approx(a.cpu_s) and b.times.sum() == pytest.approx(b.cpu_s)
    assert a.cpu_s > 0.4 * b.cpu_s  # both burn the same loop


def test_results_that_would_grow_in_the_parent_are_refused_before_parsing(kernel_sandbox):
    """Empty lists straight into the result pipe: 3.9 MB under a 4 MiB cap, 1.3 million lists
    (80 MB once parsed) -- counted and refused before the parent parses anything."""
    bomb = dict((n, b) for n, b, _, _ in RESULTS)["pipe_empty_lists"]
    res = kernel_sandbox.evaluate(Candidate.parse(program("fast", bomb, "")),
                                  limits=replace(LIMITS, max_result_bytes=4 << 20))
    assert res.reason is not None and res.reason.code == R.INVALID_EVENTS, res.reason
    assert "lists and objects" in res.reason.detail


def test_both_routes_past_the_old_gate_are_closed():
    for name, body in (("frame", FRAME_GLOBALS + "    return []"), ("match", MATCH_GLOBALS + "    return []")):
        with pytest.raises(Rejected) as err:
            check_candidate(program("fast", body, ""), "fast")
        assert err.value.reason.code == R.FORBIDDEN_ATTRIBUTE, name


@needs_root
def test_kernel_corpus_without_the_gate(traces, tmp_path):
    """SysV IPC, signals to sentinels of the candidates' own uids and of nobody, writing into
    the result pipe, numpy exhaustion: contained, and nothing left behind."""
    kernel_sandbox = Sandbox(traces[:4], workers=1, limits=LIMITS)
    [uids] = kernel_sandbox.candidate_uids
    sentinel_uids = [65534] + list(uids[:40])
    sentinels = [subprocess.Popen(["sleep", "120"], user=u) for u in sentinel_uids]
    ipc_before = sysv_objects()
    try:
        pids = [p.pid for p in sentinels]
        for name, body, _, sandbox_ok in KERNEL + NUMPY + RESULTS:
            res = kernel_sandbox.evaluate(Candidate.parse(program("fast", body, str(tmp_path / "m"), name, pids)))
            code = res.reason.code if res.reason else "ok"
            assert code in sandbox_ok, f"{name}: {res.reason}"
            if "ipc" in name:
                assert "[-1, -1, -1]" in res.reason.detail, res.reason.detail
            if "signals" in name:
                assert "killed []" in res.reason.detail, res.reason.detail
        kernel_sandbox.close()
        assert alive(pids) == pids  # every sentinel survived
        assert sysv_objects() == ipc_before
        assert set(processes_of(set(uids))) == set(pids[1:])  # the sentinels, nothing else
        # by owner: other processes of the machine make entries meanwhile (multiprocessing's sem.mp-*)
        assert owned_by("/tmp", set(uids)) == [] and owned_by("/dev/shm", set(uids) | {65534}) == []
        assert list(tmp_path.iterdir()) == []
    finally:
        kernel_sandbox.close()
        for p in sentinels:
            p.kill()
            p.wait()


def test_candidates_run_as_distinct_uids(kernel_sandbox):
    src = program("fast", "    return [(1, {'object': 'ground'})]", "")
    results = [kernel_sandbox.evaluate(Candidate.parse(src)) for _ in range(3)]
    assert all(r.ok for r in results)
    if ROOT:
        uids = [r.uid for r in results]
        assert len(set(uids)) == 3 and all(u in kernel_sandbox.candidate_uids[0] for u in uids)


def test_a_killed_server_takes_every_candidate_with_it(traces):
    """The server is pid 1 of the job's pid namespace: when it dies the kernel kills the rest."""
    with Sandbox(traces[:2], workers=1, limits=LIMITS) as sb:
        loop = program("fast", "    while True:\n        pass", "")
        import threading

        t = threading.Thread(target=lambda: sb.evaluate(Candidate.parse(loop)))
        t.start()
        deadline = time.time() + 10
        while not sb._workers[0].last_child and time.time() < deadline:
            time.sleep(0.01)
        child = sb._workers[0].last_child
        [server] = sb.server_pids
        os.kill(server, 9)
        t.join(30)
        deadline = time.time() + 5
        while alive([child, server]) and time.time() < deadline:
            time.sleep(0.02)
        assert alive([child, server]) == []
