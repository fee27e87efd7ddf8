"""The ten Appendix G goals read directly from a trace's raw arrays (contacts, positions,
velocities, body colours), without the reward DSL, its detectors or its evaluator: the
reference the goal programs of examples/goals are compared with (test_dsl_goal_agreement.py,
benchmarks/goal_agreement.py).

The words are read with the definitions the README gives them:

- "the green object" / "the blue object": any body of that colour (none in the scene: the
  goal cannot hold); "the red ball": the agent's ball;
- a *touch*: a stretch of contact, contacts apart for at most 2 frames being one touch
  (touching "at the end": inside a touch at the episode's last frame); "never touches" means
  no contact row at all; a touch "after" X begins after X begins;
- times are fractions of the episode's horizon (``meta["horizon"]`` frames);
- "very close": surfaces within 5 px (0 while touching);
- "stopped moving": speed under 1 px/s and spin under 0.1 rad/s for at least 0.5 s;
  "contacted the ground and stopped moving": such a rest that begins touching the ground
  (within its first 3 frames);
- "knock X into Y": X, hit by the red ball at 5 px/s or more, makes its next new contact with a
  non-wall body within 1 s, on Y, the red ball not touching Y in between (the walls and the
  ground are not part of a chain).
"""

from __future__ import annotations

import importlib.util
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from simpatterns.trace import Trace

