"""00009: a tall bar standing at a platform edge; the green bar must touch the purple floor.

The bar stands upright on the platform at the end nearer the scene's middle
(flush with that end). A black ceiling bar spans the scene 20% of the scene
height above the bar's top; where that would put it in or above the top
wall (PHYRE places it there for the highest platforms with the longer bar)
it is left out, as it could touch nothing there.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, obstacle_width, obstacle_x, bar_scale, platform_y):
    skip_if(obstacle_x + obstacle_width > 1.0)
    platform = B.add("bar", scale=obstacle_width, dynamic=False, label="platform")
    platform.set_left(obstacle_x * B.width).set_bottom(platform_y * B.height)
    bar = B.add("bar", scale=bar_scale, dynamic=True).set_angle(90).set_bottom(platform.top)
    if platform.left > B.width - platform.right:
        bar.set_left(platform.left)
    else:
        bar.set_right(platform.right)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=0)
    ceiling = B.add("bar", scale=1.0, dynamic=False, label="ceiling", bottom=bar.top + 0.2 * B.height, left=0)
    if ceiling.outside_play_area:
        B.discard(ceiling)
    B.set_goal(bar, floor)


TEMPLATE = Template(
    id="00009",
    title="A tall bar standing at the edge of a platform",
    goal="make the green bar touch the purple floor",
    grid=dict(
        obstacle_width=np.linspace(0.4, 0.6, 4),
        obstacle_x=np.linspace(0, 1, 64),
        bar_scale=np.linspace(0.2, 0.3, 2),
        platform_y=np.linspace(0.2, 0.5, 5),
    ),
    build=build,
)
