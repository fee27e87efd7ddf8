"""00017: the green ball balances on a standing gray pole under a ceiling; it must
touch the purple floor.

Layout (PHYRE 00017): a dynamic pole of length ``bar_height`` stands upright
on the purple floor at ``bar_x``; the ball (scale ``ball_size``) rests on its
top, and a static ceiling bar spans the scene 0.01 of the height above the
ball. Two small 45-degree ramps of length ``ramp_size`` sit in the floor's
corners. Every grid combination is used (625).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template

RAMP_ANGLE = 45.0


def build(B, bar_height, bar_x, ball_size, ramp_size):
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", left=0, bottom=0)
    pole = B.add(
        "bar", scale=bar_height, dynamic=True, label="pole", angle=90,
        center_x=bar_x * B.width, bottom=floor.top,
    )
    ball = B.add("ball", scale=ball_size, bottom=pole.top, center_x=pole.center_x)
    B.add("bar", scale=1.0, dynamic=False, label="ceiling", left=0, bottom=ball.top + 0.01 * B.height)
    B.add("bar", scale=ramp_size, dynamic=False, label="left ramp", angle=360 - RAMP_ANGLE, left=0, bottom=floor.top)
    B.add("bar", scale=ramp_size, dynamic=False, label="right ramp", angle=RAMP_ANGLE, right=B.width, bottom=floor.top)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00017",
    title="A ball balanced on a standing pole under a ceiling",
    goal="make the green ball touch the purple floor",
    grid=dict(
        bar_height=np.linspace(0.2, 0.5, 5),
        bar_x=np.linspace(0.2, 0.8, 5),
        ball_size=np.linspace(0.05, 0.25, 5),
        ramp_size=np.linspace(0.05, 0.2, 5),
    ),
    build=build,
)
