"""00020: the green ball sits on top of a staircase of tilted bars left of a wall with
one hole; it must touch the purple floor right of the wall.

Layout (PHYRE 00020): a wall stands at ``vbar_x_scale`` of the width. Left
of it, bars (0.3) tilted down to the right by ``angle`` degrees are stacked
every 0.15 of the height, their right ends ``distance_to_wall`` (of the
height) plus 2 px left of where the ball (0.08) first hangs at 0.9 of the
height; the ball is then moved to 1 px right of the stairs' right ends. The
wall has a hole two ball widths tall whose top lies ``distance_to_wall``
below the bottom of stair ``bar_y`` + 1. A gray ball (0.1) hangs right of
the wall (at 0.9 of the height if the hole's top is below 0.7, else at 0.3),
and the purple floor starts 4 px right of the wall.

Skipped as in PHYRE: holes whose top is not within (0.2, 0.9) of the height.
PHYRE's grid (``distance_to_wall`` at 0.01 and 0.05: 400 combinations, 200
used) yields only 89 solvable-but-not-trivial variants, so ``distance_to_wall``
takes 5 values from 0.01 to 0.05 here (PHYRE's two included). PHYRE also adds three stairs wholly above the
scene's top (they can touch nothing); they are left out here. Bars are cut
where they run into a wall; inside the scene the layout is PHYRE's.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

NUM_STAIRS = 10
STAIR_STEP = 0.15  # scene heights between stair bottoms


def build(B, bar_y, vbar_x_scale, distance_to_wall, angle):
    W, H = B.width, B.height
    wall_x = vbar_x_scale * W
    ball = B.add("ball", scale=0.08, right=wall_x - 1, bottom=0.9 * H)
    stairs_right = ball.left - 2 - distance_to_wall * H
    stairs = [
        B.add("bar", scale=0.3, dynamic=False, label="stair", angle=-angle,
              bottom=i * STAIR_STEP * H, right=stairs_right)
        for i in range(NUM_STAIRS)
    ]
    ball.set_left(stairs_right + 1)

    # the hole is cut under stair bar_y + 1 (the stair on the ground does not count)
    skip_if(bar_y + 1 >= NUM_STAIRS)
    hole_top = (bar_y + 1) * STAIR_STEP - distance_to_wall
    skip_if(not 0.2 < hole_top < 0.9)
    hole_size = ball.width / W * 2
    B.add("bar", scale=1.0 - hole_top, dynamic=False, label="upper wall", angle=90, left=wall_x, top=H)
    B.add("bar", scale=hole_top - hole_size, dynamic=False, label="lower wall", angle=90, left=wall_x, bottom=0)
    B.add("ball", scale=0.1, left=wall_x + 8, bottom=(0.9 if hole_top < 0.7 else 0.3) * H)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=wall_x + 4)
    for bar in (*stairs, floor):
        if bar.outside_play_area:
            B.discard(bar)
        else:
            bar.trim_to_walls()
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00020",
    title="A ball on a staircase left of a wall with one hole",
    goal="make the green ball touch the purple floor",
    grid=dict(
        bar_y=np.arange(10),
        vbar_x_scale=np.linspace(0.5, 0.6, 4),
        angle=np.linspace(10, 45, 5),
        distance_to_wall=np.linspace(0.01, 0.05, 5),  # PHYRE: 2 values
    ),
    build=build,
)
