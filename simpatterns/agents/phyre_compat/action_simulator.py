"""PHYRE's ``ActionSimulator`` (ball tier) over our simulator and tasks."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from simpatterns.agents.metrics import SimulationStatus
from simpatterns.agents.phyre_compat.action_mappers import Ball, get_action_mapper
from simpatterns.agents.phyre_compat.simulation import FeaturizedObjects, Simulation, featurize
from simpatterns.agents.tasks import TIER, Task, normalize_task_id
from simpatterns.simulators.phyre import Scene, check_action, simulate
from simpatterns.simulators.phyre.render import render_color_codes
from simpatterns.trace import Trace

DEFAULT_STRIDE = 60  # PHYRE's FPS: one image per simulated second
SCENE_SIZE = 256
_NEIGHBOURS = [(dx, dy) for dx in (-0.5, 0.0, 0.5) for dy in (-0.5, 0.0, 0.5) if dx or dy]


def _run(scene: Scene, ball: Ball) -> Trace | None:
    """The full rollout of ``ball`` in ``scene``, or None when the ball overlaps a body or leaves
    the scene (PHYRE's occlusion check: its walls sit just outside the scene)."""
    action = ball.to_action()
    if check_action(scene, action) is not None:
        return None
    # a full run decides the status: the settle shortcut can call a creeping success a failure
    return simulate(scene, action).trace


class ActionSimulator:
    """Our simulator behind PHYRE's ``ActionSimulator`` interface (ball tier)."""

    def __init__(self, task_ids: Sequence[str], action_tier: str = TIER):
        if action_tier != TIER:
            raise ValueError(f"only the {TIER!r} action tier exists here, not {action_tier!r}")
        self.tier = action_tier
        self._action_mapper = get_action_mapper(action_tier)
        self._tasks = [Task.from_id(t) for t in task_ids]
        self._task_ids = tuple(normalize_task_id(t) for t in task_ids)
        self._initial: list[Trace] | None = None
        self._initial_scenes: np.ndarray | None = None

    @property
    def task_ids(self) -> tuple[str, ...]:
        return self._task_ids

    @property
    def action_space_dim(self) -> int:
        return len(self._action_mapper.DIMENSION_TYPES)

    @property
    def goals(self) -> None:
        return None

    def _initial_traces(self) -> list[Trace]:
        if self._initial is None:
            self._initial = [simulate(t.scene, None, max_steps=0).trace for t in self._tasks]
        return self._initial

    @property
    def initial_scenes(self) -> np.ndarray:
        """``int64 [tasks, 256, 256]`` colour codes of each initial scene, row 0 at the bottom
        (PHYRE's dtype: its agents hand it to ``torch.LongTensor``)."""
        if self._initial_scenes is None:
            self._initial_scenes = np.stack(
                [render_color_codes(tr, 0, SCENE_SIZE) for tr in self._initial_traces()]).astype(np.int64)
        return self._initial_scenes

    @property
    def initial_featurized_objects(self) -> list[FeaturizedObjects]:
        return [FeaturizedObjects(featurize(tr, [0])) for tr in self._initial_traces()]

    def sample(self, valid_only: bool = True, rng: np.random.RandomState | None = None) -> np.ndarray:
        """A random action in [0, 1]^3 from ``rng`` (a fresh ``RandomState`` by default); with
        ``valid_only``, one whose ball lies inside the scene (PHYRE's draw, bit for bit)."""
        return self._action_mapper.sample(valid_only=valid_only, rng=rng)

    def build_discrete_action_space(self, max_actions: int, seed: int = 1) -> list[np.ndarray]:
        """``max_actions`` valid actions from ``RandomState(seed)``: PHYRE's list for the same seed."""
        rng = np.random.RandomState(seed=seed)
        return [self.sample(rng=rng) for _ in range(max_actions)]

    def simulate_action(self, task_index: int, action: Sequence[float], *, need_images: bool = True,
                        need_featurized_objects: bool = False, stride: int = DEFAULT_STRIDE,
                        stable: bool = False) -> Simulation:
        """Simulate ``action`` on task ``task_index`` with the ball snapped to pixels as PHYRE does."""
        scene = self._tasks[task_index].scene
        ball, valid = self._action_mapper.action_to_user_input(action)
        trace = _run(scene, ball) if valid else None
        if trace is None:
            return Simulation(status=SimulationStatus.INVALID_INPUT)
        status = SimulationStatus.SOLVED if trace.success else SimulationStatus.NOT_SOLVED
        frames = list(range(0, trace.num_frames, max(1, int(stride))))
        images = np.stack([render_color_codes(trace, f, SCENE_SIZE) for f in frames]) if need_images else None
        features = featurize(trace, frames) if need_featurized_objects else None
        if stable and status.is_solved():
            # PHYRE shifts the snapped ball by half a pixel; only a valid, failing neighbour is unstable
            moved = (_run(scene, Ball(ball.x + dx, ball.y + dy, ball.radius)) for dx, dy in _NEIGHBOURS)
            unstable = any(tr is not None and not tr.success for tr in moved)
            status = SimulationStatus.UNSTABLY_SOLVED if unstable else SimulationStatus.STABLY_SOLVED
        return Simulation(status=status, images=images, featurized_objects=features)

    def simulate_single(self, task_index: int, action: Sequence[float], need_images: bool = True,
                        stride: int = DEFAULT_STRIDE, stable: bool = False
                        ) -> tuple[SimulationStatus, np.ndarray | None]:
        """PHYRE's deprecated form: ``(status, images)``."""
        sim = self.simulate_action(task_index, action, need_images=need_images, stride=stride, stable=stable)
        return sim.status, sim.images


def initialize_simulator(task_ids: Sequence[str], action_tier: str) -> ActionSimulator:
    """An `ActionSimulator` for ``task_ids`` (our tasks) in the ``"ball"`` tier."""
    return ActionSimulator(task_ids, action_tier)
