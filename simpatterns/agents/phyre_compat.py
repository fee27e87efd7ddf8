"""A ``phyre``-shaped entry point on our simulator, for code written against PHYRE 0.2.2.

Replace ``import phyre`` by ``import simpatterns.agents.phyre_compat as phyre``
and code like this runs on our tasks::

    train, dev, test = phyre.get_fold("ball_within_template", 0)
    simulator = phyre.initialize_simulator(test, "ball")
    evaluator = phyre.Evaluator(test)
    for i in range(len(test)):
        for action in simulator.build_discrete_action_space(max_actions=100):
            sim = simulator.simulate_action(i, action, need_images=False)
            evaluator.maybe_log_attempt(i, sim.status)
            if sim.status.is_solved() or evaluator.get_attempts_for_task(i) >= phyre.MAX_TEST_ATTEMPTS:
                break
    print(evaluator.get_auccess())

What is the same: the names and signatures below, task ids ``TTTTT:VVV``,
folds (PHYRE's fold code, on our task list: `simpatterns.agents.folds`),
`Evaluator` and AUCCESS (PHYRE's arithmetic), `SimulationStatus` codes, the
action space (x, y, r in [0, 1]; r maps to 2..32 px), invalid actions (the
ball overlaps a body or leaves the scene) returning ``INVALID_INPUT`` without
simulating, images as ``uint8`` colour codes (0 white, 1 red, 2 green, 3
blue, 4 purple, 5 gray, 6 black) with row 0 at the bottom, one every
``stride`` steps (default 60), and featurized objects (``T × N × 14``: x,
y, angle, diameter, shape one-hot, colour one-hot; the red ball last).

What differs (see the README's "Agents on PHYRE tasks"):

- the tasks are our variants on our pymunk simulator, not PHYRE's task list
  on Box2D: our variants are numbered 000-099 (PHYRE's ids index each
  template's grid), an id names a different scene, and outcomes differ;
- only the ``ball`` tier exists (no ``two_balls``, no virtual tools);
- ``initial_scenes`` and ``images`` are drawn by our renderer: edges can
  differ from PHYRE's rasteriser by a pixel; diameters of jars and sticks
  follow PHYRE's formulas on our geometry;
- ``goals`` is None (as PHYRE's default ``no_goals=True``); there is no
  simulation cache (``get_default_100k_cache``) and no ``vis`` module:
  `observations_to_uint8_rgb` and `observations_to_float_rgb` are here;
- ``stable=True`` shifts the ball by ±0.5 px in x and y, as PHYRE shifts
  its user input, and answers ``STABLY_SOLVED`` / ``UNSTABLY_SOLVED``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from simpatterns.agents.folds import EVAL_SETUPS, get_fold as _get_fold
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, SimulationStatus, as_status, compute_metrics
from simpatterns.agents.tasks import TIER, Task, normalize_task_id
from simpatterns.simulators.phyre import check_action, simulate
from simpatterns.simulators.phyre.physics import ACTION_POSITION_SCALE
from simpatterns.simulators.phyre.render import PALETTE, render_color_codes
from simpatterns.trace import Trace

ACTION_TIERS: tuple[str, ...] = (TIER,)
MAIN_EVAL_SETUPS: tuple[str, ...] = EVAL_SETUPS
SCENE_WIDTH = SCENE_HEIGHT = 256
NUM_COLORS = 7
DEFAULT_STRIDE = 60
OBJECT_FEATURE_SIZE = 14
_SHAPES = ("ball", "bar", "jar", "standingsticks")
_COLORS = ("red", "green", "blue", "purple", "gray", "black")
_RGB = np.array(list(PALETTE.values()), dtype=np.uint8)

__all__ = [
    "ACTION_TIERS", "ActionSimulator", "Evaluator", "FeaturizedObjects", "MAIN_EVAL_SETUPS", "MAX_TEST_ATTEMPTS",
    "NUM_COLORS", "SCENE_HEIGHT", "SCENE_WIDTH", "Simulation", "SimulationStatus", "eval_setup_to_action_tier",
    "get_fold", "initialize_simulator", "list_eval_setups", "observations_to_float_rgb",
    "observations_to_uint8_rgb",
]


def get_fold(eval_setup: str, seed: int) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(train_ids, dev_ids, test_ids)`` of the fold (our tasks; PHYRE's ids and split rules)."""
    fold = _get_fold(eval_setup, seed)
    return fold.train, fold.dev, fold.test


