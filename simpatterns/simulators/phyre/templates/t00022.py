"""00022: a blue ball lies in a gray jar on the ground; the green ball rests on a
tilted shelf above it, with ramps in both floor corners; the green ball must
touch the blue ball.

Layout (PHYRE 00022): two static ramps (0.5) tilted ``angle`` degrees stand
in the corners, ending at 0.2 and 0.8 of the width. The dynamic jar
(``jar_scale``) stands on the ground centred at ``jar_position`` +
``x_offset``, with a ball (0.05 + jar/5) inside it. A static shelf 90 px
long, tilted ``obstacle_angle`` degrees, is centred at ``shift_right`` +
``x_offset`` with its bottom at 0.3 of the height or four ``radius`` above
the jar's top, whichever is higher. The green ball (radius ``radius`` px)
sits ``ball_offset`` px right of the shelf's left end, one radius above the
shelf's top.

Skipped as in PHYRE: jars reaching more than 10 px past the shelf's right
end. The corner ramps are cut where they run into a wall; inside the scene
the layout is PHYRE's.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

SHELF_LENGTH_PX = 90.0


def build(B, radius, jar_scale, angle, jar_position, x_offset, ball_offset, shift_right, obstacle_angle):
    W, H = B.width, B.height
    B.add("bar", scale=0.5, dynamic=False, label="left ramp", angle=-angle, bottom=0, right=0.2 * W).trim_to_walls()
    B.add("bar", scale=0.5, dynamic=False, label="right ramp", angle=angle, bottom=0, left=0.8 * W).trim_to_walls()
    jar = B.add("jar", scale=jar_scale, center_x=(jar_position + x_offset) * W, bottom=0)
    shelf = B.add(
        "bar", scale=SHELF_LENGTH_PX / W, dynamic=False, label="shelf", angle=obstacle_angle,
        center_x=(shift_right + x_offset) * W, bottom=max(0.3 * H, jar.top + radius * 4),
    )
    skip_if(jar.right > shelf.right + 10)
    target = B.add("ball", scale=0.05 + jar_scale / 5, center_x=jar.center_x, bottom=10)
    ball = B.add("ball", scale=radius / W * 2, left=shelf.left + ball_offset, bottom=shelf.top + radius)
    B.set_goal(ball, target)


TEMPLATE = Template(
    id="00022",
    title="A ball on a tilted shelf above a ball in a jar, with corner ramps",
    goal="make the green ball touch the blue ball",
    grid=dict(
        radius=np.linspace(5, 12, 5),
        jar_scale=np.linspace(0.20, 0.30, 4),
        jar_position=np.linspace(0.4, 0.6, 10),
        x_offset=np.linspace(0.0, 0.1, 2),
        angle=np.linspace(45, 60, 5),
        ball_offset=np.linspace(5, 15, 2),
        shift_right=np.linspace(0.4, 0.6, 3),
        obstacle_angle=np.linspace(-10, 10, 3),
    ),
    build=build,
)
