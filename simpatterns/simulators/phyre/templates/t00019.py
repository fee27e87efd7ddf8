"""00019: two balls stacked in the air above a walled pad; the upper, green ball must
touch the purple pad.

Layout (PHYRE 00019): two balls (scale 0.1) share the x ``ball_x``; the green
one has its bottom at 0.9 of the height, the gray one at ``lower_ball_y``.
A black floor spans the bottom; on it lies the purple pad (length
``target_size``) centred at ``target_x``, with a short upright wall (0.02)
just beyond each end, its foot level with the pad's top. (PHYRE places the
wall on the side facing the ball a second time, on top of the first; that
copy changes nothing and is left out.)

Skipped: PHYRE's own rule (green ball starting within 3 px of the right
edge), plus one addition so that no ball starts inside a side wall: balls
within a radius of the scene's edge (PHYRE keeps them; its released tasks
include a ball centred on the left edge). A pad running into a side wall
is cut at the wall and its wall beyond the scene's edge is left out.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

BALL_X = np.linspace(0, 1, 128)
BALL_SCALE = 0.1


def build(B, ball_x, target_x, target_size, lower_ball_y):
    ball = B.add("ball", scale=BALL_SCALE, center_x=ball_x * B.width, bottom=0.9 * B.height)
    B.add("ball", scale=BALL_SCALE, center_x=ball_x * B.width, bottom=lower_ball_y * B.height)
    skip_if(ball.left >= B.width - 3)
    skip_if(ball.left < 0 or ball.right > B.width)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", left=0.0, angle=0.0, bottom=0.0)
    pad = B.add(
        "bar", scale=target_size, dynamic=False, label="pad", center_x=target_x * B.width, bottom=floor.top,
    )
    walls = (
        B.add("bar", scale=0.02, dynamic=False, label="left pad wall", right=pad.left, angle=90.0, bottom=pad.top),
        B.add("bar", scale=0.02, dynamic=False, label="right pad wall", left=pad.right, angle=90.0, bottom=pad.top),
    )
    for wall in walls:
        if wall.outside_play_area:
            B.discard(wall)
    pad.trim_to_walls()
    B.set_goal(ball, pad)


TEMPLATE = Template(
    id="00019",
    title="Two stacked balls above a walled pad",
    goal="make the green ball touch the purple pad",
    grid=dict(
        ball_x=BALL_X,
        target_x=BALL_X,
        target_size=np.linspace(0.1, 0.2, 2),
        lower_ball_y=[0.7, 0.5],
    ),
    build=build,
)
