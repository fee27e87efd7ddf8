"""The patterns reward goals read in people's words: "touch start"/"touch end" (contacts with the
solver's flicker merged) and "comes to rest", on hand-written contacts and purpose-built scenes whose
outcome is known by construction."""

from __future__ import annotations

import ast

import numpy as np

from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre.physics import DT, FRICTION, GRAVITY
from simpatterns.trace import Body, Trace

from test_builtin_contacts import first_impact_frame

G = -GRAVITY


def contact_trace(rows: list[tuple[int, str, str]], num_frames: int = 40) -> Trace:
    """A still trace of three balls whose contacts are the given (frame, a, b) rows."""
    names = ["ground", "green ball", "blue ball"]
    rows = sorted((f, *sorted((names.index(a), names.index(b)))) for f, a, b in rows)
    k = len(rows)
    bodies = [Body(n, n.split()[0], "ball", n != "ground",
                   parts=({"kind": "circle", "center": [0.0, 0.0], "radius": 5.0},)) for n in names]
    T, N = num_frames, len(names)
    return Trace(bodies=bodies, time=np.arange(T) * DT, position=np.zeros((T, N, 2)), angle=np.zeros((T, N)),
                 velocity=np.zeros((T, N, 2)), angular_velocity=np.zeros((T, N)),
                 contact_frame=np.array([r[0] for r in rows], dtype=np.int32),
                 contact_a=np.array([r[1] for r in rows], dtype=np.int16),
                 contact_b=np.array([r[2] for r in rows], dtype=np.int16),
                 contact_point=np.zeros((k, 2)), contact_normal=np.tile([0.0, 1.0], (k, 1)),
                 contact_impulse=np.zeros(k), meta={"dt": DT})


def run_detector(label: str, trace: Trace):
    return PatternLibrary.builtin().get(label).detect(trace, {})


def frames_of(events, a: str, b: str) -> list[int]:
    return [f for f, p in events if {p["object_a"], p["object_b"]} == {a, b}]


# ------------------------------------------------------------------ touches
def test_gaps_of_two_frames_or_less_are_one_touch():
    G_, B_ = "green ball", "blue ball"
    touching = [*range(0, 5), *range(6, 10), *range(12, 15), *range(18, 20), *range(30, 33), *range(35, 40)]
    # frames apart: 5 (1 frame), 10-11 (2), 15-17 (3: a separation), 20-29 (10), 33-34 (2)
    trace = contact_trace([(f, G_, B_) for f in touching])
    assert frames_of(run_detector("touch start", trace), G_, B_) == [0, 18, 30]
    # a touch ends at the first frame apart once the bodies stay apart for more than 2 frames
    assert frames_of(run_detector("touch end", trace), G_, B_) == [15, 20]


def test_a_touch_broken_off_at_the_end_of_the_trace_has_no_end():
    trace = contact_trace([(f, "green ball", "ground") for f in range(0, 38)], num_frames=40)
    assert run_detector("touch end", trace) == []  # apart for frames 38-39 only: not yet a separation
    trace = contact_trace([(f, "green ball", "ground") for f in range(0, 37)], num_frames=40)
    assert frames_of(run_detector("touch end", trace), "green ball", "ground") == [37]


def test_dropped_ball_touches_the_ground_once_per_visible_bounce(scene):
    run = scene("drop")
    starts = run.frames("touch start", object_a="ground", object_b="green ball")
    raw = run.frames("collision start", object_a="ground", object_b="green ball")
    assert abs(starts[0] - first_impact_frame(run, "green ball")) <= 2 and starts[0] == raw[0]
    assert set(starts) <= set(raw) and len(starts) < len(raw)  # a flicker after the last landing is merged
    touching = run.trace.pair_touching("ground", "green ball")
    for f in starts[1:]:  # every new touch follows more than 2 frames apart ...
        assert not touching[f - 3:f].any()
    for f in set(raw) - set(starts):  # ... and every merged contact start follows at most 2
        assert touching[f - 3:f].any()
    ends = run.frames("touch end", object_a="ground", object_b="green ball")
    assert len(ends) == len(starts) - 1 and all(s < e < n for s, e, n in zip(starts, ends, starts[1:]))
    # the last touch lasts: the ball comes to rest on the ground there
    (rest, params), = run.events("comes to rest", object="green ball")
    assert starts[-1] <= rest <= starts[-1] + 3 and params["surface"] == "ground"


def test_touches_are_initial_contacts_too(scene):
    run = scene("corner")
    assert sorted(p["object_a"] for _, p in run.events("touch start")) == ["ground", "left wall"]
    assert run.frames("touch start") == [0, 0] and run.events("touch end") == []


# ------------------------------------------------------------------ rest
def test_a_box_pushed_along_the_ground_comes_to_rest_when_friction_stops_it(scene):
    run = scene("slide_box")
    (frame, params), = run.events("comes to rest")
    v0 = run.trace.velocity[0, run.trace.body_index("gray box"), 0]
    assert abs(frame - v0 / (FRICTION * G) / DT) <= 3  # v / (mu g) seconds of sliding
    assert params == {"object": "gray box", "surface": "ground", "frames": run.trace.num_frames - frame}


def test_the_top_of_a_bounce_is_not_rest_and_resting_bodies_rest_from_frame_zero(scene):
    run = scene("drop")
    assert run.events("comes to rest", object="gray ball") == [
        (0, {"object": "gray ball", "surface": "ground", "frames": run.trace.num_frames})]
    (rest, _), = run.events("comes to rest", object="green ball")
    bounces = run.frames("bounce", object="green ball")
    assert len(bounces) >= 2 and rest > bounces[-1]  # the apex of each flight is still not rest
    i = run.trace.body_index("green ball")
    speed = np.hypot(*run.trace.velocity[:, i].T)
    assert speed[rest:].max() < 1.0 and speed[rest - 1] >= 1.0


def test_the_surface_is_what_pushes_the_body_up(scene):
    assert scene("corner").events("comes to rest")[0][1]["surface"] == "ground"  # not the left wall
    stack = scene("stack")
    assert stack.events("comes to rest", object="green box")[0][1]["surface"] == "blue box"
    assert stack.events("comes to rest", object="blue box")[0][1]["surface"] == "ground"


def constants(label: str) -> dict:
    """A built-in detector's numeric module constants, as written."""
    tree = ast.parse(PatternLibrary.builtin().get(label).source)
    return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, (int, float))}


def test_rest_thresholds_are_global_rests_and_touches_share_their_gap():
    rest = {k: constants("comes to rest")[k] for k in ("REST_SPEED", "REST_SPIN", "MIN_SECONDS")}
    assert rest == {k: constants("global rest")[k] for k in rest}
    assert constants("touch start")["MERGE_GAP"] == constants("touch end")["MERGE_GAP"] == 2
