"""Purpose-built PHYRE scenes whose outcome is known by construction, annotated once per session
with the built-in library, for the tests of the built-in detectors (tests/detectors/test_builtin_*.py).

Tests derive their expectations from the scene's construction (initial positions and velocities
in frame 0 of the trace) and PHYRE's physical constants (simulators/phyre/physics.py: 60 Hz,
gravity 58.8 px/s^2, friction 0.5, restitution 0.2), never from the detectors' own output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from simpatterns.annotation import Annotation
from simpatterns.annotate.annotator import annotate
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import SceneBuilder, simulate
from simpatterns.trace import Trace

@dataclass
class Run:
    """A simulated purpose-built scene and the built-in library's annotation of it."""

    trace: Trace
    annotation: Annotation

    def events(self, label: str, **params: Any) -> list[tuple[int, dict[str, Any]]]:
        """(frame, params) of ``label``'s events whose params include all of ``params``."""
        return [
            (e.frame, e.params)
            for e in self.annotation.by_pattern(label)
            if all(e.params.get(k) == v for k, v in params.items())
        ]

    def frames(self, label: str, **params: Any) -> list[int]:
        return [f for f, _ in self.events(label, **params)]

    def contact_starts(self, a: str, b: str) -> list[int]:
        """First frames of each touching run of bodies a and b, from the trace's contact rows."""
        return [s for s, _ in self.trace.contact_intervals(a, b)]


def paint(spec, color: str, velocity=None, spin=None):
    spec.color = color
    if velocity is not None:
        spec.velocity = velocity
    if spin is not None:
        spec.angular_velocity = spin
    return spec


def rolling(spec, color: str, vx: float):
    """Start a ball rolling without slip along +x at vx px/s (spin = -vx / radius)."""
    return paint(spec, color, (vx, 0.0), -vx / spec.size["radius"])


# ------------------------------------------------------------------ scenes
def drop(B: SceneBuilder) -> None:
    """A ball dropped from 150 px onto the ground; a second ball rests on the ground far away."""
    paint(B.add("ball", scale=0.1, center_x=140, bottom=150), "green")
    paint(B.add("ball", scale=0.1, center_x=40, bottom=0), "gray")


def low_drop(B: SceneBuilder) -> None:
    paint(B.add("ball", scale=0.1, center_x=140, bottom=20), "green")


def ramp_roll(B: SceneBuilder) -> None:
    """A ball placed touching a 20 degree ramp, at rest: it rolls down (no slip: tan 20 / 3 < 0.5)."""
    ramp = B.add("bar", scale=0.6, angle=-20, left=20, bottom=60, dynamic=False, label="ramp")
    ball = paint(B.add("ball", scale=0.08, center_x=0, bottom=0), "green")
    r, a = ball.size["radius"], math.radians(-20)
    # a point on the ramp's top face near its upper end, then one radius out along the face normal
    cx, cy = ramp.x - math.cos(a) * 55, ramp.y - math.sin(a) * 55
    half_t = ramp.size["thickness"] / 2
    nx, ny = -math.sin(a), math.cos(a)
    ball.set_center(cx + nx * (half_t + r), cy + ny * (half_t + r))


def slide_ball(B: SceneBuilder) -> None:
    """A ball thrown along the ground without spin: it slides, then catches and rolls."""
    paint(B.add("ball", scale=0.1, center_x=30, bottom=0), "green", (100.0, 0.0), 0.0)


def slide_box(B: SceneBuilder) -> None:
    """A box pushed along the ground: friction stops it after v^2 / (2 mu g) px; it never rolls."""
    paint(B.add("box", scale=0.1, center_x=40, bottom=0), "gray", (80.0, 0.0))


def lever(B: SceneBuilder) -> None:
    """A seesaw on a fixed fulcrum, a small ball on its left end, a heavy box dropped on its right end."""
    paint(B.add_box(10, 20, dynamic=False, label="fulcrum", center_x=128, bottom=0), "black")
    bar = paint(B.add("bar", scale=0.6, center_x=128, bottom=20), "gray")
    paint(B.add("ball", scale=0.05, center_x=bar.left + 8, bottom=bar.top), "green")
    paint(B.add("box", scale=0.12, center_x=bar.right - 16, bottom=150), "blue")


