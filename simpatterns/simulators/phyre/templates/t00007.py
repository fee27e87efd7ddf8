"""00007: a funnel of two sloped bars over a floor with a target pad at one end;
the green ball must touch the purple pad.

The ball starts against the ceiling near the middle. The funnel bars (half
the scene width each) slope down towards the middle from the side walls,
their tops at 90% of the scene height; the ball must fit through the gap
between them. The pad (20% of the width) lies on the ground at the
``target_side`` end; the floor covers the rest of the ground, with a short
step on it next to the pad. PHYRE's grid has a single ball scale.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

FUNNEL_SCALE = 0.5


def build(B, ball_scale, ball_x, angle, target_side):
    ball = B.add("ball", scale=ball_scale).set_top(B.height).set_center_x(ball_x * B.width)
    pad = B.add("bar", scale=0.2, dynamic=False, label="pad").set_bottom(0)
    floor = B.add("bar", scale=0.8, dynamic=False, label="floor").set_bottom(0)
    step = B.add("bar", scale=0.2, dynamic=False, label="step").set_bottom(floor.top)
    if target_side == "left":
        pad.set_left(0)
        floor.set_left(pad.right)
        step.set_left(pad.right)
    else:
        pad.set_right(B.width)
        floor.set_right(pad.left)
        step.set_right(pad.left)
    left_slope = B.add("bar", scale=FUNNEL_SCALE, dynamic=False, label="left slope", angle=-angle)
    left_slope.set_left(0).set_top(0.9 * B.height)
    right_slope = B.add("bar", scale=FUNNEL_SCALE, dynamic=False, label="right slope", angle=angle)
    right_slope.set_right(B.width).set_top(0.9 * B.height)
    skip_if(right_slope.left - left_slope.right <= ball_scale * B.height)
    B.set_goal(ball, pad)


TEMPLATE = Template(
    id="00007",
    title="A ball above a funnel of two sloped bars, a target pad at one end of the floor",
    goal="make the green ball touch the purple pad",
    grid=dict(
        ball_scale=[0.05],
        ball_x=np.linspace(0.4, 0.6, 20),
        angle=np.linspace(20, 30, 10),
        target_side=["left", "right"],
    ),
    build=build,
)
