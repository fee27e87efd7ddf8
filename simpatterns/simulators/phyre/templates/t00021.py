"""00021: a chain ramp -> seesaw -> ramp -> jar -> ramp -> ledge under a ceiling; the
green ball at the top of the first ramp must touch the purple jar.

Layout (PHYRE 00021): left to right, 0.005 of the width apart: a ramp whose
horizontal run is ``w1`` tilted down by ``angle`` degrees with its bottom at
``h0``; a gray seesaw bar (``w2``) level with the ramp's bottom, resting on a
static fulcrum ball under its middle, with a second fulcrum under its right
end and a black base bar under both; a second ramp whose top is level with
the seesaw's top; a static purple jar (``w2``) with its top at the second
ramp's bottom; a third ramp whose top is level with the jar's top; and a
ledge filling the remaining width, level with the third ramp's bottom. The
green ball (0.05) rests on the first ramp's top at the left wall; a ceiling
spans the scene 0.1 of the height above the ball.

Skipped as in PHYRE: ledges shorter than 0.2 of the width, and layouts
whose ceiling leaves the scene or whose ledge or jar sinks below the ground.
PHYRE's grid keeps only 126 layouts, too few for 100 solvable-but-not-trivial
variants, so ``w1`` and ``angle`` take 5 values each here instead of 3
(PHYRE's values included).
"""

import math

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, h0, w1, w2, angle):
    W, H = B.width, B.height
    gap = 0.005 * W
    ramp_scale = w1 / math.cos(math.radians(angle))
    ramp1 = B.add("bar", scale=ramp_scale, dynamic=False, label="ramp", angle=360 - angle, left=0, bottom=h0 * H)
    seesaw = B.add("bar", scale=w2, dynamic=True, label="seesaw", left=ramp1.right + gap, bottom=ramp1.bottom)
    fulcrum = B.add("ball", scale=0.05, dynamic=False, label="fulcrum", center_x=seesaw.center_x, top=seesaw.bottom)
    B.add("ball", scale=0.05, dynamic=False, label="fulcrum", right=seesaw.right, top=seesaw.bottom)
    B.add("bar", scale=w2, dynamic=False, label="base", left=seesaw.left, top=fulcrum.bottom)
    ramp2 = B.add(
        "bar", scale=ramp_scale, dynamic=False, label="ramp", angle=360 - angle,
        left=seesaw.right + gap, top=seesaw.top,
    )
    jar = B.add("jar", scale=w2, dynamic=False, left=ramp2.right + gap, top=ramp2.bottom)
    ramp3 = B.add(
        "bar", scale=ramp_scale, dynamic=False, label="ramp", angle=360 - angle,
        left=jar.right + gap, top=jar.top,
    )
    ledge_scale = 1.0 - w1 - w2 - w1 - w2 - w1 - 5 * gap / W
    skip_if(ledge_scale < 0.2)
    ledge = B.add("bar", scale=ledge_scale, dynamic=False, label="ledge", left=ramp3.right + gap, bottom=ramp3.bottom)
    ball = B.add("ball", scale=0.05, left=0, bottom=ramp1.top)
    ceiling = B.add("bar", scale=1.0, dynamic=False, label="ceiling", left=0, top=ball.top + 0.1 * H)
    skip_if(ceiling.top > H or ledge.bottom < 0 or jar.bottom < 0)
    B.set_goal(ball, jar)


TEMPLATE = Template(
    id="00021",
    title="A ramp, seesaw, ramp, jar and ramp chain under a ceiling",
    goal="make the green ball touch the purple jar",
    grid=dict(
        h0=np.linspace(0.2, 0.5, 15),
        w1=np.linspace(0.1, 0.2, 5),  # PHYRE: 3 values
        w2=np.linspace(0.15, 0.3, 3),
        angle=np.linspace(10, 20, 5),  # PHYRE: 3 values
    ),
    build=build,
)
