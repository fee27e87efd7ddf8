"""00002: a ball above a horizontal obstacle bar; the green ball must touch the purple floor.

The ball hangs at 90% of the scene height, centred over the obstacle. The
grid values are PHYRE's tenths (computed as multiples of 0.1, so the
"obstacle fits in the scene" test rejects exactly the same combinations).
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, obstacle_width, obstacle_x, obstacle_y):
    skip_if(obstacle_x + obstacle_width > 1.0)
    obstacle = B.add("bar", scale=obstacle_width, dynamic=False, label="obstacle bar", left=obstacle_x * B.width,
                     bottom=obstacle_y * B.height)
    ball = B.add("ball", scale=0.1, center_x=obstacle_x * B.width + obstacle.width / 2, bottom=0.9 * B.height)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=0)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00002",
    title="A ball held above a horizontal obstacle bar",
    goal="make the green ball touch the purple floor",
    grid=dict(
        obstacle_width=np.arange(1, 8) * 0.1,
        obstacle_x=np.arange(0, 11) * 0.1,
        obstacle_y=np.arange(3, 8) * 0.1,
    ),
    build=build,
)
