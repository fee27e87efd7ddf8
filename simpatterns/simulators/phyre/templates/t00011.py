"""00011: two inclined ramps like cliffs; the green ball must touch the purple lower ramp.

The lower ramp rises at ``angle_left`` to the right wall from height
``bar_y``; the upper ramp, 20% of the scene height higher, falls at
``angle_right`` from the left wall. Their lengths add up to the scene width
(``length_left`` is the upper one's). The ball hangs at 90% of the scene
height; layouts where it would start inside the upper ramp's reach are
skipped. Ramps are cut where they run through a wall (PHYRE lets the upper
one poke through the ceiling).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, bar_y, ball_x, angle_left, angle_right, length_left):
    lower = B.add("bar", scale=1 - length_left, dynamic=False, label="lower ramp")
    lower.set_angle(angle_left).set_bottom(bar_y * B.height).set_right(1.01 * B.width)
    upper = B.add("bar", scale=length_left, dynamic=False, label="upper ramp")
    upper.set_angle(-angle_right).set_bottom((bar_y + 0.2) * B.height).set_left(-0.01 * B.width)
    ball = B.add("ball", scale=0.1).set_center_x(ball_x * B.width).set_bottom(0.9 * B.height)
    skip_if(ball.left < upper.right and upper.top > 0.9 * B.height)
    lower.trim_to_walls()
    upper.trim_to_walls()
    B.set_goal(ball, lower)


TEMPLATE = Template(
    id="00011",
    title="Two inclined ramps like cliffs, a ball held above them",
    goal="make the green ball touch the purple lower ramp",
    grid=dict(
        bar_y=np.linspace(0.1, 0.5, 10),
        ball_x=np.linspace(0.2, 0.8, 10),
        angle_left=np.linspace(15, 30, 5),
        angle_right=np.linspace(15, 30, 5),
        length_left=np.linspace(0.2, 0.8, 4),
    ),
    build=build,
)