def flat_lever(B: SceneBuilder) -> None:
    """The same bodies with the bar lying on the ground: no fulcrum, no launch."""
    bar = paint(B.add("bar", scale=0.6, center_x=128, bottom=0), "gray")
    paint(B.add("ball", scale=0.05, center_x=bar.left + 8, bottom=bar.top), "green")
    paint(B.add("box", scale=0.12, center_x=bar.right - 16, bottom=150), "blue")


def stack(B: SceneBuilder) -> None:
    """A box set 1 px above a box on the ground (the goal pair), and a ball on the ground."""
    bottom = B.add("box", scale=0.1, center_x=180, bottom=0)
    top = B.add("box", scale=0.1, center_x=180, bottom=bottom.top + 1)
    B.add("ball", scale=0.1, center_x=60, bottom=0)
    B.set_goal(top, bottom)


def roll_off(B: SceneBuilder) -> None:
    """A ball rolling along a fixed platform at 40 px/s rolls off its right end."""
    platform = paint(B.add("bar", scale=0.4, dynamic=False, label="platform", left=20, bottom=80), "black")
    rolling(B.add("ball", scale=0.1, center_x=40, bottom=platform.top), "green", 40.0)


def tall_box_hit(B: SceneBuilder) -> None:
    """A thin upright box hit near its top by a ball: it topples."""
    paint(B.add_box(8, 60, center_x=150, bottom=0), "gray")
    paint(B.add("ball", scale=0.06, center_x=125, bottom=45), "green", (60.0, 0.0))


def low_box_hit(B: SceneBuilder) -> None:
    """A low wide box hit by the same kind of ball: it slides a little, it does not topple."""
    paint(B.add_box(40, 20, center_x=150, bottom=0), "gray")
    paint(B.add("ball", scale=0.06, center_x=110, bottom=8), "green", (60.0, 0.0))


FLY_Y, FLY_SPEED, FLY_X0, FLY_X1 = 150.0, 150.0, 40.0, 216.0


def flyby(B: SceneBuilder, gap: float) -> None:
    """Two balls thrown towards each other at the same height, vertical offset set so their surfaces
    pass ``gap`` px apart (negative: they overlap vertically and collide). Both fall alike, so the
    offset holds; they are level in x after (x1 - x0) / (2 v) s."""
    a = paint(B.add("ball", scale=0.1, center_x=FLY_X0, center_y=FLY_Y), "green", (FLY_SPEED, 0.0))
    paint(B.add("ball", scale=0.1, center_x=FLY_X1, center_y=FLY_Y - 2 * a.size["radius"] - gap), "blue",
          (-FLY_SPEED, 0.0))


def fall_past_box(B: SceneBuilder) -> None:
    """A ball dropped so that it falls 3 px beside a small box resting on a platform (exact polygon
    distances, not bounding circles, decide this near miss)."""
    platform = paint(B.add("bar", scale=0.3, dynamic=False, label="platform", left=60, bottom=100), "black")
    box = paint(B.add_box(10, 10, right=platform.right, bottom=platform.top), "gray")
    paint(B.add("ball", scale=0.1, left=box.right + 3, bottom=250 - 25), "green")


def drop_past(B: SceneBuilder) -> None:
    """A ball resting on a platform; another dropped beside it falls past its height."""
    platform = paint(B.add("bar", scale=0.3, dynamic=False, label="platform", left=20, bottom=100), "black")
    paint(B.add("ball", scale=0.1, center_x=60, bottom=platform.top), "blue")
    paint(B.add("ball", scale=0.1, center_x=180, bottom=200), "green")


def wedge(B: SceneBuilder) -> None:
    """A 25 px ball dropped into a 24 px gap between two fixed boxes: it jams."""
    paint(B.add_box(40, 30, dynamic=False, right=116, bottom=0), "black")
    paint(B.add_box(40, 30, dynamic=False, left=140, bottom=0), "black")
    paint(B.add("ball", scale=0.1, center_x=128, bottom=80), "green")


def corner(B: SceneBuilder) -> None:
    """A ball resting in the bottom-left corner, touching the ground and the left wall."""
    paint(B.add("ball", scale=0.1, left=0, bottom=0), "green")


