"""The physical thresholds the built-in detectors and the Q&A answers share.

One configuration, so "moving", "at rest", "free fall", "the ground", "a
wall" and "a static obstacle" mean the same thing in an annotation and in a
question's gold answer. Values are in scene units (PHYRE: pixels, y up,
seconds). Built-in detector files may import only numpy and math, so each
built-in that uses one of these values carries it as a module constant;
`BUILTIN_CONSTANTS` says which constant is which field, and a test asserts
they are equal (tests/detectors/test_thresholds.py): change a value here and
in those files together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Thresholds:
    """What the words of the questions and the patterns mean, numerically.

    - ``rest_speed`` (px/s), ``rest_spin`` (rad/s): a dynamic body is *at rest*
      in a frame when its speed is below ``rest_speed`` and its spin below
      ``rest_spin``; otherwise it is *moving*. Resting contacts jitter below
      0.1 px/s; at 1 px/s a body needs 25 s to cross a tenth of the scene.
    - ``rest_min_seconds``: *no object is moving* only in a stretch of at least
      this long in which every dynamic body is at rest (the top of a bounce is
      not rest); the "global rest" pattern uses the same rule.
    - ``free_fall_min_seconds``: a body is in *free fall* (airborne) in a frame
      when it touches nothing, in a stretch of at least this long without any
      contact (shorter gaps are the chatter of an impact); as "airborne".
    - ``contact_merge_frames``: two bodies apart for at most this many frames
      between two contacts have not separated (resting and rolling contacts
      flicker for a step or two): the gap counts as touching, and touching
      again after it is not a new collision.
    - ``ground_names``: the bodies that are *the ground* (PHYRE's bottom wall).
    - ``wall_role``: bodies with this role form the scene border; those that are
      not the ground are *walls* (left, right, top).
    - a *static obstacle* is any body that cannot move and is not part of the
      border (PHYRE's black bars and a fixed purple goal).
    """

    rest_speed: float = 1.0
    rest_spin: float = 0.1
    rest_min_seconds: float = 0.5
    free_fall_min_seconds: float = 1 / 6
    contact_merge_frames: int = 2
    ground_names: tuple[str, ...] = ("ground",)
    wall_role: str = "wall"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ground_names"] = list(self.ground_names)
        return d


THRESHOLDS = Thresholds()

# built-in detector file -> {module constant: Thresholds field it must equal}
BUILTIN_CONSTANTS: dict[str, dict[str, str]] = {
    "global_rest.py": {"REST_SPEED": "rest_speed", "REST_SPIN": "rest_spin", "MIN_SECONDS": "rest_min_seconds"},
    "comes_to_rest.py": {"REST_SPEED": "rest_speed", "REST_SPIN": "rest_spin", "MIN_SECONDS": "rest_min_seconds",
                         "MERGE_GAP": "contact_merge_frames"},
    "touch_start.py": {"MERGE_GAP": "contact_merge_frames"},
    "touch_end.py": {"MERGE_GAP": "contact_merge_frames"},
    "airborne.py": {"MIN_SECONDS": "free_fall_min_seconds"},
    "bonded_pair.py": {"MERGE_GAP": "contact_merge_frames"},
    "rolling_over.py": {"MERGE_GAP": "contact_merge_frames"},
    "support_relationship.py": {"MERGE_GAP": "contact_merge_frames"},
    "wedged_between_two_bodies.py": {"MERGE_GAP": "contact_merge_frames"},
    "stack_formed.py": {"REST_SPEED": "rest_speed", "REST_SPIN": "rest_spin"},
    "moving_hits_stationary.py": {"REST_SPEED": "rest_speed"},
    "post_collision_induced_motion.py": {"REST_SPEED": "rest_speed"},
    "tip_over.py": {"REST_SPEED": "rest_speed"},
    "sliding_contact.py": {"STILL_SPEED": "rest_speed", "MERGE_GAP": "contact_merge_frames"},
    "sliding_to_rolling.py": {"STILL_SPEED": "rest_speed"},
}
