"""The built-in 3D library on purpose-built scenes whose events are known."""

import ast
import copy
import importlib.util
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mujoco_paths import ROOT

from simpatterns.annotate import annotate
from simpatterns.annotate.annotator import run_detector
from simpatterns.annotate.phases import guarded_view
from simpatterns.detectors.builtin3d import BUILTIN_DIR, MANIFEST_PATH
from simpatterns.detectors.contract import load_detector
from simpatterns.detectors.library import PatternLibrary, resolve_library
from simpatterns.simulators.mujoco import simulate
from simpatterns.trace import Body, Trace, empty_contacts

LIB = PatternLibrary.builtin("3d")

DROP = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="ball" pos="0 0 0.5"><freejoint/>
      <geom type="sphere" size="0.05" mass="0.2" solref="0.01 0.05"/></body>
  </worldbody>
</mujoco>"""

STACK = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="lower box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body name="upper box" pos="0 0 0.25"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  </worldbody>
</mujoco>"""


def events(trace, label):
    return [(e.frame, e.params) for e in annotate(trace, LIB).events if e.pattern == label]


def test_library_loads_and_is_not_the_default():
    assert LIB.labels[:2] == ["contact start", "contact end"] and len(LIB) == 10
    assert "crossing formed" in LIB and "crossing formed" not in PatternLibrary.builtin()
    assert resolve_library("builtin:3d").labels == LIB.labels
    with pytest.raises(Exception, match="no built-in library 'mars'"):
        PatternLibrary.builtin("mars")


def test_dropped_ball_is_airborne_then_bounces_then_rests_on_the_floor():
    tr = simulate(DROP, 2500, stride=5)  # 5 s at 100 frames per second
    fall = math.sqrt(2 * 0.45 / 9.81)  # from 0.45 m above the floor (the ball's radius is 0.05)
    air = events(tr, "airborne")
    assert air[0][0] == 0 and air[0][1]["object"] == "ball"
    assert air[0][1]["frames"] * tr.dt == pytest.approx(fall, abs=0.02)
    bounce = events(tr, "bounce")
    assert bounce and bounce[0][1] == {"object": "ball", "surface": "floor"}
    assert bounce[0][0] * tr.dt == pytest.approx(fall, abs=0.02)
    assert events(tr, "contact start")[0] == (bounce[0][0], {"object_a": "floor", "object_b": "ball"})
    support = events(tr, "support")
    assert support[-1][1]["object_a"] == "ball" and support[-1][1]["object_b"] == "floor"
    assert support[-1][0] + support[-1][1]["frames"] == tr.num_frames  # until the end
    rest = events(tr, "at rest")
    assert rest and rest[-1][1]["object"] == "ball" and rest[-1][0] + rest[-1][1]["frames"] == tr.num_frames


def test_stack_supports_and_rests():
    tr = simulate(STACK, 1000, stride=5)
    support = {(p["object_a"], p["object_b"]) for _, p in events(tr, "support")}
    assert support == {("upper box", "lower box"), ("lower box", "floor")}
    assert {p["object"] for _, p in events(tr, "at rest")} == {"upper box", "lower box"}
    assert events(tr, "bounce") == [] and events(tr, "airborne") == []


def test_no_gravity_no_support_or_airborne():
    tr = simulate(DROP.replace('<option timestep="0.002"/>', '<option timestep="0.002" gravity="0 0 0"/>'),
                  300, stride=5)
    assert events(tr, "support") == [] and events(tr, "airborne") == []
    assert [p["object"] for _, p in events(tr, "at rest")] == ["ball"]


# ---------------------------------------------------------------- rope truth
N = 100
PHASE = 0.3  # beads sit off the crossing points, so the crossings lie inside segments


def circle() -> np.ndarray:
    t = 2 * np.pi * (np.arange(N) + PHASE) / N
    return np.stack([0.19 * np.cos(t), 0.19 * np.sin(t), 0 * t], 1)


def figure_eight() -> np.ndarray:
    """One crossing at the origin: beads 24.7 (over, z > 0) and 74.7 (under)."""
    t = 2 * np.pi * (np.arange(N) + PHASE) / N
    return np.stack([0.2 * np.cos(t), 0.1 * np.sin(2 * t), 0.02 * np.sin(t)], 1)


def limacon(b: float) -> np.ndarray:
    """One crossing; the inner loop holds a share 1 - arccos(-b) / pi of the beads (shrinking as b grows)."""
    t = 2 * np.pi * (np.arange(N) + PHASE) / N
    r = 0.12 * (b + np.cos(t))
    return np.stack([r * np.cos(t), r * np.sin(t), 0.03 * np.sin(t)], 1)


def rope_trace() -> Trace:
    frames = ([circle()] * 10 + [figure_eight()] * 10 + [circle()] * 10
              + [limacon(b) for b in np.linspace(0.2, 0.8, 20)] + [circle()] * 10)
    pos = np.stack(frames)
    T = pos.shape[0]
    vel = np.zeros_like(pos)
    vel[5:10, 40] = [0.5, 0.0, 0.0]  # bead 40 dragged for 0.05 s
    vel[5:10, :40] = [0.01, 0.0, 0.0]
    bodies = [Body(f"bead {i}", "orange", "bead", True, "rope bead", {"radius": 0.005},
                   ({"kind": "ball", "center": [0.0, 0.0, 0.0], "radius": 0.005},)) for i in range(N)]
    quat = np.zeros((T, N, 4))
    quat[..., 0] = 1.0
    return Trace(bodies=bodies, time=np.arange(T) * 0.01, position=pos, angle=np.zeros((T, N)), velocity=vel,
                 angular_velocity=np.zeros((T, N, 3)), quaternion=quat, events=[],
                 meta={"dt": 0.01, "stride": 1, "gravity": [0.0, 0.0, 0.0],
                       "ropes": [{"name": "bead", "bodies": list(range(N)), "closed": True}]},
                 **empty_contacts(3))


