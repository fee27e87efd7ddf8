"""Per-frame facts of one trace that every gold answer reads, computed once.

All definitions come from `simpatterns.detectors.thresholds.Thresholds` (shared
with the built-in detectors): contact = the simulator's contact rows (a pair
"touches" or "collides" in a frame when it has a contact row there; gaps of
at most ``contact_merge_frames`` between two contacts are flicker and count
as touching), moving /
at rest, free fall, ground, walls, static obstacles. Arrays are numpy and
vectorised over frames and bodies; a trace has a handful of bodies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simpatterns.detectors.thresholds import THRESHOLDS, Thresholds
from simpatterns.trace import Trace, runs_of_true

# PHYRE colour roles: the words of the templates' {red/green/blue} slots
ROLE_OF_COLOUR = {"red": "agent", "green": "goal_object", "blue": "goal_subject"}


def long_runs(mask: np.ndarray, min_frames: int) -> np.ndarray:
    """``mask`` with its runs of True shorter than ``min_frames`` set to False (1-D)."""
    out = np.zeros(mask.shape, dtype=bool)
    for s, e in runs_of_true(mask):
        if e - s + 1 >= min_frames:
            out[s:e + 1] = True
    return out


def merge_flicker(trace: Trace, gap: int) -> np.ndarray:
    """The touching matrix ``[T, N, N]`` with gaps of at most ``gap`` frames between two contacts of a
    pair filled (they did not separate)."""
    touch = np.array(trace.touching_matrix())
    if gap <= 0 or trace.num_contacts == 0:
        return touch
    pairs = np.unique(np.stack([trace.contact_a, trace.contact_b], axis=1), axis=0)
    for a, b in pairs.tolist():
        col = touch[:, a, b]
        for s, e in runs_of_true(~col):
            if s > 0 and e < col.size - 1 and e - s + 1 <= gap:
                touch[s:e + 1, a, b] = touch[s:e + 1, b, a] = True
    return touch


@dataclass
class TraceFacts:
    """Facts of ``trace`` under ``thresholds``; see the module docstring."""

    trace: Trace
    thresholds: Thresholds = field(default_factory=lambda: THRESHOLDS)

    def __post_init__(self) -> None:
        tr, th = self.trace, self.thresholds
        self.names = tr.names
        self.T, self.N = tr.num_frames, tr.num_bodies
        self.dt = tr.dt
        self.touch = merge_flicker(tr, th.contact_merge_frames)  # [T, N, N] symmetric
        self.dynamic = tr.dynamic_mask
        border = np.array([b.role == th.wall_role for b in tr.bodies], dtype=bool)
        self.ground = border & np.array([b.name in th.ground_names for b in tr.bodies], dtype=bool)
        self.wall = border & ~self.ground
        self.border = border
        self.static_obstacle = ~self.dynamic & ~border
        speed = tr.speed()  # [T, N]
        spin = np.abs(tr.angular_velocity) if tr.angular_velocity.ndim == 2 else np.linalg.norm(
            tr.angular_velocity, axis=-1)
        at_rest = (speed < th.rest_speed) & (spin < th.rest_spin)
        self.moving_body = self.dynamic[None, :] & ~at_rest  # [T, N]
        all_rest = at_rest[:, self.dynamic].all(axis=1) if self.dynamic.any() else np.ones(self.T, bool)
        self.no_motion = long_runs(all_rest, max(1, round(th.rest_min_seconds / self.dt)))  # [T]
        free = ~self.touch.any(axis=2)  # [T, N]: touches nothing
        need = max(1, round(th.free_fall_min_seconds / self.dt))
        self.free_fall = np.zeros_like(free)
        for i in np.flatnonzero(self.dynamic):
            self.free_fall[:, i] = long_runs(free[:, i], need)
        step = np.linalg.norm(np.diff(tr.position, axis=0), axis=-1) if self.T > 1 else np.zeros((0, self.N))
        self.travel = step.sum(axis=0)  # [N] px
        self.max_speed = speed.max(axis=0) if self.T else np.zeros(self.N)

    # ------------------------------------------------------------------ bodies
    def index(self, name: str) -> int:
        return self.trace.body_index(name)

    def role_body(self, colour: str) -> int | None:
        """The body playing the role of a template colour (red, green, blue), if present."""
        found = self.trace.find_bodies(role=ROLE_OF_COLOUR[colour])
        return found[0] if found else None

    def objects(self) -> list[int]:
        """Bodies that are not the scene border."""
        return [i for i in range(self.N) if not self.border[i]]

    # ----------------------------------------------------------------- contacts
    def contact_with(self, i: int, mask: np.ndarray) -> np.ndarray:
        """``[T]``: body i touches any body selected by the boolean ``mask`` [N] (never itself)."""
        m = mask.copy()
        m[i] = False
        return self.touch[:, i, m].any(axis=1)

    def dynamic_pair_contact(self) -> np.ndarray:
        """``[T]``: some two dynamic bodies touch."""
        d = self.dynamic
        return self.touch[:, d][:, :, d].any(axis=(1, 2))

    def percent(self, mask: np.ndarray) -> float:
        """Percentage of frames where ``mask`` [T] holds, rounded to 0.1."""
        return round(100.0 * float(np.count_nonzero(mask)) / max(1, self.T), 1)

    def contact_starts(self, i: int) -> list[tuple[int, int]]:
        """(frame, partner) of every contact start of body i at frame >= 1 (a pair not touching
        in the frame before), sorted; contacts already present at frame 0 are not starts."""
        t = self.touch[:, i, :]
        new = t[1:] & ~t[:-1]
        frames, partners = np.nonzero(new)
        return sorted(zip((frames + 1).tolist(), partners.tolist()))

    def frame_of(self, seconds: float) -> int:
        return int(np.clip(round(seconds / self.dt), 0, self.T - 1))