def list_eval_setups() -> tuple[str, ...]:
    return tuple(sorted(EVAL_SETUPS))


def eval_setup_to_action_tier(eval_setup_name: str) -> str:
    if eval_setup_name.startswith(TIER):
        return TIER
    raise ValueError(f"no action tier for eval setup {eval_setup_name!r}; setups here: {', '.join(EVAL_SETUPS)}")


# ------------------------------------------------------------------ featurized objects
def _diameter(shape: str, size: dict[str, float]) -> float:
    if shape == "ball":
        return 2.0 * size["radius"]
    if shape in ("bar", "standingsticks"):
        return math.hypot(size["length"], size["thickness"])
    if shape == "jar":
        return math.hypot((size["width"] - size["base_width"]) / 2.0 + size["base_width"], size["height"])
    if shape == "box":
        return math.hypot(size["width"], size["height"])
    return 0.0


def _features(trace: Trace, frames: Sequence[int]) -> np.ndarray:
    """``len(frames) × N × 14`` features of the non-wall bodies (the red ball last, as it is in traces)."""
    keep = [i for i, b in enumerate(trace.bodies) if b.role != "wall"]
    out = np.zeros((len(frames), len(keep), OBJECT_FEATURE_SIZE), dtype=np.float32)
    f = np.asarray(frames, dtype=np.intp)
    for j, i in enumerate(keep):
        b = trace.bodies[i]
        out[:, j, 0] = trace.position[f, i, 0] / SCENE_WIDTH
        out[:, j, 1] = trace.position[f, i, 1] / SCENE_HEIGHT
        out[:, j, 2] = np.mod(trace.angle[f, i], 2 * math.pi) / (2 * math.pi)
        out[:, j, 3] = _diameter(b.shape, b.size) / SCENE_WIDTH
        if b.shape in _SHAPES:
            out[:, j, 4 + _SHAPES.index(b.shape)] = 1.0
        out[:, j, 8 + _COLORS.index(b.color if b.color in _COLORS else "black")] = 1.0
    return out


class FeaturizedObjects:
    """PHYRE's featurisation: ``features`` is ``T × N × 14`` (see the module docstring)."""

    def __init__(self, featurized_objects: np.ndarray):
        f = np.asarray(featurized_objects)
        if f.ndim != 3 or f.shape[-1] != OBJECT_FEATURE_SIZE:
            raise ValueError(f"featurized objects must be T x N x {OBJECT_FEATURE_SIZE}, got {f.shape}")
        self.features = f
        self.xs, self.ys, self.angles = f[:, :, 0], f[:, :, 1], f[:, :, 2]
        self.diameters = f[0, :, 3]
        self.shapes_one_hot = f[0, :, 4:8]
        self.colors_one_hot = f[0, :, 8:14]
        self.states = f[:, :, 0:3]

    @property
    def shapes(self) -> list[str]:
        return [_SHAPES[k].upper() for k in np.argmax(self.shapes_one_hot, axis=1)]

    @property
    def colors(self) -> list[str]:
        return [_COLORS[k].upper() for k in np.argmax(self.colors_one_hot, axis=1)]

    @property
    def num_objects(self) -> int:
        return self.features.shape[1]

    @property
    def num_user_inputs(self) -> int:
        return sum(c == "RED" for c in self.colors)

    @property
    def num_scene_objects(self) -> int:
        return self.num_objects - self.num_user_inputs