def test_rope_patterns_on_a_known_sequence():
    tr = rope_trace()
    formed = events(tr, "crossing formed")
    removed = events(tr, "crossing removed")
    # the limacon's crossing with b = 0.2 lies at angles +-acos(-0.2): beads 27.9 (over) and 71.5
    assert formed == [(10, {"object_a": "bead 25", "object_b": "bead 75", "crossings": 1}),
                      (30, {"object_a": "bead 28", "object_b": "bead 72", "crossings": 1})]
    # ... and with b = 0.8 at +-acos(-0.8): beads 39.5 (over) and 59.9
    assert removed == [(20, {"object_a": "bead 25", "object_b": "bead 75", "crossings": 0}),
                       (50, {"object_a": "bead 39", "object_b": "bead 60", "crossings": 0})]
    tight = events(tr, "loop tightened")
    assert len(tight) == 1
    f, p = tight[0]
    inner = lambda b: 2 * (N * (1 - math.acos(-b) / math.pi) / 2)  # beads in the inner loop  # noqa: E731
    assert f == 30 and p["frames"] >= 15 and p["beads"] == pytest.approx(inner(0.8), abs=2)
    assert events(tr, "bead dragged") == [(5, {"object": "bead 40", "frames": 5})]
    assert events(tr, "contact start") == [] and events(tr, "airborne") == []


def test_a_blip_shorter_than_the_hold_is_not_a_crossing():
    tr = rope_trace()
    tr.position[:30] = np.stack([circle()] * 30)
    tr.position[15:17] = figure_eight()  # a crossing for two frames (0.02 s) only
    assert [f for f, _ in events(tr, "crossing formed")] == [30]
    assert [f for f, _ in events(tr, "crossing removed")] == [50]


def test_untrusted_copies_give_the_same_events_in_the_sandbox(table_trace, rope_trace):
    evolved = PatternLibrary.from_detectors([LIB.get(label).source for label in LIB.labels], provenance="evolved")
    assert evolved.untrusted_labels() == LIB.labels
    for tr in (table_trace, rope_trace):
        a, b = annotate(tr, LIB), annotate(tr, evolved)
        assert not a.errors and not b.errors and a.events == b.events and a.events


def build_manifest_module():
    spec = importlib.util.spec_from_file_location("build_builtin_manifest", ROOT / "scripts" / "build_builtin_manifest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_manifest_is_up_to_date():
    mod = build_manifest_module()
    assert json.loads(MANIFEST_PATH.read_text()) == mod.build_manifest(BUILTIN_DIR, mod.ORDER_3D)


@pytest.mark.parametrize("path", sorted(p for p in BUILTIN_DIR.glob("*.py") if p.name != "__init__.py"),
                         ids=lambda p: p.stem)
def test_detector_files_declare_their_form(path: Path):
    source = path.read_text()
    det = load_detector(source, str(path))
    assert path.stem == det.pattern.replace(" ", "_") and det.description.endswith(".")
    consts = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(source).body
              if isinstance(n, ast.Assign) and n.targets[0].id in ("BODY_PARAMS", "DIRECTED", "DURATION")}
    assert set(consts) == {"BODY_PARAMS", "DIRECTED", "DURATION"}
    assert set(consts["BODY_PARAMS"]) <= set(det.params) and consts["BODY_PARAMS"]
    assert consts["DURATION"] in ("instant", "interval")
    assert (consts["DURATION"] == "interval") == ("frames" in det.params)
    assert isinstance(consts["DIRECTED"], bool)


REFERENCE = Path(__file__).parent.parent / "data" / "reference_detectors3d"


@pytest.fixture(scope="module")
def reference_cases(rope_dataset):
    """Rope traces where the rope patterns fire: the known sequence, its blip, the same still or with a tie, and
    short episodes of random pushes; each also with the rope's beads listed in reverse (not
    consecutive bodies)."""
    blip = rope_trace()
    blip.position[15:17] = figure_eight()
    still = rope_trace()
    still.velocity[:] = 0.0
    tie = rope_trace()  # a drag of 6 frames, 3 of bead 41 then 3 of bead 40
    tie.velocity[10, :41] = tie.velocity[9, :41]
    tie.velocity[5:8, 41] = [0.6, 0.0, 0.0]
    traces = [rope_trace(), blip, still, tie] + [Trace.load(p) for p in sorted(rope_dataset.glob("rope_*.npz"))]
    out = []
    for tr in traces:
        reverse = replace(tr, meta=copy.deepcopy(tr.meta))
        reverse.meta["ropes"][0]["bodies"] = reverse.meta["ropes"][0]["bodies"][::-1]
        out += [guarded_view(tr), guarded_view(reverse)]
    return out


@pytest.mark.parametrize("name", sorted(p.stem for p in REFERENCE.glob("*.py")))
def test_rewritten_rope_detectors_emit_the_reference_events(reference_cases, name):
    """The rope detectors rewritten for speed emit exactly the events of the versions they replaced
    (frozen in tests/data/reference_detectors3d/)."""
    ref = load_detector((REFERENCE / f"{name}.py").read_text(), f"{name}.py")
    det = LIB.get(ref.pattern)
    assert det.source != ref.source  # the library's version is the rewritten one
    fired = 0
    for tr in reference_cases:
        want = run_detector(ref, tr, {})
        assert json.dumps(run_detector(det, tr, {})) == json.dumps(want), tr.meta.get("seed")
        fired += bool(want)
    assert fired >= 4  # the comparison saw the pattern fire
