"""PHYRE 0.2.2's ball-tier action mapper: scaling, the inside-the-scene check, pixel snapping, sampling.

PHYRE scales an action (x, y, r) in [0, 1]^3 to a ball at ``x * 255``, ``y * 255`` with
radius ``2 + 30 r`` px, calls it valid when the ball lies inside the 256 x 256 scene
(before snapping), then snaps it: the centre is truncated to whole pixels and the radius
rounded (half to even, Python's ``round``). Overlap with scene bodies is decided per task
by the simulator, not here. `sample` draws from the caller's ``RandomState`` exactly as
PHYRE does, so a seed gives PHYRE's actions bit for bit.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simpatterns.simulators.phyre.physics import ACTION_MIN_RADIUS, ACTION_POSITION_SCALE, ACTION_RADIUS_RANGE

SCENE_WIDTH = SCENE_HEIGHT = 256
MIN_RADIUS = 2
MAX_RADIUS = max(SCENE_WIDTH, SCENE_HEIGHT) // 8
# our simulator maps actions to pixels with PHYRE's scale; the snapped ball round-trips exactly
assert (ACTION_POSITION_SCALE, ACTION_MIN_RADIUS, ACTION_RADIUS_RANGE) == (
    SCENE_WIDTH - 1, MIN_RADIUS, MAX_RADIUS - MIN_RADIUS)


class DimensionType(enum.IntEnum):
    """Kind of each action component (PHYRE's enum)."""

    POSITION = 0
    SIZE = 1
    ANGLE = 2


@dataclass(frozen=True)
class Ball:
    """The user's ball in scene pixels, as PHYRE simulates it (snapped)."""

    x: float
    y: float
    radius: float

    def to_action(self) -> np.ndarray:
        """The action our simulator turns into exactly this ball."""
        return np.array([self.x / ACTION_POSITION_SCALE, self.y / ACTION_POSITION_SCALE,
                         (self.radius - ACTION_MIN_RADIUS) / ACTION_RADIUS_RANGE])


def scale(actions: np.ndarray) -> np.ndarray:
    """``[..., 3]`` actions -> ``[..., 3]`` ball (x, y, radius) in pixels, unsnapped, in PHYRE's arithmetic."""
    a = np.asarray(actions, dtype=np.float64)
    return np.stack([a[..., 0] * (SCENE_WIDTH - 1 - 0) + 0, a[..., 1] * (SCENE_HEIGHT - 1 - 0) + 0,
                     a[..., 2] * (MAX_RADIUS - MIN_RADIUS) + MIN_RADIUS], axis=-1)


def is_valid(actions: np.ndarray) -> np.ndarray:
    """PHYRE's ``action_to_user_input`` verdict per action: in [0, 1]^3 and the ball inside the scene."""
    a = np.asarray(actions, dtype=np.float64)
    if a.shape[-1] != 3:
        raise ValueError(f"ball-tier actions have 3 components (x, y, r), got shape {a.shape}")
    with np.errstate(invalid="ignore"):
        in_box = np.all((a >= 0) & (a <= 1), axis=-1)
        x, y, r = np.moveaxis(scale(a), -1, 0)
        inside = (r <= x) & (x <= SCENE_WIDTH - r) & (r <= y) & (y <= SCENE_HEIGHT - r)
    return in_box & inside


def snap(action: Sequence[float]) -> Ball | None:
    """The ball PHYRE simulates for ``action``, or None when PHYRE rejects the action outright."""
    a = np.asarray(action, dtype=np.float64).reshape(-1)
    if a.shape != (3,) or not bool(is_valid(a)):
        return None
    x, y, r = (float(v) for v in scale(a))
    return Ball(float(int(x)), float(int(y)), float(round(r)))


class SingleBallActionMapper:
    """PHYRE's ``ball`` tier: one ball, (x, y, r)."""

    OCCLUSIONS_ALLOWED = False
    KEEP_SPACE_AROUND_BODIES = False
    DIMENSION_TYPES = (DimensionType.POSITION, DimensionType.POSITION, DimensionType.SIZE)

    def sample(self, valid_only: bool = True, rng: np.random.RandomState | None = None) -> np.ndarray:
        """A uniform draw from [0, 1]^3; with ``valid_only``, redrawn until the ball is inside the scene."""
        if rng is None:
            rng = np.random.RandomState()
        while True:
            action = rng.uniform(size=len(self.DIMENSION_TYPES))
            if not valid_only or bool(is_valid(action)):
                return action

    def action_to_user_input(self, action: Sequence[float]) -> tuple[Ball | None, bool]:
        """``(ball, is_valid)``: the snapped ball (None when invalid), as PHYRE's mapper answers."""
        ball = snap(action)
        return ball, ball is not None


ACTION_MAPPERS = {"ball": SingleBallActionMapper}
MAIN_ACITON_MAPPERS = frozenset(ACTION_MAPPERS)  # PHYRE's spelling


def get_action_mapper(name: str) -> SingleBallActionMapper:
    if name not in ACTION_MAPPERS:
        raise ValueError(f"no action tier {name!r} here; tiers: {', '.join(ACTION_MAPPERS)}")
    return ACTION_MAPPERS[name]()
