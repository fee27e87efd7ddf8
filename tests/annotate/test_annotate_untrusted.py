"""Untrusted (LLM-written, provenance "evolved") detectors: loading never executes them,
annotation puts them through the AST gate and runs them only in the sandbox.

The hostile detectors here reach what the gate forbids by name (``g = getattr``
and a format string). The gate now rejects both (checked below), so the other
tests switch the gate's safety walk off, as a future bypass would: what stops
the probes is then the sandbox, and each is shown to work when trusted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simpatterns.annotation import Annotation
from simpatterns.annotate.annotator import annotate, annotate_many, run_detector
from simpatterns.annotate.phases import plan_phases
from simpatterns.annotate.sandboxed import _SHARED, SandboxPolicy, close_shared_sandbox
from simpatterns.sandbox.gate import check_untrusted
from simpatterns.detectors.contract import DetectorError
from simpatterns.detectors.library import LibraryError, PatternLibrary

SECRET = "hunter2-not-for-detectors"

# hand-written (trusted) detectors
TOUCHING = '''
PATTERN = "touching"
DESCRIPTION = "Two bodies are in contact at this frame."
DEPENDS = []
PARAMS = ["object_a", "object_b"]


def detect(trace, events):
    names = trace.names
    return [(int(f), {"object_a": names[a], "object_b": names[b]})
            for f, a, b in zip(trace.contact_frame, trace.contact_a, trace.contact_b)]
'''

MOVING = '''
import numpy as np

PATTERN = "moving"
DESCRIPTION = "A dynamic body moves faster than 20 px/s."
DEPENDS = []
PARAMS = ["object", "speed"]


def detect(trace, events):
    speed = np.linalg.norm(trace.velocity, axis=-1)
    return [(int(f), {"object": trace.names[i], "speed": float(speed[f, i])})
            for i in np.nonzero(trace.dynamic_mask)[0] for f in np.nonzero(speed[:, i] > 20.0)[0]]
'''

FAST_START = '''
import numpy as np

PATTERN = "fast start"
DESCRIPTION = "A dynamic body first moves faster than 30 px/s."
DEPENDS = []
PARAMS = ["object", "speed"]


def detect(trace, events):
    speed = np.linalg.norm(trace.velocity, axis=-1)
    out = []
    for i in np.nonzero(trace.dynamic_mask)[0]:
        fast = np.nonzero(speed[:, i] > 30.0)[0]
        if len(fast):
            f = int(fast[0])
            out.append((f, {"object": trace.names[i], "speed": float(speed[f, i])}))
    return out
'''

TOUCH_PAIRS = '''
PATTERN = "touch pairs"
DESCRIPTION = "Each touching pair once, at its first contact, with the number of contact frames."
DEPENDS = ["touching"]
PARAMS = ["object_a", "object_b", "count"]


def detect(trace, events):
    counts, first = {}, {}
    for frame, p in events["touching"]:
        key = (p["object_a"], p["object_b"])
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, frame)
    return [(first[k], {"object_a": k[0], "object_b": k[1], "count": counts[k]}) for k in sorted(counts)]
'''

# trusted code reading an untrusted pattern's events
LATE_FAST = '''
PATTERN = "late fast start"
DESCRIPTION = "A fast start after the first frame."
DEPENDS = ["fast start"]
PARAMS = ["object"]


def detect(trace, events):
    return [(f, {"object": p["object"]}) for f, p in events["fast start"] if f > 0]
'''

ENV_PROBE = '''
import numpy as np

PATTERN = "env probe"
DESCRIPTION = "Reports the process environment (a format string walks past the gate to os.environ)."
DEPENDS = []
PARAMS = ["env"]


def detect(trace, events):
    return [(0, {"env": "{0.lib._datasource.os.environ}".format(np)})]
'''

WRITER = '''
import numpy as np

PATTERN = "writer"
DESCRIPTION = "Writes files when its module runs and when detect runs."
DEPENDS = []
PARAMS = []

g = getattr
g(np, "sa" + "ve")(LOAD_MARKER, np.zeros(3))


def detect(trace, events):
    g(np, "sa" + "ve")(RUN_MARKER, np.zeros(3))
    return []
'''

LOOP = '''
PATTERN = "loop forever"
DESCRIPTION = "Never returns."
DEPENDS = []
PARAMS = []


def detect(trace, events):
    while True:
        pass
'''

MALFORMED = '''
PATTERN = "malformed"
DESCRIPTION = "Emits a frame past the end of the trace."
DEPENDS = []
PARAMS = ["object"]


def detect(trace, events):
    return [(trace.num_frames + 3, {"object": "ground"})]
'''

AFTER_LOOP = '''
PATTERN = "after loop"
DESCRIPTION = "Trusted, reads a pattern that times out."
DEPENDS = ["loop forever"]
PARAMS = []


def detect(trace, events):
    return [(0, {})]
'''

AFTER_MALFORMED = '''
PATTERN = "after malformed"
DESCRIPTION = "Untrusted, reads a pattern that returns bad events."
DEPENDS = ["malformed"]
PARAMS = []


def detect(trace, events):
    return [(0, {})]
'''

PICKY = '''
import numpy as np

PATTERN = "picky"
DESCRIPTION = "Fails on traces whose ball starts right of x = 150, fires at frame 1 elsewhere."
DEPENDS = []
PARAMS = ["object"]


def detect(trace, events):
    x = trace.position[0][trace.dynamic_mask][:, 0]
    if float(x.max()) > 150.0:
        raise ValueError("ball too far right")
    return [(1, {"object": trace.names[int(np.nonzero(trace.dynamic_mask)[0][0])]})]
'''

GOOD = ["fast start", "touch pairs", "late fast start"]
HOSTILE = ["env probe", "writer", "loop forever", "malformed", "after loop", "after malformed"]
FAST = SandboxPolicy(trace_timeout_s=0.5)  # the forever loop costs about a second


def writer_source(tmp_path: Path) -> str:
    return (WRITER.replace("LOAD_MARKER", repr(str(tmp_path / "loaded.npy")))
            .replace("RUN_MARKER", repr(str(tmp_path / "ran.npy"))))


def build(path: Path, hostile: bool, tmp_path: Path) -> Path:
    """A saved library: hand-written (trusted) and evolved (untrusted) detectors mixed.
    Built from sources with provenance "evolved", which `add` checks without running."""
    lib = PatternLibrary.from_detectors([TOUCHING, MOVING])
    lib.add(FAST_START, provenance="evolved", fitness=0.1)
    lib.add(TOUCH_PAIRS, provenance="evolved")
    lib.add(LATE_FAST, provenance="hand-written")
    if hostile:
        for src in (ENV_PROBE, writer_source(tmp_path), LOOP, MALFORMED):
            lib.add(src, provenance="evolved")
        lib.add(AFTER_LOOP, provenance="hand-written")
        lib.add(AFTER_MALFORMED, provenance="evolved")
    return lib.save(path)


@pytest.fixture(autouse=True)
def gate_bypassed(monkeypatch):
    import simpatterns.sandbox.gate as gate

    monkeypatch.setattr(gate, "_walk", lambda tree: None)


def test_gate_rejects_the_probes_on_its_own(tmp_path, drop_trace, monkeypatch):
    import simpatterns.sandbox.gate as gate

    monkeypatch.undo()  # the real gate
    assert gate._walk is not None
    for src, what in ((ENV_PROBE, ".format"), (writer_source(tmp_path), "getattr")):
        lib = PatternLibrary.from_detectors([TOUCHING, MOVING])
        lib.add(src, provenance="evolved")  # the contract's static checks only: nothing runs
        for run in (lambda: check_untrusted(lib), lambda: annotate(drop_trace, lib),
                    lambda: annotate_many([drop_trace], lib)):
            with pytest.raises(LibraryError, match="AST gate") as err:
                run()
            assert what in str(err.value)
    assert not (tmp_path / "loaded.npy").exists() and not (tmp_path / "ran.npy").exists()


@pytest.fixture()
def hostile_dir(tmp_path) -> Path:
    return build(tmp_path / "hostile", True, tmp_path)


@pytest.fixture()
def good_dir(tmp_path) -> Path:
    return build(tmp_path / "good", False, tmp_path)


def events_of(ann: Annotation, label: str) -> list[tuple[int, dict]]:
    return [(e.frame, e.params) for e in ann.by_pattern(label)]


# ------------------------------------------------------------------ loading
def test_loading_checks_evolved_code_without_running_it(hostile_dir, tmp_path):
    lib = PatternLibrary.load(hostile_dir)
    assert not (tmp_path / "loaded.npy").exists()  # the writer's module-level code did not run
    assert lib.untrusted_labels() == ["fast start", "touch pairs", "env probe", "writer", "loop forever",
                                      "malformed", "after malformed"]
    for label in lib.untrusted_labels():
        det = lib.get(label)
        assert det.detect is None and not det.trusted and not lib.is_trusted(label)
        assert lib.entry(label).provenance == "evolved"
    for label in ("touching", "moving", "late fast start", "after loop"):
        assert lib.is_trusted(label) and callable(lib.get(label).detect)
    # trust survives copies and the trip to pool workers
    for other in (lib.copy(), lib.subset(["after malformed"]), PatternLibrary.from_spec(lib.to_spec())):
        assert all(not other.is_trusted(k) for k in other if k in lib.untrusted_labels())
    assert not (tmp_path / "loaded.npy").exists()
    # the shipped library is trusted code
    assert PatternLibrary.builtin().untrusted_labels() == []
    # running an untrusted detector in-process is refused, not attempted
    with pytest.raises(DetectorError, match="runs only in the sandbox"):
        run_detector(lib.get("writer"), None, {})


def test_opting_in_runs_evolved_code_in_process(hostile_dir, tmp_path):
    """The probes work: trusted, the writer's module code writes its file on load."""
    lib = PatternLibrary.load(hostile_dir, trust_evolved=True)
    assert lib.untrusted_labels() == [] and lib.trust_evolved
    assert (tmp_path / "loaded.npy").exists()
    back = PatternLibrary.from_spec(lib.to_spec())  # what pool workers rebuild
    assert back.untrusted_labels() == []


