"""The sandbox on its own: results, limits, and the hostile corpus with the AST gate bypassed."""

import os
import time
from pathlib import Path

import numpy as np
import pytest

from simpatterns.detectors.contract import Candidate
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.sandbox.pool import Sandbox, scrubbed_env

from evolve_fixtures import alive
from evolve_hostile import CORPUS, program

GOOD = '''import numpy as np
PATTERN = "fast"
DESCRIPTION = "a body moves faster than 100 px/s for the first time"
DEPENDS = ["collision start"]
PARAMS = ["object", "n_collisions"]

def detect(trace, events):
    s = trace.speed()
    out = []
    for j, name in enumerate(trace.names):
        idx = np.nonzero(s[:, j] > 100)[0]
        if len(idx):
            out.append((int(idx[0]), {"object": name, "n_collisions": len(events["collision start"])}))
    return out
'''


def reference(trace, n_collisions):
    s = np.linalg.norm(trace.velocity, axis=-1)
    out = []
    for j, name in enumerate(trace.names):
        idx = np.nonzero(s[:, j] > 100)[0]
        if len(idx):
            out.append((int(idx[0]), {"object": name, "n_collisions": n_collisions}))
    return sorted(out, key=lambda e: e[0])  # by frame; one frame keeps the detector's order


@pytest.fixture(scope="module")
def sandbox(traces):
    # wall clocks generous enough for a loaded machine (printing 100 MB takes seconds there); the
    # CPU limit is what stops a loop, so no outcome depends on the load
    limits = SandboxLimits(timeout_s=60.0, smoke_timeout_s=40.0, cpu_s=2.0, memory_mb=512)
    sb = Sandbox(traces[:6], workers=2, limits=limits)
    deps = {"collision start": [[(1, {"object_a": "a", "object_b": "b"})] * (i % 3) for i in range(6)]}
    sb.set_dependency_events(deps)
    yield sb
    root = sb.root
    sb.close()
    assert not Path(root).exists()


def test_good_candidate_matches_reference(sandbox, traces):
    res = sandbox.evaluate(Candidate.parse(GOOD))
    assert res.ok, res.reason
    assert res.times is not None and (res.times > 0).all()
    for i, evs in enumerate(res.events):
        assert evs == reference(traces[i], i % 3)
    # the cost the fitness reads: Python steps (the call, one per body of the loop), the same every run
    again = sandbox.evaluate(Candidate.parse(GOOD))
    assert res.steps is not None and (res.steps == again.steps).all()
    assert res.steps.tolist() == [1 + len(t.names) for t in traces[:6]]


DECLARING = '''import numpy as np
PATTERN = "shove"
DESCRIPTION = "the first body is pushed by the second"
DEPENDS = []
PARAMS = ["object", "pusher", "object_note", "frames"]
BODY_PARAMS = ["object", "pusher"]
DURATION = "interval"

def detect(trace, events):
    return [(1, {"object": trace.names[0], "pusher": PUSHER, "object_note": "not a body", "frames": FRAMES})]
'''


@pytest.mark.parametrize("pusher, frames, code", [
    ("trace.names[1]", "2", None),  # object_note is not declared a body: any text
    ("'nobody'", "2", R.UNKNOWN_OBJECT),  # a declared body param must name a body
    ("[trace.names[1], trace.names[2]]", "2", None),  # or a list of bodies
    ("[trace.names[1], 'nobody']", "2", R.UNKNOWN_OBJECT),
    ("trace.names[1]", "0", R.INVALID_EVENTS),  # an interval lasts at least one frame
])
def test_events_are_checked_against_what_the_candidate_declares(sandbox, pusher, frames, code):
    source = DECLARING.replace("PUSHER", pusher).replace("FRAMES", frames)
    res = sandbox.evaluate(Candidate.parse(source))
    assert (res.reason.code if res.reason else None) == code, res.reason
    if code == R.UNKNOWN_OBJECT:
        assert "pusher='nobody'" in res.reason.detail
    # the contract's defaults, when nothing is declared: object and object_* name bodies, frames make intervals
    undeclared = Candidate.parse(source.replace('BODY_PARAMS = ["object", "pusher"]\n', "")
                                 .replace('DURATION = "interval"\n', ""))
    assert undeclared.declarations.body_params == ("object", "object_note")
    assert undeclared.declarations.duration == "interval"
    default = sandbox.evaluate(undeclared)
    assert default.reason is not None and default.reason.code == R.UNKNOWN_OBJECT, default.reason
    assert "object_note='not a body'" in default.reason.detail


