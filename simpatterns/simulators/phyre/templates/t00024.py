"""00024: a raised floor with one hole above the purple bottom floor; a gray ball
near the hole may block it; the green ball must touch the purple floor.

Layout (PHYRE 00024): the raised floor is two static bars at ``bar_height``
leaving a hole 0.1 of the width wide from ``hole_left``. The green ball
(0.1) hangs centred at 0.8 of the height; the gray ball (0.11) hangs
``ball_distance`` above the raised floor, 0.025 of the width inside the
hole's left edge (``confounder``) or its right edge (not ``confounder``).
A purple floor spans the bottom.

Skipped as in PHYRE: green balls that would fall straight through the
hole, and gray balls reaching up to the green ball's bottom.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

BALL_SCALE = 0.1
HOLE_SIZE = 0.1


def build(B, hole_left, bar_height, ball_distance, confounder):
    W, H = B.width, B.height
    hole_right = hole_left + HOLE_SIZE
    skip_if(hole_right >= 1.0)
    ball = B.add("ball", scale=BALL_SCALE, center_x=0.5 * W, bottom=0.8 * H)
    blocker = B.add("ball", scale=BALL_SCALE + 0.01, bottom=(bar_height + ball_distance) * H)
    if confounder:
        blocker.set_left((hole_left + 0.025) * W)
    else:
        blocker.set_right((hole_right - 0.025) * W)
    left_part = B.add("bar", scale=hole_left, dynamic=False, label="left platform", left=0, bottom=bar_height * H)
    right_part = B.add(
        "bar", scale=1.0 - hole_right, dynamic=False, label="right platform", right=W, bottom=bar_height * H,
    )
    skip_if(ball.left >= left_part.right and ball.right <= right_part.left)
    skip_if(blocker.top >= ball.bottom)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", left=0, bottom=0)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00024",
    title="A raised floor with one hole and a blocking ball beside it",
    goal="make the green ball touch the purple floor",
    grid=dict(
        hole_left=np.linspace(0.2, 0.8, 12),
        bar_height=np.linspace(0.15, 0.6, 10),
        ball_distance=np.linspace(0.1, 0.3, 4),
        confounder=[True, False],
    ),
    build=build,
)