def test_gate_rejects_an_evolved_file_before_anything_runs(tmp_path, drop_trace, monkeypatch):
    monkeypatch.undo()  # the real gate
    marker = tmp_path / "opened.txt"
    bad = MALFORMED.replace("    return [", f"    open({str(marker)!r}, 'w')\n    return [")
    lib = PatternLibrary.from_detectors([TOUCHING])
    lib.add(bad.replace("malformed", "opener"), provenance="hand-written")  # the user vouches: loads
    lib.save(tmp_path / "lib")
    manifest = json.loads((tmp_path / "lib" / "library.json").read_text())
    manifest["patterns"][1]["provenance"] = "evolved"
    (tmp_path / "lib" / "library.json").write_text(json.dumps(manifest))
    loaded = PatternLibrary.load(tmp_path / "lib")  # loading does the contract's static checks only
    assert loaded.untrusted_labels() == ["opener"]
    with pytest.raises(LibraryError) as err:
        annotate_many([drop_trace], loaded)  # the gate, before any detector runs
    msg = str(err.value)
    line = bad.splitlines().index(f"    open({str(marker)!r}, 'w')") + 1
    assert f"{tmp_path / 'lib' / 'opener.py'}:{line}:" in msg
    assert "AST gate" in msg and "forbidden_name" in msg and "open" in msg and "'opener'" in msg
    added = PatternLibrary.from_detectors([TOUCHING])
    added.add(bad.replace("malformed", "opener"), provenance="evolved")
    with pytest.raises(LibraryError, match="AST gate"):
        annotate(drop_trace, added)
    assert not marker.exists()