def push(B: SceneBuilder) -> None:
    """A heavy rolling ball hits a small box and keeps pushing it along the ground."""
    rolling(B.add("ball", scale=0.2, center_x=40, bottom=0), "red", 60.0)
    paint(B.add_box(20, 20, center_x=100, bottom=0), "gray")


def relay(B: SceneBuilder) -> None:
    """A rolling ball hits a resting ball, which rolls on into a third."""
    rolling(B.add("ball", scale=0.1, center_x=30, bottom=0), "red", 100.0)
    paint(B.add("ball", scale=0.1, center_x=100, bottom=0), "gray")
    paint(B.add("ball", scale=0.1, center_x=150, bottom=0), "green")


def no_relay(B: SceneBuilder) -> None:
    """A sliding (unspun) ball hits a resting ball; the third ball is 150 px further: reached only
    after several seconds, long after the first hit."""
    paint(B.add("ball", scale=0.1, center_x=30, bottom=0), "red", (100.0, 0.0), 0.0)
    paint(B.add("ball", scale=0.1, center_x=80, bottom=0), "gray")
    paint(B.add("ball", scale=0.1, center_x=230, bottom=0), "green")


def stack_hit(B: SceneBuilder) -> None:
    """A small ball rolls into the bottom box of a two-box stack; a third box stands far away."""
    rolling(B.add("ball", scale=0.05, center_x=30, bottom=0), "red", 100.0)
    bottom = paint(B.add("box", scale=0.1, center_x=150, bottom=0), "gray")
    paint(B.add("box", scale=0.1, center_x=150, bottom=bottom.top), "blue")
    paint(B.add("box", scale=0.1, center_x=230, bottom=0), "green")


def head_on(B: SceneBuilder, scale_a: float, scale_b: float) -> None:
    """Ball a thrown at a resting ball b at the same height in free flight (both fall alike)."""
    paint(B.add("ball", scale=scale_a, center_x=50, center_y=150), "red", (100.0, 0.0))
    paint(B.add("ball", scale=scale_b, center_x=130, center_y=150), "gray")


def empty(B: SceneBuilder) -> None:
    """Only the four walls."""


SCENES: dict[str, tuple[Callable[[SceneBuilder], None], int]] = {
    "drop": (drop, 300),
    "low_drop": (low_drop, 120),
    "ramp_roll": (ramp_roll, 300),
    "slide_ball": (slide_ball, 120),
    "slide_box": (slide_box, 240),
    "lever": (lever, 200),
    "flat_lever": (flat_lever, 200),
    "stack": (stack, 300),
    "roll_off": (roll_off, 200),
    "tall_box_hit": (tall_box_hit, 150),
    "low_box_hit": (low_box_hit, 150),
    "flyby": (lambda B: flyby(B, 3.0), 60),
    "flyby_hit": (lambda B: flyby(B, -3.0), 60),
    "drop_past": (drop_past, 120),
    "fall_past_box": (fall_past_box, 160),
    "wedge": (wedge, 180),
    "corner": (corner, 60),
    "push": (push, 200),
    "relay": (relay, 120),
    "no_relay": (no_relay, 150),
    "stack_hit": (stack_hit, 150),
    "head_on_big": (lambda B: head_on(B, 0.2, 0.1), 40),
    "head_on_equal": (lambda B: head_on(B, 0.1, 0.1), 40),
    "empty": (empty, 30),
}


@pytest.fixture(scope="session")
def builtin_library() -> PatternLibrary:
    return PatternLibrary.builtin()


@pytest.fixture(scope="session")
def scene(builtin_library) -> Callable[[str], Run]:
    """``scene(name)``: the named purpose-built scene, simulated and annotated once per session."""
    cache: dict[str, Run] = {}

    def get(name: str) -> Run:
        if name not in cache:
            build, steps = SCENES[name]
            B = SceneBuilder()
            build(B)
            sc = B.build(require_goal=name == "stack")
            trace = simulate(sc, None, max_steps=steps, stop_on_success=False).trace
            ann = annotate(trace, builtin_library)
            assert not ann.errors, ann.errors
            cache[name] = Run(trace, ann)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def scene_names() -> list[str]:
    return list(SCENES)
