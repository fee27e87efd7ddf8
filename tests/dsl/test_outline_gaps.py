"""`simpatterns.dsl.geometry.Outlines.gap` (TOUCHING's and DISTANCE's measure) against a brute
force: both outlines sampled every 0.25 px, the nearest pair of samples. Bodies are circles, boxes
and a three-part jar at random angles, apart by a random margin beyond their bounding circles (so
they never overlap), over a few frames of one trace."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from simpatterns.dsl.geometry import Outlines
from simpatterns.trace import Body, Trace

STEP = 0.25


def box(w: float, h: float, cx: float = 0.0, cy: float = 0.0) -> dict:
    return {"kind": "poly", "vertices": [[cx - w, cy - h], [cx + w, cy - h], [cx + w, cy + h], [cx - w, cy + h]]}


SHAPES = {
    "ball": ({"kind": "circle", "center": [0.0, 0.0], "radius": 6.0},),
    "bar": (box(40.0, 2.5),),
    "stick": (box(2.0, 25.0),),
    "jar": (box(12.0, 1.5, 0, -12.0), box(1.5, 12.0, -12.0, 0), box(1.5, 12.0, 12.0, 0)),
}


def samples(parts) -> np.ndarray:
    pts = []
    for p in parts:
        if p["kind"] == "circle":
            n = int(2 * math.pi * p["radius"] / STEP)
            a = np.linspace(0, 2 * math.pi, n, endpoint=False)
            cx, cy, r = p["center"][0], p["center"][1], p["radius"]
            pts.append(np.stack([cx + r * np.cos(a), cy + r * np.sin(a)], 1))
        else:
            v = np.asarray(p["vertices"], float)
            for q0, q1 in zip(v, np.roll(v, -1, 0)):
                n = int(np.linalg.norm(q1 - q0) / STEP) + 2
                pts.append(q0 + np.linspace(0, 1, n)[:, None] * (q1 - q0))
    return np.concatenate(pts)


def reach(parts) -> float:
    return float(np.linalg.norm(samples(parts), axis=1).max())


def placed(pts: np.ndarray, pos, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.asarray(pos) + pts @ np.array([[c, s], [-s, c]])


poses = st.tuples(st.floats(0, 2 * math.pi), st.floats(0, 2 * math.pi), st.floats(0, 2 * math.pi),
                  st.floats(0.5, 30.0))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(SHAPES)), st.sampled_from(sorted(SHAPES)), st.lists(poses, min_size=1, max_size=4))
def test_gap_is_the_distance_between_outlines(a, b, frames):
    pa, pb = SHAPES[a], SHAPES[b]
    T = len(frames)
    pos = np.zeros((T, 2, 2))
    ang = np.zeros((T, 2))
    for f, (ta, tb, direction, margin) in enumerate(frames):
        d = reach(pa) + reach(pb) + margin  # bounding circles apart: no overlap
        pos[f, 1] = (d * math.cos(direction), d * math.sin(direction))
        ang[f] = (ta, tb)
    bodies = [Body("a", "green", a, True, parts=pa), Body("b", "blue", b, True, parts=pb)]
    tr = Trace(bodies=bodies, time=np.arange(T) / 60.0, position=pos, angle=ang, velocity=np.zeros((T, 2, 2)),
               angular_velocity=np.zeros((T, 2)), contact_frame=np.zeros(0, np.int32),
               contact_a=np.zeros(0, np.int16), contact_b=np.zeros(0, np.int16), contact_point=np.zeros((0, 2)),
               contact_normal=np.zeros((0, 2)), contact_impulse=np.zeros(0), meta={"dt": 1 / 60})
    gaps = Outlines(tr).gap(0, 1, np.arange(T))
    assert np.allclose(gaps, Outlines(tr).gap(1, 0, np.arange(T)), rtol=0, atol=1e-9)  # symmetric
    sa, sb = samples(pa), samples(pb)
    for f in range(T):
        brute = cKDTree(placed(sb, pos[f, 1], ang[f, 1])).query(placed(sa, pos[f, 0], ang[f, 0]))[0].min()
        assert gaps[f] <= brute + 1e-9 and brute - gaps[f] < STEP, (f, gaps[f], brute)