GAP = 2  # frames apart that are still one touch
NEAR = 5.0  # px: "very close"
REST_SPEED, REST_SPIN, REST_SECONDS = 1.0, 0.1, 0.5
RELAY_SECONDS, HIT_SPEED = 1.0, 5.0
ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def _outline_module():
    """The near-collision detector's outline geometry (detector code, not the DSL's), for surface gaps."""
    path = ROOT / "simpatterns" / "detectors" / "builtin" / "near_collision.py"
    spec = importlib.util.spec_from_file_location("near_collision_geometry", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Reading:
    """Raw-array facts about one trace, computed once."""

    def __init__(self, trace: Trace):
        self.tr = trace
        self.T = trace.num_frames
        self.H = int(trace.meta.get("horizon", self.T))
        n = trace.num_bodies
        self.touch = np.zeros((self.T, n, n), dtype=bool)
        self.touch[trace.contact_frame, trace.contact_a, trace.contact_b] = True
        self.touch[trace.contact_frame, trace.contact_b, trace.contact_a] = True
        self.red = trace.names.index("red ball")
        self.ground = trace.names.index("ground")

    def colour(self, c: str) -> list[int]:
        return [i for i, b in enumerate(self.tr.bodies) if b.color == c]

    def named(self, name: str) -> list[int]:
        return [self.tr.names.index(name)]

    def frame(self, t: float) -> int:
        return int(round(t * (self.H - 1)))

    def lo_hi(self, a: float, b: float) -> tuple[int, int]:
        return math.ceil(a * (self.H - 1) - 1e-9), math.floor(b * (self.H - 1) + 1e-9)

    def contact(self, A, B, lo: int = 0, hi: int | None = None) -> bool:
        """Some body of A touches some body of B at a frame in [lo, hi]."""
        hi = self.T - 1 if hi is None else min(hi, self.T - 1)
        return any(self.touch[lo:hi + 1, i, j].any() for i in A for j in B if i != j)

    def touches(self, A, B) -> list[tuple[int, int]]:
        """(first, last contact frame) of the touches between bodies of A and B (each pair once)."""
        out = []
        for i, j in {tuple(sorted((i, j))) for i in A for j in B if i != j}:
            frames = np.flatnonzero(self.touch[:, i, j])
            if frames.size:
                new = np.flatnonzero(np.concatenate(([True], np.diff(frames) > GAP + 1)))
                out += [(int(frames[a]), int(frames[b - 1])) for a, b in zip(new, [*new[1:], frames.size])]
        return sorted(out)

    def touch_starts(self, A, B) -> list[int]:
        """First frames of the touches between bodies of A and bodies of B (each pair once)."""
        return [a for a, _ in self.touches(A, B)]

    def touching_at(self, A, B, f: int) -> bool:
        """In a touch at frame f (one still on when the trace ends less than 3 frames after its last contact)."""
        return any(a <= f <= b or (f > b and self.H - 1 - b <= GAP) for a, b in self.touches(A, B))

    def gap(self, A, B, lo: int, hi: int) -> float:
        """Smallest surface distance between bodies of A and B over frames lo..hi (0 touching)."""
        geo = _outline_module()
        frames = np.arange(lo, min(hi, self.T - 1) + 1)
        best = math.inf
        for i in A:
            for j in B:
                if i == j or not frames.size:
                    continue
                g = np.maximum(geo.surface_gap(geo.outline(self.tr, i, frames), geo.outline(self.tr, j, frames)), 0)
                g = np.where(self.touch[frames, i, j], 0.0, g)
                best = min(best, float(np.min(g)))
        return best

    def rest_starts_on_ground(self, body: int) -> list[int]:
        """Frames where ``body`` begins a rest of at least 0.5 s, touching the ground within 3 frames."""
        v = self.tr.velocity[:, body]
        still = (np.hypot(v[:, 0], v[:, 1]) < REST_SPEED) & (np.abs(self.tr.angular_velocity[:, body]) < REST_SPIN)
        need = round(REST_SECONDS / self.tr.dt)
        out, f = [], 0
        while f < self.T:
            if still[f]:
                e = f
                while e < self.T and still[e]:
                    e += 1
                if e - f >= need and self.touch[f:f + 3, body, self.ground].any():
                    out.append(f)
                f = e
            else:
                f += 1
        return out

    def knocks(self, a: int, via: list[int], targets: list[int]) -> int:
        """How many distinct "a knocks a via body into a target" chains (see the module doc)."""
        walls = {i for i, b in enumerate(self.tr.bodies) if b.role == "wall"}
        raw = self._raw_starts()
        w = round(RELAY_SECONDS / self.tr.dt)
        chains = set()
        for f1, i, j in raw:
            if a not in (i, j) or f1 == 0:
                continue
            v = j if i == a else i
            if v not in via or v in walls or not self.tr.bodies[v].dynamic:
                continue
            if self._closing(f1, a, v) < HIT_SPEED:
                continue
            later = [(f2, x if y == v else y) for f2, x, y in raw
                     if f1 < f2 <= f1 + w and v in (x, y) and (x if y == v else y) not in walls
                     and (x if y == v else y) != a]
            if not later:
                continue
            f2, last = min(later)
            if last in targets and not self.touch[f1:f2 + 1, a, last].any():
                chains.add((f2, last, v))
        return len(chains)

    def _raw_starts(self) -> list[tuple[int, int, int]]:
        """(frame, i, j) of every contact start of the raw contact rows (no merging)."""
        out = []
        n = self.tr.num_bodies
        for i in range(n):
            for j in range(i + 1, n):
                col = self.touch[:, i, j]
                if col.any():
                    start = np.flatnonzero(col & ~np.concatenate(([False], col[:-1])))
                    out += [(int(f), i, j) for f in start]
        return sorted(out)

    def _closing(self, f: int, a: int, b: int) -> float:
        """Speed at which a's and b's surfaces approach along the contact normal just before frame f."""
        tr = self.tr
        i, j = min(a, b), max(a, b)
        row = int(np.flatnonzero((tr.contact_frame == f) & (tr.contact_a == i) & (tr.contact_b == j))[0])
        p, nrm = tr.contact_point[row], tr.contact_normal[row] * (1 if a < b else -1)
        vel = []
        for k in (a, b):
            r, om = p - tr.position[f - 1, k], tr.angular_velocity[f - 1, k]
            vel.append(tr.velocity[f - 1, k] + om * np.array([-r[1], r[0]]))
        return float((vel[0] - vel[1]) @ nrm)


def read_goals(trace: Trace) -> dict[str, bool]:
    """Verdict of each Appendix G goal (a01 ... a10) on ``trace``, from its raw arrays."""
    r = Reading(trace)
    G, B, R = r.colour("green"), r.colour("blue"), [r.red]
    LW, RW, TW = r.named("left wall"), r.named("right wall"), r.named("top wall")
    gb = r.touch_starts(G, B)
    out = {}
    out["a01"] = r.touching_at(G, B, r.frame(1.0)) and bool(gb) and not r.contact(R, G)
    out["a02"] = bool(gb) and not r.contact(R, G, *r.lo_hi(0, 0.2))
    wall = r.touch_starts(G, LW)
    out["a03"] = bool(wall) and any(f > wall[0] for f in r.touch_starts(R, G)) and not r.contact(G, RW)
    out["a04"] = bool(gb) and bool(r.touch_starts(G, R)) and not r.contact(R, B)
    red_first = r.touch_starts(R, G + B)
    out["a05"] = len(gb) == 1 and not (red_first and red_first[0] < gb[0])
    out["a06"] = r.gap(R, B, *r.lo_hi(0.4, 0.6)) <= NEAR and not r.contact(R, B)
    rg, rb = len(r.touch_starts(R, G)), len(r.touch_starts(R, B))
    out["a07"] = rg == rb and rg >= 1 and rb >= 1
    rests = r.rest_starts_on_ground(r.red)
    out["a08"] = bool(gb) and bool(rests) and rests[0] < gb[0]
    everyone = list(range(trace.num_bodies))
    out["a09"] = (r.knocks(r.red, G, B) == 1 and len(r.touch_starts(R, everyone)) == 1
                  and len(r.touch_starts(R, G)) == 1)
    out["a10"] = bool(gb) and not r.contact(everyone, LW + RW + TW)
    return out
