"""00004: a beam balanced on a static ball; the green ball must touch the blue beam.

A full-width static shelf at height ``bar_y`` carries a static ball (the
fulcrum) and the beam lying on it; the ball hangs at 90% of the scene height
and starts over the beam. Two upright guards stand 15% of the scene width
outside the beam's ends, their tops 15% of the scene height below the ball,
but never lower than the shelf. A guard that PHYRE places wholly in or
beyond a side wall (it can touch nothing there) is left out.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, bar_y, ball_x, bar_center, bar_scale):
    shelf = B.add("bar", scale=1.0, dynamic=False, label="shelf").set_bottom(bar_y * B.height).set_left(0)
    fulcrum = B.add("ball", scale=0.1, dynamic=False, label="fulcrum", bottom=shelf.top,
                    center_x=bar_center * B.width)
    beam = B.add("bar", scale=bar_scale, dynamic=True, label="beam")
    beam.set_center_x(bar_center * B.width).set_bottom(fulcrum.top)
    ball = B.add("ball", scale=0.1).set_center_x(ball_x * B.width).set_bottom(0.9 * B.height)
    guard_top = ball.bottom - 0.15 * B.height
    guards = (
        B.add("bar", scale=0.2, dynamic=False, label="left guard")
        .set_angle(90).set_left(beam.left - 0.15 * B.width).set_top(guard_top),
        B.add("bar", scale=0.2, dynamic=False, label="right guard")
        .set_angle(90).set_right(beam.right + 0.15 * B.width).set_top(guard_top),
    )
    skip_if(ball.bottom < shelf.top)
    skip_if(ball.right < beam.left or ball.left > beam.right)
    for guard in guards:
        if guard.bottom < shelf.top:
            guard.set_bottom(shelf.top)
        if guard.outside_play_area:
            B.discard(guard)
    B.set_goal(ball, beam)


TEMPLATE = Template(
    id="00004",
    title="A beam balanced on a static ball, a ball held above it",
    goal="make the green ball touch the blue beam",
    grid=dict(
        bar_y=np.linspace(0.1, 0.6, 12),
        ball_x=np.linspace(0.2, 0.8, 14),
        bar_center=np.linspace(0.25, 0.65, 5),
        bar_scale=np.linspace(0.3, 0.45, 8),
    ),
    build=build,
)