def test_both_sides_of_the_boundary_check_the_declared_bodies():
    from simpatterns.sandbox.events import check_events
    from simpatterns.sandbox.events import check_plain_events

    names = {"ground", "red ball"}
    params = frozenset({"object", "pusher", "frames"})
    good = [[1, {"object": "red ball", "pusher": "ground", "frames": 2}]]
    bad = [[1, {"object": "red ball", "pusher": "moon", "frames": 2}]]
    for bodies, events, code in [(frozenset({"object", "pusher"}), bad, R.UNKNOWN_OBJECT),
                                 (frozenset({"object"}), bad, None), (None, bad, None),  # default: object only
                                 (frozenset({"object", "pusher"}), good, None)]:
        plain = check_plain_events(events, 10, params, names, 100, 0, bodies, interval=True)
        child = check_events([tuple(e) for e in events], "shove", 10, params, names, 100, 0, bodies, True)
        assert (plain.code if isinstance(plain, R.Reason) else None) == code
        assert (child["reason"] if isinstance(child, dict) else None) == code
    short = [[1, {"object": "red ball", "pusher": "ground", "frames": 0}]]
    assert check_plain_events(short, 10, params, names, 100, 0, interval=True).code == R.INVALID_EVENTS
    assert check_events([tuple(e) for e in short], "shove", 10, params, names, 100, 0, None, True)["reason"] == \
        R.INVALID_EVENTS
    assert check_plain_events(short, 10, params, names, 100, 0) == [(1, short[0][1])]


def test_isolation_facts(sandbox):
    prot = sandbox.protection
    assert prot.meets_minimum and prot.chroot and prot.seccomp
    if os.geteuid() == 0:
        assert prot.mode == "root" and prot.distinct_uids
    assert "OPENAI_API_KEY" not in scrubbed_env()
    assert set(scrubbed_env()) <= {"PATH", "LANG", "LC_ALL", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                   "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"}


def test_unknown_dependency_refused(sandbox):
    res = sandbox.evaluate(Candidate.parse(GOOD.replace('"collision start"]', '"airborne"]')))
    assert res.reason.code == R.UNKNOWN_DEPENDENCY


def test_server_survives_a_killed_child_and_keeps_answering(sandbox):
    loop = program("fast", "    while True:\n        pass", "/nonexistent")
    res = sandbox.evaluate(Candidate.parse(loop), limits=SandboxLimits(timeout_s=1.0, smoke_timeout_s=1.0,
                                                                       cpu_s=5.0, memory_mb=512))
    assert res.reason.code == R.TIMEOUT  # the wall clock (1 s) comes before the CPU limit (5 s of CPU)
    sandbox.settle()
    with pytest.raises(ProcessLookupError):
        os.killpg(res.pid, 0)
    res = sandbox.evaluate(Candidate.parse(GOOD))
    assert res.ok


