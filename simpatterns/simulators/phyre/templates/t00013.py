"""00013: the green ball falls through two random chains of pegs; it must touch the purple floor.

Layout (PHYRE 00013): a ball (scale 0.1) at a random x in [0.4, 0.6] of the
width, centred at 0.9 of the height; two random walks of static pegs (scale
0.05) start at (0.7, 0.5) and (0.2, 0.5) of the scene and are kept below
two ball diameters under the ball; a purple floor bar spans the bottom.

Each walk heads in a random direction turning by a random constant step;
after three or more pegs it may restart (probability 0.2) from one of its
earlier pegs in a new direction. It stops after 15-29 pegs that lie inside
the scene; only those are placed. A restart re-draws the peg it restarts
from: PHYRE then places two coincident pegs, here that peg is placed once.

``seed`` (0-999; PHYRE enumerates 0-299, too few here: only 86 of those
layouts pass the solvable-but-not-trivial rule, so the grid is extended) drives `numpy.random.default_rng`, so layouts
are reproducible here but are not PHYRE's layouts for the same seed (PHYRE
draws from the legacy `RandomState`). ``build`` accepts another stream as
``rng`` (any object with ``uniform``, ``integers`` and ``choice``): fed
PHYRE's stream for a seed it rebuilds PHYRE's layout, which the tests check.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simpatterns.simulators.phyre.template import Template

CHAIN_STARTS = ((0.7, 0.5), (0.2, 0.5))  # scene fractions


def peg_chain(rng: Any, start: tuple[float, float], ceiling: float) -> list[tuple[float, float]]:
    """One random walk of peg centres (scene fractions), starting at ``start``;
    points at or above ``ceiling`` are drawn but dropped."""
    heading = rng.uniform() * 2 * math.pi
    turn = rng.uniform() * 2 * math.pi / 10
    points = [start]
    run = 1
    inside = 0
    wanted = int(rng.integers(15, 30))
    while inside < wanted:
        if run >= 3 and rng.uniform() < 0.2:
            x, y = points[int(rng.choice(len(points)))]
            run = 1
            heading = rng.uniform() * 2 * math.pi
            turn = rng.uniform() * 2 * math.pi / 10
        else:
            run += 1
            step = rng.uniform(0.05, 0.2)
            heading += turn
            x = points[-1][0] + step * math.cos(heading)
            y = points[-1][1] + step * math.sin(heading)
        if y >= ceiling:
            continue
        points.append((x, y))
        if 0.0 < x < 1.0 and 0.0 < y < 1.0:
            inside += 1
    return points


def peg_chains(rng: Any, ceiling: float) -> list[tuple[float, float]]:
    """Both walks' peg centres that lie in the scene (repeats included)."""
    pegs: list[tuple[float, float]] = []
    for start in CHAIN_STARTS:
        pegs.extend(peg_chain(rng, start, ceiling))
    return [(x, y) for x, y in pegs if 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0]


def build(B, seed, rng: Any = None):
    rng = np.random.default_rng(seed) if rng is None else rng
    ball_x = rng.uniform(0.4, 0.6)
    ball = B.add("ball", scale=0.1, center_x=ball_x * B.width, center_y=0.9 * B.height)
    ceiling = (ball.bottom - 2 * ball.height) / B.height
    placed: set[tuple[float, float]] = set()
    for x, y in peg_chains(rng, ceiling):
        if (x, y) in placed:
            continue
        placed.add((x, y))
        B.add("ball", scale=0.05, dynamic=False, label="peg", center_x=x * B.width, center_y=y * B.height)
    floor = B.add("bar", scale=1.0, dynamic=False, label="floor", bottom=0, left=0)
    B.set_goal(ball, floor)


TEMPLATE = Template(
    id="00013",
    title="A ball above two random chains of pegs",
    goal="make the green ball touch the purple floor",
    grid=dict(seed=np.arange(1000)),
    build=build,
)
