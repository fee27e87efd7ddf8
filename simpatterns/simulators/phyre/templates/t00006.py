"""00006: an upside-down jar over a gap in a raised floor, a ball on that floor;
the green ball must touch the blue jar.

The jar (scale 0.15) hangs mouth down from 95% of the scene height at the
centre; the raised floor is two static bars at ``bar_height`` with a gap of
20% of the scene width starting at ``hole_left``; the ball rests on one of
them. Layouts where the jar is not over the gap, or the ball starts over
the gap, are skipped. A long ramp rises 10 degrees from the bottom-left
corner; PHYRE makes it twice the scene width, here it is cut where it
enters the right wall (the part inside the scene is unchanged).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

GAP = 0.2


def build(B, ball_left, hole_left, bar_height):
    jar = B.add("jar", scale=0.15)
    jar.set_center_x(0.5 * B.width).set_top(0.95 * B.height).set_angle(180)
    left_shelf = B.add("bar", scale=hole_left, dynamic=False, label="left shelf")
    left_shelf.set_left(0).set_bottom(bar_height * B.height)
    hole_right = hole_left + GAP
    skip_if(hole_right >= 1.0)
    right_shelf = B.add("bar", scale=1.0 - hole_right, dynamic=False, label="right shelf")
    right_shelf.set_right(B.width).set_bottom(bar_height * B.height)
    ball = B.add("ball", scale=0.1).set_bottom(right_shelf.top).set_left(ball_left * B.width)
    skip_if(jar.left < left_shelf.right or jar.right > right_shelf.left)
    skip_if(left_shelf.right < ball.center_x < right_shelf.left)
    B.add("bar", scale=2.0, dynamic=False, label="ramp", left=0, bottom=-2, angle=10).trim_to_walls()
    B.set_goal(ball, jar)


TEMPLATE = Template(
    id="00006",
    title="An upside-down jar over a gap in a raised floor, a ball beside the gap",
    goal="make the green ball touch the blue jar",
    grid=dict(
        ball_left=np.linspace(0.2, 0.8, 20),
        hole_left=np.linspace(0.2, 0.8, 20),
        bar_height=np.linspace(0.3, 0.6, 16),
    ),
    build=build,
)
