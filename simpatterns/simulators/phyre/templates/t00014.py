"""00014: a ball beside a floor post, a divider from the ceiling and a split floor;
the green ball must touch the purple floor half on the far side of the divider.

Layout (PHYRE 00014): the ball (scale ``ball_size``) hangs with its bottom at
``height`` of the scene and its centre ``hole_left`` from the left edge
(``left``) or from the right edge (not ``left``). A standing post of length
0.75 x ``hole_left`` stands on the floor under the ball's inner edge. A
divider of length 0.7 hangs from the ceiling just right of the middle. The
floor is two half-width bars; the goal half is the one across the divider
from the ball. Every grid combination is used (640).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template


def build(B, hole_left, height, ball_size, left):
    ball_x = hole_left if left else 1 - hole_left
    ball = B.add("ball", scale=ball_size, center_x=ball_x * B.width, bottom=height * B.height)
    B.add(
        "bar", scale=0.75 * hole_left, dynamic=False, label="post", angle=90,
        center_x=ball.right if left else ball.left, bottom=0,
    )
    B.add("bar", scale=0.7, dynamic=False, label="divider", angle=90, left=B.width / 2, top=B.height)
    left_floor = B.add("bar", scale=0.5, dynamic=False, label="floor", bottom=0, left=0)
    right_floor = B.add("bar", scale=0.5, dynamic=False, label="floor", bottom=0, left=left_floor.right)
    B.set_goal(ball, right_floor if left else left_floor)


TEMPLATE = Template(
    id="00014",
    title="A ball beside a floor post, a divider from the ceiling and a split floor",
    goal="make the green ball touch the purple floor",
    grid=dict(
        hole_left=np.linspace(0.1, 0.3, 8),
        height=np.linspace(0.3, 0.7, 8),
        ball_size=np.linspace(0.05, 0.15, 5),
        left=[True, False],
    ),
    build=build,
)
