"""00001: a ball on a low shelf with angled lips; the green ball must touch the purple side wall.

The purple wall is a full-height static bar standing against the left or the
right wall. The shelf spans the scene minus the ball's diameter, 20 px up,
and its lips lean outwards at 65 degrees; lips that PHYRE lets run through
a wall are cut at the wall's outer face (the part inside the scene is as in
PHYRE).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, ball_x, ball_y, ball_r, left):
    wall = B.add("bar", scale=1.0, dynamic=False, label="side wall", angle=90, left=0, bottom=0)
    if not left:
        wall.set_right(B.width)
    shelf = B.add("bar", scale=0.99 - 2 * ball_r, dynamic=False, label="shelf", center_x=B.width / 2, top=20)
    lips = (
        B.add("bar", scale=0.2, dynamic=False, label="left lip", angle=65, right=shelf.left + 5, top=shelf.top),
        B.add("bar", scale=0.2, dynamic=False, label="right lip", angle=-65, left=shelf.right - 5, top=shelf.top),
    )
    ball = B.add("ball", scale=ball_r, left=ball_x * B.width, bottom=ball_y + shelf.top)
    skip_if(not shelf.left < ball.center_x < shelf.right)  # the ball must start over the shelf
    skip_if(abs(ball.center_x - wall.center_x) > 0.7 * B.width)  # and not too far from its wall
    for lip in lips:
        lip.trim_to_walls()
    B.set_goal(ball, wall)


TEMPLATE = Template(
    id="00001",
    title="A ball on a low shelf with angled lips, next to a purple side wall",
    goal="make the green ball touch the purple side wall",
    grid=dict(
        ball_x=np.linspace(0.1, 0.9, 32),
        ball_y=np.linspace(0, 40, 8),
        ball_r=np.linspace(0.05, 0.12, 5),
        left=[True, False],
    ),
    build=build,
)
