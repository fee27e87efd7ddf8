"""00012: pachinko, rows of static pegs under a ball; the green ball must touch the purple floor.

The ball hangs at 90% of the scene height, its centre at a random 20-50% of
the width. Four rows of pegs (static balls, scale 0.04) sit at heights
evenly spaced from 10% of the scene up to two ball diameters below the ball.
Each row starts with a peg on a side wall (alternately left and right) and
adds 3-7 more, each 5-17% of the width further along a line rising about 5
degrees with a random wobble; pegs whose centre leaves the scene are
dropped.

Randomness: ``seed`` drives numpy's legacy ``RandomState`` in exactly
PHYRE's order of draws, so seed ``s`` gives PHYRE's layout for seed ``s``
(and it is reproducible: that generator's streams are frozen). PHYRE's
bound on a row's length compares fractions with pixels and never applies;
here there is none.
"""

import math

import numpy as np

from simpatterns.simulators.phyre.template import Template

NUM_ROWS = 4
PEG_SCALE = 0.04
ROW_RISE = math.radians(5)
WOBBLE = 2 * math.pi / 40  # standard deviation of each step's direction


def build(B, seed):
    rng = np.random.RandomState(seed)
    ball = B.add("ball", scale=0.1).set_center(rng.uniform(0.2, 0.5) * B.width, 0.9 * B.height)
    top = (ball.bottom - 2 * ball.height) / B.height
    pegs = []
    for row, y in enumerate(np.linspace(0.1, top, NUM_ROWS)[::-1]):
        count = rng.randint(3, 8)
        line = [(0.0, y)]
        for _ in range(count):
            step = rng.uniform(0.05, 0.17)
            direction = ROW_RISE + rng.normal() * WOBBLE
            x0, y0 = line[-1]
            line.append((x0 + step * np.cos(direction), y0 + step * np.sin(direction)))
        if row % 2:
            line = [(1 - x, y) for x, y in line]
        pegs.extend(line)
    for x, y in pegs:
        if 0 <= x <= 1 and 0 <= y <= 1:
            B.add("ball", scale=PEG_SCALE, dynamic=False, label="peg", center_x=B.width * x, center_y=B.height * y)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=0)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00012",
    title="Pachinko: rows of static pegs under a ball",
    goal="make the green ball touch the purple floor",
    grid=dict(seed=np.arange(1000)),
    build=build,
)
