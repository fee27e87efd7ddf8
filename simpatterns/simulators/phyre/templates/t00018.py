"""00018: a blue ball lies in a gray jar on the ground; the green ball sits under an
upturned jar on a high shelf; the green ball must touch the blue ball.

Layout (PHYRE 00018): a dynamic jar (scale ``bottom_jar_scale``) stands on
the ground centred at ``bottom_jar_x`` with a ball (scale 0.05 + jar/8)
inside it. A static shelf (scale 1, running into the right wall) starts
``bar_offset`` of the width right of the jar's left edge at height
``bar_y``. On the shelf's left end an upturned jar (0.12) covers the green
ball (0.05). A long static ramp tilted ``right_diag_angle`` degrees rises
from the shelf's height at 0.7 of the width (or 10 px right of the upturned
jar, if further). Bars are cut where they run into a wall; inside the scene
the layout is PHYRE's.

Skipped as in PHYRE: high shelves (``bar_y`` >= 0.6) over jars right of
0.4, and shelves starting closer to the left wall than three ball widths.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, bar_y, bottom_jar_scale, bottom_jar_x, right_diag_angle, bar_offset):
    skip_if(bar_y >= 0.6 and bottom_jar_x > 0.4)
    jar = B.add("jar", scale=bottom_jar_scale, center_x=B.width * bottom_jar_x, bottom=0.0)
    target = B.add("ball", scale=0.05 + bottom_jar_scale / 8, center_x=jar.center_x, bottom=10)
    shelf = B.add(
        "bar", scale=1.0, dynamic=False, label="shelf",
        left=jar.left + bar_offset * B.width, bottom=B.height * bar_y,
    )
    cover = B.add("jar", scale=0.12, label="upturned jar", angle=180.0, left=shelf.left, bottom=shelf.top)
    ball = B.add("ball", scale=0.05, center_x=cover.left + cover.width * 0.5, bottom=shelf.top)
    skip_if(shelf.left < 3 * ball.width)
    ramp = B.add(
        "bar", scale=1.0, dynamic=False, label="ramp", angle=right_diag_angle,
        bottom=shelf.bottom, left=max(0.7 * B.width, cover.right + 10),
    )
    shelf.trim_to_walls()
    ramp.trim_to_walls()
    B.set_goal(ball, target)


TEMPLATE = Template(
    id="00018",
    title="A ball in a jar on the ground and a ball under an upturned jar on a high shelf",
    goal="make the green ball touch the blue ball",
    grid=dict(
        bar_y=np.linspace(0.4, 0.65, 10),
        bottom_jar_scale=np.linspace(0.15, 0.20, 3),
        bottom_jar_x=np.linspace(0.25, 0.50, 5),
        right_diag_angle=np.linspace(30, 70, 3),
        bar_offset=np.linspace(0.1, 0.2, 3),
    ),
    build=build,
)
