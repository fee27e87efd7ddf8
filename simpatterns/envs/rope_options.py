"""The options of `KnotRopeEnv`, in four small frozen groups (as `PhyreOneBallEnv`'s).

=============  ===============================================================
group          fields
=============  ===============================================================
task           ``task``, ``crossings``, ``split``: which configurations;
               ``strict``, ``mirror``: the success test; ``success_reward``,
               ``timeout_penalty``, ``horizon``: what the sparse reward pays
simulation     ``config`` (a `RopeConfig`: beads, forces, frame skip),
               ``record_stride``: every how many physics steps a trace frame
observation    ``obs_mode``, ``image_size``: what the agent sees
rendering      ``render_mode``, ``annotate`` (annotation text in ``info`` and
               the ``ansi`` render), ``text_budget``, ``library`` (the
               patterns of that text, the built-in 3D library by default)
=============  ===============================================================

Pass a group whole (``KnotRopeEnv(task=RopeTaskOptions(task="tie",
crossings=3))``) or its fields as flat keywords (``gym.make(ID, task="tie",
crossings=3, obs_mode="state")``); `route_options` puts them into their
groups and names an unknown keyword with the closest option. Each group
checks its values when built, so a bad value fails with one line naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simpatterns.simulators.mujoco.rope import RopeConfig
from simpatterns.simulators.mujoco.tasks import SPLITS, KnotTask

OBS_MODES = ("rgb", "state")
RENDER_MODES = ["rgb_array", "ansi"]


@dataclass(frozen=True)
class RopeTaskOptions:
    """Task ``task`` ("unknot", "tie", "convert") at difficulty ``crossings``
    (a count, or several drawn per episode) on the ``split`` ("train" or
    "eval") configurations. Success: the rope's Gauss code equals the goal's
    up to the start bead and the direction of travel (``mirror``: the mirror
    image too; ``strict``: read from bead 0, as KnotGym does). Sparse reward:
    ``success_reward`` on success, ``timeout_penalty`` added on step
    ``horizon`` when still unsolved (KnotGym: +5 and -5)."""

    task: str = "unknot"
    crossings: int | tuple[int, ...] = 2
    split: str = "train"
    strict: bool = False
    mirror: bool = False
    success_reward: float = 1.0
    timeout_penalty: float = 0.0
    horizon: int = 50

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if not np.isscalar(self.crossings):
            object.__setattr__(self, "crossings", tuple(int(c) for c in self.crossings))
        self.knot_task()  # the task name and crossing counts, checked now
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")

    def knot_task(self) -> KnotTask:
        return KnotTask.make(self.task, self.crossings)


@dataclass(frozen=True)
class RopeSimulationOptions:
    """The rope world (``config``, KnotGym's settings by default) and the
    trace it records: one frame every ``record_stride`` physics steps (a divisor
    of the frame skip, so that the trace after a step ends on the rope as it is)."""

    config: RopeConfig | None = None
    record_stride: int = 8

    def __post_init__(self) -> None:
        if self.config is not None and not isinstance(self.config, RopeConfig):
            raise ValueError(f"config must be a RopeConfig, got {type(self.config).__name__}")
        if self.record_stride < 1:
            raise ValueError(f"record_stride must be >= 1, got {self.record_stride}")
        skip = (self.config or RopeConfig()).frame_skip
        if skip % self.record_stride:  # else a step's trace would end before the state info describes
            raise ValueError(f"record_stride must divide the frame skip ({skip} physics steps per action), "
                             f"got {self.record_stride}")


@dataclass(frozen=True)
class RopeObservationOptions:
    """``obs_mode``: ``"rgb"`` (top views of the rope and of the goal,
    ``image_size`` pixels square each) or ``"state"`` (bead positions)."""

    obs_mode: str = "rgb"
    image_size: int = 128

    def __post_init__(self) -> None:
        if self.obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {self.obs_mode!r}")
        if self.image_size < 16:
            raise ValueError(f"image_size must be >= 16, got {self.image_size}")


@dataclass(frozen=True)
class RopeRenderOptions:
    """``render_mode`` (``"rgb_array"`` the observation's image, ``"ansi"``
    the Gauss codes and the annotation text, or None); ``annotate``: put the
    annotation (patterns of ``library``, the built-in 3D library by default)
    and its text (at most ``text_budget`` characters) in ``info`` after each
    step; None: on exactly with ``render_mode="ansi"``."""

    render_mode: str | None = None
    annotate: bool | None = None
    text_budget: int = 4000
    library: Any = None

    def __post_init__(self) -> None:
        if self.render_mode is not None and self.render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {self.render_mode!r}")

    @property
    def annotates(self) -> bool:
        return (self.render_mode == "ansi") if self.annotate is None else bool(self.annotate)


ROPE_GROUPS: dict[str, type] = {
    "task": RopeTaskOptions,
    "simulation": RopeSimulationOptions,
    "observation": RopeObservationOptions,
    "rendering": RopeRenderOptions,
}
