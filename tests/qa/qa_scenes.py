"""Purpose-built PHYRE scenes for the Q&A template tests, with their construction constants.

Expected answers in the tests follow from these constants and PHYRE's physics
(simulators/phyre/physics.py: 60 Hz, gravity 58.8 px/s^2, restitution 0.2,
rolling without slip on flat ground keeps its speed), never from the code
under test. Red is the agent's ball (placed by the action), green the first
goal body, blue the second.
"""

from __future__ import annotations

import math

from simpatterns.simulators.phyre import SceneBuilder, simulate
from simpatterns.simulators.phyre.physics import ACTION_MIN_RADIUS, ACTION_POSITION_SCALE, ACTION_RADIUS_RANGE

G = 58.8  # px/s^2
FPS = 60
E = 0.2  # restitution
BALL = 0.08  # PHYRE scale of a 10.5 px ball
R_BALL = 10.5
R_RED = 8.0


def action(x: float, y: float, r: float = R_RED) -> list[float]:
    """The action that puts the red ball's centre at (x, y) px with radius r px."""
    return [x / ACTION_POSITION_SCALE, y / ACTION_POSITION_SCALE, (r - ACTION_MIN_RADIUS) / ACTION_RADIUS_RANGE]


def fall_frames(h: float) -> float:
    """Frames to fall h px from rest."""
    return math.sqrt(2 * h / G) * FPS


def bounce_air_frames(h: float, k: int) -> float:
    """Airtime in frames of the k-th rebound (k >= 1) after a drop of h px."""
    v = math.sqrt(2 * G * h) * E ** k
    return 2 * v / G * FPS


def _rolling(spec, vx: float):
    spec.velocity = (vx, 0.0)
    spec.angular_velocity = -vx / spec.size["radius"]
    return spec


# ---------------------------------------------------------------- drop: red falls 60 px onto a fixed block
DROP = {"green": (90.0, R_BALL), "blue": (220.0, R_BALL), "block": (160.0, 10.0), "block_size": 20.0,
        "red": (160.0, 88.0), "drop": 60.0}


def drop_scene():
    B = SceneBuilder()
    green = B.add("ball", scale=BALL, center_x=DROP["green"][0], bottom=0)
    blue = B.add("ball", scale=BALL, center_x=DROP["blue"][0], bottom=0)
    B.add_box(20, 20, dynamic=False, label="block", center_x=DROP["block"][0], bottom=0)
    B.set_goal(green, blue)
    return B.build(template="test-drop")


def drop_trace():
    return simulate(drop_scene(), action(*DROP["red"])).trace


# ---------------------------------------------------------------- roll: green rolls into blue; red drops to the ground
ROLL = {"green": (40.0, R_BALL), "green_v": 60.0, "blue": (150.0, R_BALL), "red": (230.0, 60.0)}


def roll_scene():
    B = SceneBuilder()
    green = _rolling(B.add("ball", scale=BALL, center_x=ROLL["green"][0], bottom=0), ROLL["green_v"])
    blue = B.add("ball", scale=BALL, center_x=ROLL["blue"][0], bottom=0)
    B.set_goal(green, blue)
    return B.build(template="test-roll")


def roll_trace():
    return simulate(roll_scene(), action(*ROLL["red"])).trace


# ---------------------------------------------------------------- stack: green rests on blue, red rests on the ground
STACK = {"blue": (128.0, 15.0), "box": 30.0, "green": (128.0, 30.0 + R_BALL), "red": (40.0, R_RED)}


def stack_scene():
    B = SceneBuilder()
    blue = B.add_box(STACK["box"], STACK["box"], center_x=STACK["blue"][0], bottom=0)
    green = B.add("ball", scale=BALL, center_x=STACK["green"][0], bottom=STACK["box"])
    B.set_goal(green, blue)
    return B.build(template="test-stack")


def stack_trace():
    return simulate(stack_scene(), action(*STACK["red"])).trace


# ---------------------------------------------------------------- ramp: red rolls down a 20 degree ramp into the left wall
RAMP = {"angle": 20.0, "left_y": 40.0, "length": 230.0, "green": (100.0, R_BALL), "blue": (230.0, R_BALL),
        "red_x": 170.0}


def ramp_scene():
    B = SceneBuilder()
    ramp = B.add_bar(RAMP["length"], dynamic=False, label="ramp", angle=RAMP["angle"])
    ramp.set_left(-3).set_bottom(RAMP["left_y"] - 3)  # its lower end inside the left wall
    green = B.add("ball", scale=BALL, center_x=RAMP["green"][0], bottom=0)
    blue = B.add("ball", scale=BALL, center_x=RAMP["blue"][0], bottom=0)
    B.set_goal(green, blue)
    return B.build(template="test-ramp"), ramp


def ramp_red_centre(ramp) -> tuple[float, float]:
    """A point 2 px above the ramp's top face at x = RAMP['red_x'], one red radius out along the normal."""
    a = ramp.angle
    half_t = ramp.size["thickness"] / 2
    s = (RAMP["red_x"] - ramp.x) / math.cos(a)
    nx, ny = -math.sin(a), math.cos(a)
    cx, cy = ramp.x + math.cos(a) * s, ramp.y + math.sin(a) * s
    return cx + nx * (half_t + R_RED + 2.0), cy + ny * (half_t + R_RED + 2.0)


def ramp_trace():
    scene, ramp = ramp_scene()
    return simulate(scene, action(*ramp_red_centre(ramp))).trace


# ---------------------------------------------------------------- symmetric: green and blue equidistant from red (short run)
SYM = {"green": (88.0, R_BALL), "blue": (168.0, R_BALL), "red": (128.0, 100.0), "steps": 20}


def sym_scene():
    B = SceneBuilder()
    green = B.add("ball", scale=BALL, center_x=SYM["green"][0], bottom=0)
    blue = B.add("ball", scale=BALL, center_x=SYM["blue"][0], bottom=0)
    B.set_goal(green, blue)
    return B.build(template="test-sym")


def sym_trace():
    return simulate(sym_scene(), action(*SYM["red"]), max_steps=SYM["steps"]).trace
