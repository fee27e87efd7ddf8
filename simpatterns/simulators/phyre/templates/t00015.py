"""00015: the green ball rests in a mid-air V of two short bars; it must touch the purple floor.

Layout (PHYRE 00015): two static bars of length ``bar_size`` tilted 5 degrees
down towards each other meet at ``x`` (their lower ends touch) with their
bottoms at ``y``; the ball (scale 0.1) sits centred over the joint, lowered
into the V by the drop of one arm (less 0.001 of the height). A purple
floor spans the bottom. Every grid combination is used (500).
"""

import math

import numpy as np

from simpatterns.simulators.phyre.template import Template

ARM_TILT = 5.0  # degrees
SINK_EPS = 0.001  # scene fraction the ball sits above the arms' geometric drop


def build(B, x, y, bar_size):
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", left=0, bottom=0)
    left_arm = B.add(
        "bar", scale=bar_size, dynamic=False, label="left arm", angle=360 - ARM_TILT,
        right=x * B.width, bottom=y * B.height,
    )
    right_arm = B.add(
        "bar", scale=bar_size, dynamic=False, label="right arm", angle=ARM_TILT,
        left=left_arm.right, bottom=left_arm.bottom,
    )
    drop = bar_size * math.sin(math.radians(ARM_TILT)) - SINK_EPS
    ball = B.add("ball", scale=0.1, center_x=x * B.width, bottom=right_arm.top - drop * B.height)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00015",
    title="A ball resting in a mid-air V of two short bars",
    goal="make the green ball touch the purple floor",
    grid=dict(
        x=np.linspace(0.2, 0.8, 10),
        y=np.linspace(0.2, 0.5, 10),
        bar_size=np.linspace(0.05, 0.1, 5),
    ),
    build=build,
)
