"""00005: a ball held above a dynamic jar; the green ball must touch the purple floor.

The jar stands on (or floats ``jar_y`` above) a full-width purple floor bar
and the ball hangs centred over it. Grid values are PHYRE's, computed as
multiples of 0.1 and 0.05 as PHYRE does.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, jar_x, jar_y, jar_scale, ball_y):
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=0)
    jar = B.add("jar", scale=jar_scale, bottom=floor.top + jar_y * B.height, left=jar_x * B.width)
    skip_if(jar.left < 0 or jar.right > B.width)
    ball = B.add("ball", scale=0.1, bottom=ball_y * B.height, center_x=jar.left + jar.width / 2)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00005",
    title="A ball held above a jar standing on the floor",
    goal="make the green ball touch the purple floor",
    grid=dict(
        jar_x=np.arange(2, 8) * 0.1,
        jar_y=np.arange(0, 3) * 0.1,
        jar_scale=np.arange(3, 9) * 0.05,
        ball_y=np.arange(7, 10) * 0.1,
    ),
    build=build,
)
