"""00010: a ball in a tilted dynamic jar above a V-shaped valley; the green ball
must touch the purple right slope.

Two full-length static bars rise from 2 px below the ground and meet at the
valley bottom (``center_point`` of the width): the right slope at
``right_bar_angle``, the left one turned ``bar_angle`` degrees clockwise
from it, so that the two open upwards in a V. The pair is shifted sideways so that the right slope
reaches the right wall, or else the left slope the left wall. The jar (scale
0.2), tilted like the left slope, hangs ``jar_vertical_top_offset`` below the
ceiling, pushed right until it clears the left slope by 5 px; the ball
starts at the jar's centre.

PHYRE measures the jar's clearance with an extra static bar placed along
the left slope and leaves it in the scene. Where it lies within the slope it
changes nothing and is taken out here; where it juts out (for the steepest
valley, tipped past vertical, it sits about 1 px off the slope) it is kept
as the "inner left slope". Bars are cut where they run into a wall; inside
the scene the layout is PHYRE's.
"""

import math

import numpy as np

from simpatterns.simulators.phyre.template import Template

JAR_CLEARANCE = 5.0
ALIGNED_PX = 0.05


def offset_across(bar, other):
    """Distance between two parallel bars' centre lines."""
    return (bar.x - other.x) * -math.sin(other.angle) + (bar.y - other.y) * math.cos(other.angle)


def build(B, right_bar_angle, center_point, bar_angle, jar_vertical_top_offset):
    tilt = right_bar_angle - bar_angle
    right_slope = B.add("bar", scale=1.0, dynamic=False, label="right slope", angle=right_bar_angle,
                        left=center_point * B.width, bottom=-2)
    left_slope = B.add("bar", scale=1.0, dynamic=False, label="left slope", angle=tilt,
                       right=right_slope.left, bottom=-2)
    shift = 0.0
    if right_slope.right < B.width:
        shift = B.width - right_slope.right
    elif left_slope.left > 0:
        shift = -left_slope.left
    for slope in (right_slope, left_slope):
        slope.set_left(slope.left + shift)

    jar = B.add("jar", scale=0.2, angle=tilt, left=5, top=B.height - jar_vertical_top_offset)
    # The left slope's extent up to the jar's lowest (or, tipped over, highest) edge.
    upside_down = abs(tilt) > 90
    reach_y = jar.top if upside_down else jar.bottom
    reach_scale = (reach_y - left_slope.bottom) / (left_slope.top - left_slope.bottom)
    reach = B.add("bar", scale=reach_scale, dynamic=False, angle=tilt, right=left_slope.right,
                  bottom=left_slope.bottom)
    slope_x = reach.right if upside_down else reach.left
    if abs(offset_across(reach, left_slope)) < ALIGNED_PX:
        B.discard(reach)  # it lies along the left slope: no effect
    else:
        reach.label = "inner left slope"  # PHYRE's measuring bar juts out of the slope: keep it
        reach.trim_to_walls()
    jar.set_left(max(jar.left, slope_x + JAR_CLEARANCE))

    ball = B.add("ball", scale=0.08, center_x=jar.center_x, center_y=jar.center_y)
    right_slope.trim_to_walls()
    left_slope.trim_to_walls()
    B.set_goal(ball, right_slope)


TEMPLATE = Template(
    id="00010",
    title="A ball in a tilted jar above a V-shaped valley",
    goal="make the green ball touch the purple right slope",
    grid=dict(
        right_bar_angle=np.linspace(10, 50, 6),
        center_point=np.linspace(0.2, 0.6, 6),
        bar_angle=np.linspace(75, 105, 5),
        jar_vertical_top_offset=np.linspace(15, 35, 3),
    ),
    build=build,
)
