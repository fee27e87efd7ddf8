"""00003: an upright bar standing in a small jar; the green bar must touch the purple side wall.

The jar (scale 0.1) sits on the ground; the bar stands in it 4 px up,
jittered sideways by up to 2 px. The purple wall is a full-height static
bar on the side the bar can reach by falling over (its length plus 40 px);
other layouts are skipped.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

REACH_MARGIN = 40.0


def build(B, jar_x, bar_scale, jitter_x):
    jar = B.add("jar", scale=0.1, angle=0, bottom=0, center_x=jar_x * B.width)
    bar = B.add("bar", scale=bar_scale, dynamic=True, angle=90, center_x=jar.center_x + jitter_x, bottom=4)
    skip_if(jar.left <= bar.width or jar.right >= B.width - 1 - bar.width)
    reaches_left = bar.height + REACH_MARGIN > bar.left
    skip_if(not reaches_left and bar.height + REACH_MARGIN <= B.width - bar.right)
    side = dict(left=0) if reaches_left else dict(right=B.width)
    wall = B.add("bar", scale=1.0, dynamic=False, label="side wall", angle=90, bottom=0, **side)
    B.set_goal(bar, wall)


TEMPLATE = Template(
    id="00003",
    title="An upright bar standing in a small jar",
    goal="make the green bar touch the purple side wall",
    grid=dict(
        jar_x=np.linspace(0.05, 0.95, 20),
        bar_scale=np.linspace(0.2, 0.5, 4),
        jitter_x=np.linspace(-2, 2, 5),
    ),
    build=build,
)