class Simulation:
    """The result of `ActionSimulator.simulate_action`: ``status``, ``images``, ``featurized_objects``."""

    def __init__(self, *, status: SimulationStatus | None = None, images: np.ndarray | None = None,
                 featurized_objects: np.ndarray | None = None):
        self.status = status
        self.images = images
        self.featurized_objects = None if featurized_objects is None else FeaturizedObjects(featurized_objects)


# ------------------------------------------------------------------ the simulator
class ActionSimulator:
    """Our simulator behind PHYRE's ``ActionSimulator`` interface (ball tier)."""

    def __init__(self, task_ids: Sequence[str], action_tier: str = TIER):
        if action_tier != TIER:
            raise ValueError(f"only the {TIER!r} action tier exists here, not {action_tier!r}")
        self.tier = action_tier
        self._tasks = [Task.from_id(t) for t in task_ids]
        self._task_ids = tuple(normalize_task_id(t) for t in task_ids)
        self._initial: list[Trace] | None = None

    @property
    def task_ids(self) -> tuple[str, ...]:
        return self._task_ids

    @property
    def action_space_dim(self) -> int:
        return 3

    @property
    def goals(self) -> None:
        return None

    def _initial_traces(self) -> list[Trace]:
        if self._initial is None:
            self._initial = [simulate(t.scene, None, max_steps=0).trace for t in self._tasks]
        return self._initial

    @property
    def initial_scenes(self) -> np.ndarray:
        """``uint8 [tasks, 256, 256]`` colour codes of each initial scene, row 0 at the bottom."""
        return np.stack([render_color_codes(tr, 0, SCENE_WIDTH) for tr in self._initial_traces()])

    @property
    def initial_featurized_objects(self) -> list[FeaturizedObjects]:
        return [FeaturizedObjects(_features(tr, [0])) for tr in self._initial_traces()]

    def sample(self, valid_only: bool = True, rng: Any = None) -> np.ndarray:
        """A uniformly random action in [0, 1]^3 (``valid_only`` is PHYRE's flag; every point of
        the cube is a well-formed ball action, and overlap is decided per task when simulated)."""
        rng = rng if rng is not None else np.random
        return np.asarray(rng.uniform(size=3), dtype=np.float64)

    def build_discrete_action_space(self, max_actions: int, seed: int = 1) -> list[np.ndarray]:
        """``max_actions`` random actions from ``numpy.random.RandomState(seed)``."""
        rng = np.random.RandomState(seed=seed)
        return [self.sample(rng=rng) for _ in range(max_actions)]

    def simulate_action(self, task_index: int, action: Sequence[float], *, need_images: bool = True,
                        need_featurized_objects: bool = False, stride: int = DEFAULT_STRIDE,
                        stable: bool = False) -> Simulation:
        """Simulate ``action`` on task ``task_index``; see PHYRE's docs and the module docstring."""
        scene = self._tasks[task_index].scene
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        if check_action(scene, action) is not None:
            return Simulation(status=SimulationStatus.INVALID_INPUT)
        need_trace = need_images or need_featurized_objects
        # a full run decides the status: the settle shortcut can call a creeping success a failure
        rollout = simulate(scene, action)
        status = SimulationStatus.SOLVED if rollout.success else SimulationStatus.NOT_SOLVED
        images = features = None
        if need_trace:
            trace = rollout.trace
            frames = list(range(0, trace.num_frames, max(1, int(stride))))
            if need_images:
                images = np.stack([render_color_codes(trace, f, SCENE_WIDTH) for f in frames])
            if need_featurized_objects:
                features = _features(trace, frames)
        if stable and status.is_solved():
            status = SimulationStatus.STABLY_SOLVED
            for dx in (-0.5, 0.0, 0.5):
                for dy in (-0.5, 0.0, 0.5):
                    if dx == 0 and dy == 0:
                        continue
                    moved = action + np.array([dx, dy, 0.0]) / ACTION_POSITION_SCALE
                    if check_action(scene, moved) is None and not simulate(scene, moved).success:
                        status = SimulationStatus.UNSTABLY_SOLVED
                        break
                if status is SimulationStatus.UNSTABLY_SOLVED:
                    break
        return Simulation(status=status, images=images, featurized_objects=features)

    def simulate_single(self, task_index: int, action: Sequence[float], need_images: bool = True,
                        stride: int = DEFAULT_STRIDE, stable: bool = False):
        """PHYRE's deprecated form: ``(status, images)``."""
        sim = self.simulate_action(task_index, action, need_images=need_images, stride=stride, stable=stable)
        return sim.status, sim.images


