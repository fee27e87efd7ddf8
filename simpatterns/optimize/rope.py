"""A rope task as an action-search objective: annealing over a few pushes.

`RopeObjective` is the rope world's counterpart of `Objective` (PHYRE): an
action is ``pushes`` KnotGym actions in a row, each six numbers in [0, 1]
(mapped to the environment's [-1, 1]: the point, then the force), so the
searches of `simpatterns.optimize.search` run on it unchanged (they read
``action_dim``). A rollout starts from ``start`` (bead positions, or an index
into a shipped split), applies the pushes, and is recorded as a `Trace` that
ends with the final state; it is scored by a reward program over rope
patterns (``reward="score"`` or ``"success"``), or by a goal test on the
trace (``"goal"``; ``goal_code`` builds the usual one: the final Gauss code
equals a target's, up to start bead and direction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.optimize.objective import Evaluation
from simpatterns.simulators.mujoco.knot import GaussCode, diagram
from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld
from simpatterns.simulators.mujoco.tasks import load_configurations
from simpatterns.trace import Trace

REWARDS = ("score", "success", "goal")
ACTION_NUMBERS = 6  # per push: point x, y, z, force x, y, z


def final_code(trace: Trace) -> GaussCode:
    """The Gauss code of the rope in the trace's last frame."""
    beads = trace.meta["ropes"][0]["bodies"]
    return diagram(trace.position[-1, beads]).code


def code_goal(code: GaussCode | str, mirror: bool = False) -> Callable[[Trace], bool]:
    """A goal test: the rope's final Gauss code is ``code`` (any start bead and direction)."""
    target = GaussCode.parse(code) if isinstance(code, str) else code
    return lambda trace: final_code(trace).same_as(target, mirror)


@dataclass
class RopeObjective:
    """Maximise ``reward`` over ``pushes`` rope actions from ``start`` (see the module docstring).

    ``start``: bead positions ``[beads, 3]`` or an index into ``split``'s shipped
    configurations. ``program``: reward-program text over the 3D library's
    patterns (``library`` a `PatternLibrary.to_spec`, None for ``builtin:3d``).
    """

    start: Any
    program: str | None = None
    reward: str = "score"
    goal: Callable[[Trace], bool] | None = None
    pushes: int = 3
    split: str = "train"
    record_stride: int = 8
    library: list | None = None
    config: RopeConfig = field(default_factory=RopeConfig)
    _runtime: Any = field(default=None, init=False, repr=False, compare=False)
    _world: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if self.reward in ("score", "success") and self.program is None:
            raise ValueError(f"reward {self.reward!r} needs a reward program")
        if self.reward == "goal" and self.goal is None:
            raise ValueError("reward 'goal' needs a goal test (e.g. code_goal('1O+ 1U+'))")
        if self.pushes < 1:
            raise ValueError(f"pushes must be >= 1, got {self.pushes}")
        if isinstance(self.start, (int, np.integer)):
            self.start = load_configurations(self.split).positions[int(self.start)]
        self.start = np.asarray(self.start, dtype=np.float64)
        if self.start.shape != (self.config.beads, 3):
            raise ValueError(f"start must be bead positions [{self.config.beads}, 3], got {self.start.shape}")
        if self.program is not None:
            _ = self.reward_program  # compile now: a bad program fails here, not in a worker

    @property
    def action_dim(self) -> int:
        return ACTION_NUMBERS * self.pushes

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_runtime"] = state["_world"] = None  # rebuilt in each process
        return state

    @property
    def reward_program(self):
        """The compiled `RewardProgram`, checked against the rope's bead names (built
        on first use in each process; None without a program)."""
        if self.program is None:
            return None
        if self._runtime is None:
            from simpatterns.detectors.library import PatternLibrary
            from simpatterns.dsl import RewardProgram, builtin_library
            from simpatterns.simulators.mujoco.model import describe_bodies

            lib = builtin_library("3d") if self.library is None else PatternLibrary.from_spec(self.library)
            program = RewardProgram.coerce(self.program, lib)
            program.require_bodies([b.name for b in describe_bodies(self.world.model).bodies], "rope")
            self._runtime = program
        return self._runtime

    @property
    def world(self) -> RopeWorld:
        if self._world is None:
            self._world = RopeWorld(self.config)
        return self._world

    def check(self, action: Sequence[float]) -> str | None:
        """None if ``action`` has ``action_dim`` finite numbers in [0, 1], else why not."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (self.action_dim,):
            return f"expected {self.action_dim} numbers ({self.pushes} pushes x 6), got shape {a.shape}"
        if not np.isfinite(a).all() or (a < 0).any() or (a > 1).any():
            return "action numbers must be finite and in [0, 1]"
        return None

    def rollout(self, action: Sequence[float]) -> Trace | None:
        if self.check(action) is not None:
            return None
        w = self.world
        w.set_positions(self.start)
        w.start_recording(self.record_stride, {"simulator": "mujoco rope", "action": [float(v) for v in action]})
        for push in np.asarray(action, dtype=np.float64).reshape(self.pushes, ACTION_NUMBERS):
            w.act(2.0 * push - 1.0)
        return w.trace()

    def score_trace(self, trace: Trace) -> tuple[float, bool, bool]:
        """(score, reward success, goal success) of a rollout."""
        if self.reward in ("score", "success"):
            res = self.reward_program.evaluate(None, trace)
            ok = bool(res.success)
            score = res.score if self.reward == "score" else float(ok)
        else:
            assert self.goal is not None
            ok = bool(self.goal(trace))
            score = float(ok)
        goal_ok = bool(self.goal(trace)) if self.goal is not None else ok
        return float(score), bool(ok), goal_ok

    def evaluate(self, action: Sequence[float]) -> Evaluation:
        a = [float(v) for v in action]
        trace = self.rollout(a)
        if trace is None:
            return Evaluation(a, 0.0, False, False, 0)
        score, ok, goal_ok = self.score_trace(trace)
        return Evaluation(a, score, ok, goal_ok, trace.num_frames)