def test_code_from_the_evolver_is_untrusted_whatever_its_provenance(good_dir):
    """Discovery marks what it accepted with an "evolve" record, self-discovered labels too."""
    manifest = json.loads((good_dir / "library.json").read_text())
    for rec in manifest["patterns"]:
        if rec["label"] == "fast start":
            rec["provenance"] = "self-discovered"
            rec["evolve"] = {"model": "some-llm", "origin": "self-discovered"}
    (good_dir / "library.json").write_text(json.dumps(manifest))
    lib = PatternLibrary.load(good_dir)
    assert lib.entry("fast start").provenance == "self-discovered"
    assert not lib.is_trusted("fast start")


# --------------------------------------------------------------- annotation
def test_phases_alternate_and_respect_dependencies(hostile_dir):
    lib = PatternLibrary.load(hostile_dir)
    assert plan_phases(lib) == [
        (True, ["touching", "moving"]),
        (False, ["fast start", "touch pairs", "env probe", "writer", "loop forever", "malformed"]),
        (True, ["late fast start", "after loop"]),
        (False, ["after malformed"]),
    ]


def test_hostile_detectors_are_contained_and_the_rest_is_intact(hostile_dir, good_dir, tmp_path,
                                                                drop_traces, monkeypatch):
    monkeypatch.setenv("SIMPATTERNS_TEST_SECRET", SECRET)
    lib = PatternLibrary.load(hostile_dir)
    anns = annotate_many(drop_traces, lib, sandbox=FAST)
    trusted_only = annotate_many(drop_traces, PatternLibrary.from_detectors([TOUCHING, MOVING]))
    reference = annotate_many(drop_traces, PatternLibrary.load(good_dir, trust_evolved=True))
    for ann, mine, ref in zip(anns, trusted_only, reference):
        assert ann.patterns == lib.order()
        errors = ann.errors
        assert set(errors) == {"writer", "loop forever", "malformed", "after loop", "after malformed"}, errors
        assert "timeout" in errors["loop forever"]
        assert "invalid_events" in errors["malformed"]
        assert "exception" in errors["writer"]
        assert "skipped because its dependency 'loop forever' failed" in errors["after loop"]
        assert "skipped because its dependency 'malformed' failed" in errors["after malformed"]
        # the environment the sandbox gave the detector holds nothing of ours
        (probe,) = events_of(ann, "env probe")
        assert "environ(" in probe[1]["env"] and SECRET not in probe[1]["env"]
        # every other pattern's events are intact: trusted ones as without the hostile code,
        # evolved ones exactly as the same code produces when trusted
        for label in ("touching", "moving"):
            assert events_of(ann, label) == events_of(mine, label)
        for label in GOOD:
            assert events_of(ann, label) == events_of(ref, label)
        assert events_of(ann, "fast start") and events_of(ann, "touch pairs")
        assert set(ann.timings) == set(lib.order()) and all(t >= 0 for t in ann.timings.values())
        assert ann.timings["after loop"] == 0.0 and ann.timings["loop forever"] > 0.1
    assert not (tmp_path / "loaded.npy").exists()
    if os.geteuid() == 0:  # chroot into an empty directory as "nobody": nothing outside to write to
        assert not (tmp_path / "ran.npy").exists()


