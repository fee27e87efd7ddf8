"""00016: the green ball sits on a steep launch ramp under two shields; it must touch
the narrow purple target in the floor, guarded by a blocker.

Layout (PHYRE 00016): the floor is three bars: a black left part of length
``target_position``, the purple target (0.1) and a black right part. A
standing blocker (0.1) guards the target's left edge; five short planks
(0.1) stack on the right part's left end, topped by a standing post. A
ramp (0.5) tilted down to the right by ``angle`` degrees has its bottom at
0.3 of the height and its right end 0.1 of the width left of the blocker; a
short launch bar (0.1, tilted up 10 degrees) continues it. Two shields
parallel to the ramp sit 6 and 10 ``radius`` above it; a long deflector
(0.5, tilted 30 degrees down) hangs right of the launch bar. The green
ball (radius ``radius`` px, cut to whole pixels plus 0.5) rests near the
ramp's upper end, shifted right by ``buffer`` of the width; a gray ball of
half that radius lies four radii further down the ramp, raised onto the
launch bar if it reaches it.

Combinations whose ball is at least as wide as the target are skipped, as
in PHYRE (no grid combination is). Bars are cut where they run into a wall;
inside the scene the layout is PHYRE's.
"""

import math

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

TARGET_SCALE = 0.1


def build(B, target_position, radius, buffer, angle):
    W, H = B.width, B.height
    left_floor = B.add("bar", scale=target_position, dynamic=False, label="left floor", bottom=0, left=0.0)
    target = B.add("bar", scale=TARGET_SCALE, dynamic=False, label="target", bottom=0, left=left_floor.right)
    right_floor = B.add(
        "bar", scale=1 - TARGET_SCALE - target_position, dynamic=False, label="right floor",
        bottom=0, left=target.right,
    )
    blocker = B.add("bar", scale=0.1, dynamic=False, label="blocker", bottom=0, angle=90, right=target.left)
    base = right_floor
    for _ in range(5):
        base = B.add("bar", scale=0.1, dynamic=False, label="plank", bottom=base.top, left=base.left)

    ramp_right = blocker.left - 0.1 * W
    ramp = B.add("bar", scale=0.5, dynamic=False, label="ramp", angle=-angle, bottom=0.3 * H, right=ramp_right)
    launch = B.add(
        "bar", scale=0.1, dynamic=False, label="launch bar", angle=10,
        bottom=ramp.bottom, left=ramp.right - 0.02 * W,
    )
    shields = [
        B.add(
            "bar", scale=0.5, dynamic=False, label=f"{word} shield", angle=-angle,
            bottom=0.3 * H + radius * rise, right=ramp_right,
        )
        for word, rise in (("lower", 6), ("upper", 10))
    ]
    B.add("bar", scale=0.1, dynamic=False, label="post", angle=90.0, left=base.left, bottom=base.top)
    deflector = B.add(
        "bar", scale=0.5, dynamic=False, label="deflector", angle=-30.0,
        top=shields[0].bottom + 0.1 * H, left=launch.right,
    )

    slope = math.tan(math.radians(angle))
    ball_x = max(0.05 * W, ramp.left + 0.01 * W) + buffer * W
    ball_y = ramp.bottom + (ramp.right - ball_x) * slope
    ball = B.add(
        "ball", scale=radius / W * 2, center_x=ball_x + radius, center_y=ball_y + radius * 1.7,
    )
    small_x = ball.center_x + 4 * radius
    small_y = ramp.bottom + (ramp.right - small_x) * slope
    small = B.add("ball", scale=radius / W, label="small ball", center_x=small_x, center_y=small_y + radius * 2.6)
    if small.right >= launch.left:
        small.set_bottom(max(launch.top, small.bottom))

    skip_if(ball.width >= target.width)
    for bar in (ramp, *shields, deflector):  # last: the balls were placed from the ramp's full extent
        bar.trim_to_walls()
    B.set_goal(ball, target)


TEMPLATE = Template(
    id="00016",
    title="A ball on a steep launch ramp with shields above a narrow guarded target",
    goal="make the green ball touch the purple target",
    grid=dict(
        target_position=np.linspace(0.35, 0.65, 10),
        radius=np.linspace(5, 12, 5),
        buffer=np.linspace(0.0, 0.1, 3),
        angle=np.linspace(30, 50, 6),
    ),
    build=build,
)