def initialize_simulator(task_ids: Sequence[str], action_tier: str) -> ActionSimulator:
    """An `ActionSimulator` for ``task_ids`` (our tasks) in the ``"ball"`` tier."""
    return ActionSimulator(task_ids, action_tier)


# ------------------------------------------------------------------ evaluation
class AttemptLimitError(AssertionError):
    """More than MAX_TEST_ATTEMPTS valid attempts on one task (PHYRE raises AssertionError too)."""


class Evaluator:
    """Logs attempts and computes PHYRE's metrics, as ``phyre.Evaluator`` does."""

    def __init__(self, task_ids: Sequence[str]):
        self._task_ids = tuple(task_ids)
        self._log: list[tuple[str, SimulationStatus]] = []
        self.attempts_per_task_index = [0] * len(self._task_ids)

    def maybe_log_attempt(self, task_index: int, status: Any) -> bool:
        """Log a valid attempt (an invalid one is ignored: returns False)."""
        st = as_status(status)
        if st.is_invalid():
            return False
        if self.attempts_per_task_index[task_index] >= MAX_TEST_ATTEMPTS:
            raise AttemptLimitError(
                f"task {self._task_ids[task_index]} (index {task_index}) already has {MAX_TEST_ATTEMPTS} attempts, "
                "the most PHYRE's protocol allows")
        self._log.append((self._task_ids[task_index], st))
        self.attempts_per_task_index[task_index] += 1
        return True

    def compute_all_metrics(self) -> dict[str, Any]:
        return compute_metrics(self._log, len(self._task_ids))

    def get_auccess(self, attempts: int = MAX_TEST_ATTEMPTS) -> float:
        return self.compute_all_metrics()["independent_solved_by_aucs"][attempts]

    def get_aucess(self, attempts: int = MAX_TEST_ATTEMPTS) -> float:  # PHYRE's deprecated spelling
        return self.get_auccess(attempts)

    def get_attempts_for_task(self, task_index: int) -> int:
        return self.attempts_per_task_index[task_index]

    @property
    def task_ids(self) -> tuple[str, ...]:
        return self._task_ids

    def __len__(self) -> int:
        return len(self._log)


# ------------------------------------------------------------------ pictures
def observations_to_uint8_rgb(scene: np.ndarray, user_input: Sequence[tuple[int, int]] = (),
                              is_solved: bool | None = None) -> np.ndarray:
    """Colour codes -> an RGB image with row 0 at the top (for display), as PHYRE's ``vis`` does."""
    img = _RGB[np.asarray(scene)]
    for y, x in user_input:
        if 0 <= x < img.shape[1] and 0 <= y < img.shape[0]:
            img[x, y] = (255, 0, 0)
    img = img[::-1]
    if is_solved is not None:
        band = np.tile(np.array((11, 102, 35) if is_solved else (121, 6, 4), dtype=np.uint8), (5, img.shape[1], 1))
        img = np.concatenate([band, img], 0)
    return img


def observations_to_float_rgb(scene: np.ndarray, user_input: Sequence[tuple[int, int]] = (),
                              is_solved: bool | None = None) -> np.ndarray:
    return observations_to_uint8_rgb(scene, user_input, is_solved).astype(np.float64) / 255.0
