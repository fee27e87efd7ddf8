"""Fixtures: small purpose-built PHYRE traces and tiny hand-written detector libraries."""

from __future__ import annotations

import pytest

from simpatterns.detectors.contract import load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import SceneBuilder, simulate

TOUCHING = '''
PATTERN = "touching"
DESCRIPTION = "Two bodies are in contact at this frame."
DEPENDS = []
PARAMS = ["object_a", "object_b"]


def detect(trace, events):
    names = trace.names
    return [
        (int(f), {"object_a": names[a], "object_b": names[b]})
        for f, a, b in zip(trace.contact_frame, trace.contact_a, trace.contact_b)
    ]
'''

FIRST_TOUCH = '''
PATTERN = "first touch"
DESCRIPTION = "The first frame at which a pair of bodies touches."
DEPENDS = ["touching"]
PARAMS = ["object_a", "object_b"]


def detect(trace, events):
    assert set(events) == {"touching"}, sorted(events)
    seen, out = set(), []
    for frame, p in events["touching"]:
        key = (p["object_a"], p["object_b"])
        if key not in seen:
            seen.add(key)
            out.append((frame, dict(p)))
    return out
'''

MOVING = '''
import numpy as np

PATTERN = "moving"
DESCRIPTION = "A dynamic body moves faster than 20 px/s."
DEPENDS = []
PARAMS = ["object", "speed"]


def detect(trace, events):
    speed = np.linalg.norm(trace.velocity, axis=-1)
    out = []
    for i in np.nonzero(trace.dynamic_mask)[0]:
        for f in np.nonzero(speed[:, i] > 20.0)[0]:
            out.append((int(f), {"object": trace.names[i], "speed": float(speed[f, i])}))
    return out
'''

RAISES = '''
PATTERN = "broken"
DESCRIPTION = "Always fails."
DEPENDS = ["touching"]
PARAMS = []


def detect(trace, events):
    x = len(events["touching"])
    return x / 0
'''

AFTER_BROKEN = '''
PATTERN = "after broken"
DESCRIPTION = "Reads a failing pattern."
DEPENDS = ["broken"]
PARAMS = []


def detect(trace, events):
    return [(0, {})]
'''

OUT_OF_RANGE = '''
PATTERN = "late"
DESCRIPTION = "Emits a frame past the end."
DEPENDS = []
PARAMS = []


def detect(trace, events):
    return [(trace.num_frames + 5, {})]
'''

MUTATES = '''
PATTERN = "vandal"
DESCRIPTION = "Tries to overwrite the trace."
DEPENDS = []
PARAMS = []


def detect(trace, events):
    trace.position[:] = 0.0
    return []
'''


@pytest.fixture(scope="session")
def sources() -> dict[str, str]:
    return {
        "touching": TOUCHING, "first touch": FIRST_TOUCH, "moving": MOVING, "broken": RAISES,
        "after broken": AFTER_BROKEN, "late": OUT_OF_RANGE, "vandal": MUTATES,
    }


@pytest.fixture()
def small_library() -> PatternLibrary:
    return PatternLibrary.from_detectors([load_detector(s) for s in (TOUCHING, FIRST_TOUCH, MOVING)])


def drop_scene(x: float = 100.0, height: float = 120.0, radius: float = 10.0, box_x: float = 100.0):
    """A red ball dropped onto a static black box and the ground."""
    b = SceneBuilder()
    ball = b.add_ball(radius, center_x=x, bottom=height)
    ball.color = "red"
    box = b.add_box(40, 30, dynamic=False, center_x=box_x, bottom=0)
    box.color = "black"
    return b.build(require_goal=False)


@pytest.fixture(scope="session")
def drop_trace():
    return simulate(drop_scene(), None, max_steps=240).trace


@pytest.fixture(scope="session")
def drop_traces():
    """Four short rollouts of the same scene with the ball at different x."""
    return [simulate(drop_scene(x=x), None, max_steps=150).trace for x in (90.0, 100.0, 110.0, 160.0)]