@pytest.mark.skipif(os.geteuid() != 0, reason="the gate-free boundary (chroot, nobody) needs root")
def test_hostile_corpus_without_the_gate(sandbox, tmp_path, monkeypatch):
    """Each hostile program runs with no AST gate at all: the process boundary alone holds."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    marker = str(tmp_path / "marker")
    for name, body, _, sandbox_reasons in CORPUS:
        res = sandbox.evaluate(Candidate.parse(program("fast", body, marker)))
        code = res.reason.code if res.reason else "ok"
        assert code in sandbox_reasons, f"{name}: {res.reason}"
        assert "sk-test-secret" not in str(res.reason) and "root:x:0" not in str(res.reason), name
        assert not os.path.exists(marker) and not os.path.exists(marker + ".npy"), name
        sandbox.settle()
        if res.pid:
            with pytest.raises(ProcessLookupError):
                os.killpg(res.pid, 0)
    assert list(tmp_path.iterdir()) == []


def test_close_leaves_no_process(traces):
    sb = Sandbox(traces[:3], workers=2, limits=SandboxLimits(timeout_s=2, smoke_timeout_s=1))
    for _ in range(3):
        assert sb.evaluate(Candidate.parse(program("fast", "    return [(1, {'object': 'ground'})]", ""))).ok
    root = sb.root
    sb.close()
    seen = sb.pids_seen
    assert len(seen) >= 2 + 3  # two servers, three candidates (and the spares)
    deadline = time.time() + 5
    while alive(seen) and time.time() < deadline:
        time.sleep(0.05)
    assert alive(seen) == [] and not Path(root).exists()


def test_events_hash_is_the_same_in_the_sandbox_and_the_fitness(sandbox):
    from simpatterns.evolve.fitness import events_hash

    res = sandbox.evaluate(Candidate.parse(GOOD))
    assert res.ok and res.events_hash == events_hash(res.events)
    # the same behaviour written differently hashes the same
    other = GOOD.replace("for j, name in enumerate(trace.names):", "for j in range(len(trace.names)):\n"
                         "        name = trace.names[j]")
    assert sandbox.evaluate(Candidate.parse(other)).events_hash == res.events_hash


def test_parent_kills_and_restarts_a_hung_server(traces):
    import signal

    limits = SandboxLimits(timeout_s=1.0, smoke_timeout_s=1.0, server_grace_s=1.0)
    sb = Sandbox(traces[:3], workers=1, limits=limits)
    try:
        [server] = sb.server_pids
        os.kill(server, signal.SIGSTOP)  # a server that no longer answers
        t0 = time.time()
        res = sb.evaluate(Candidate.parse(program("fast", "    return [(1, {'object': 'ground'})]", "")))
        assert res.reason.code == R.TIMEOUT and "restarted" in res.reason.detail
        assert time.time() - t0 < 10
        assert sb.server_pids != [server] and alive([server]) == []
        assert sb.evaluate(Candidate.parse(program("fast", "    return [(1, {'object': 'ground'})]", ""))).ok
    finally:
        sb.close()
    deadline = time.time() + 5
    while alive(sb.pids_seen) and time.time() < deadline:
        time.sleep(0.05)
    assert alive(sb.pids_seen) == []


def test_numpy_functions_that_import_lazily_run_in_the_sandbox(sandbox, traces):
    """np.median, np.percentile and np.unique import numpy.ma on first use: the server
    imports it before confining children (inside a chroot a lazy import finds no file)."""
    source = '''import numpy as np
PATTERN = "medians"
DESCRIPTION = "median speed, its 90th percentile and the distinct colliding bodies, at frame 0"
DEPENDS = []
PARAMS = ["median", "p90", "bodies"]

def detect(trace, events):
    s = np.sqrt((trace.velocity ** 2).sum(axis=-1))
    return [(0, {"median": float(np.median(s)), "p90": float(np.percentile(s, 90)),
                 "bodies": int(np.unique(trace.contact_a).size)})]
'''
    res = sandbox.evaluate(Candidate.parse(source))
    assert res.ok, res.reason
    for trace, events in zip(traces[:6], res.events):
        s = np.sqrt((trace.velocity ** 2).sum(axis=-1))
        assert events == [(0, {"median": float(np.median(s)), "p90": float(np.percentile(s, 90)),
                               "bodies": int(np.unique(trace.contact_a).size)})]