def test_env_probe_sees_the_secret_when_trusted(tmp_path, drop_trace, monkeypatch):
    """The probe is real: in-process it reads the environment the sandbox withholds."""
    monkeypatch.setenv("SIMPATTERNS_TEST_SECRET", SECRET)
    lib = PatternLibrary.from_detectors([ENV_PROBE], provenance="evolved")
    assert lib.untrusted_labels() == ["env probe"]
    inside = events_of(annotate(drop_trace, lib), "env probe")[0][1]["env"]
    lib.save(tmp_path / "lib")
    trusted = PatternLibrary.load(tmp_path / "lib", trust_evolved=True)
    outside = events_of(annotate(drop_trace, trusted), "env probe")[0][1]["env"]
    assert SECRET in outside and SECRET not in inside


def test_one_bad_trace_costs_only_its_own_events(drop_traces):
    lib = PatternLibrary.from_detectors([PICKY], provenance="evolved")
    anns = annotate_many(drop_traces, lib, sandbox=FAST)
    # ball x in (90, 100, 110, 160): the last one raises
    for ann in anns[:3]:
        assert not ann.errors and [e.frame for e in ann.events] == [1]
    assert anns[3].events == [] and "ValueError: ball too far right" in anns[3].errors["picky"]
    assert "exception" in anns[3].errors["picky"] and "#3" in anns[3].errors["picky"]


def test_single_trace_pool_and_serial_agree(good_dir, drop_traces):
    lib = PatternLibrary.load(good_dir)
    serial = annotate_many(drop_traces, lib)
    pooled = annotate_many(drop_traces, lib, workers=2)
    single = [annotate(t, lib, trace_id=f"#{i}") for i, t in enumerate(drop_traces)]
    small_batches = annotate_many(drop_traces, lib, sandbox=SandboxPolicy(batch_traces=3))
    for a, b, c, d in zip(serial, pooled, single, small_batches):
        assert not a.errors
        assert a.events == b.events == c.events == d.events
        assert a.patterns == b.patterns == c.patterns == d.patterns == lib.order()
    # the process-wide sandbox stops on request (and at exit), leaving no process behind
    started = _SHARED.sandbox.pids_seen
    close_shared_sandbox()
    assert _SHARED.sandbox is None and started
    for pid in started:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] if Path(f"/proc/{pid}").exists() else "X"
        assert status in ("Z", "X"), f"sandbox process {pid} still running"


# ---------------------------------------------------------------------- CLI
def test_cli_annotate_with_an_evolved_library(tmp_path, good_dir, drop_traces, monkeypatch):
    from simpatterns.cli import app

    data = tmp_path / "traces"
    data.mkdir()
    for i, t in enumerate(drop_traces[:2]):
        t.save(data / f"t{i}.npz")
    runner = CliRunner()
    res = runner.invoke(app, ["annotate", str(data), "--library", str(good_dir), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "2 untrusted (LLM-written) pattern(s) run in the sandbox: fast start, touch pairs" in out
    res2 = runner.invoke(app, ["annotate", str(data), "--library", str(good_dir), "--out", str(tmp_path / "out2"),
                               "--trust-evolved"])
    assert res2.exit_code == 0, res2.output
    assert "untrusted" not in res2.output
    for i in range(2):
        ann = Annotation.load(tmp_path / "out" / f"t{i}.annotation.jsonl")
        again = Annotation.load(tmp_path / "out2" / f"t{i}.annotation.jsonl")
        assert ann.patterns == PatternLibrary.load(good_dir).order()
        assert events_of(ann, "fast start") and events_of(ann, "late fast start")
        assert ann.events == again.events
    # an unreadable trace is reported, the others still annotated, exit code 1
    (data / "broken.npz").write_bytes(b"junk")
    res3 = runner.invoke(app, ["annotate", str(data), "--library", str(good_dir), "--out", str(tmp_path / "out3")])
    assert res3.exit_code == 1 and "broken.npz" in " ".join(res3.output.split())
    assert Annotation.load(tmp_path / "out3" / "t1.annotation.jsonl").events == again.events
    # a library whose evolved entry the gate rejects: a clear error, exit code 2
    monkeypatch.undo()  # the real gate
    bad = tmp_path / "bad"
    lib = PatternLibrary.load(good_dir)
    lib.save(bad)
    (bad / lib.entry("fast start").file).write_text(FAST_START.replace("    out = []", "    out = []\n    eval('1')"))
    manifest = json.loads((bad / "library.json").read_text())
    for rec in manifest["patterns"]:
        rec["source_hash"] = ""
    (bad / "library.json").write_text(json.dumps(manifest))
    res4 = runner.invoke(app, ["annotate", str(data / "t0.npz"), "--library", str(bad)])
    assert res4.exit_code == 2 and "AST gate" in " ".join(res4.output.split())
