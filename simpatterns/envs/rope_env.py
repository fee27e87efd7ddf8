"""`KnotRopeEnv`: KnotGym's rope-and-knot tasks on our MuJoCo rope world.

Registered as ``simpatterns/KnotRope-v0`` (``max_episode_steps=50``, as in
KnotGym). Each episode draws a start and a goal configuration of the task
from the shipped split; every step applies one KnotGym action (a point
snapped to the nearest bead, a force held for the frame skip) and the knot
oracle reads the rope's Gauss code. See ``docs/readme/mujoco.md`` for the
user guide and the comparison with KnotGym.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simpatterns.envs.reward import REWARD_KINDS, ProgramReward, RewardResult
from simpatterns.simulators.mujoco.knot import GaussCode, diagram
from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld
from simpatterns.simulators.mujoco.tasks import SPLITS, TASK_NAMES, KnotTask, load_configurations
from simpatterns.trace import Trace

OBS_MODES = ("rgb", "state")
REWARD_MODES = ("sparse", "program")
RENDER_MODES = ["rgb_array", "ansi"]
GOAL_CACHE = 64  # goal images kept (LRU)


class KnotRopeEnv(gym.Env):
    """Manipulate a rope loop until its Gauss code matches the goal's.

    Task: ``task`` ("unknot", "tie", "convert") at difficulty ``crossings`` (an int,
    or a list drawn per episode) from ``split`` ("train" or "eval"); see
    `simpatterns.simulators.mujoco.tasks`. ``reset(options=...)`` may fix
    ``start``/``goal`` (an index into the split, or bead positions ``[beads, 3]``).

    Observations (``obs_mode``): ``"rgb"`` the top views of the rope and of the
    goal side by side, ``[image_size, 2 * image_size, 3]`` uint8 (KnotGym's
    layout); ``"state"`` bead positions ``[2, beads, 3]`` float32, the rope's and
    the goal's, each centred on its own centre.

    Actions: ``Box(-1, 1, (6,))``: ``a[:3]`` a point in the camera's view square
    around the rope's centre (x right, y up, z towards the camera), snapped to
    the nearest bead; ``a[3:]`` the force in units of ``max_force`` (its norm
    clipped to 1), held on that bead for ``frame_skip`` physics steps. Values
    outside [-1, 1] are clipped; an action with NaN is a no-op (the rope coasts)
    with ``info["invalid_reason"]``; a wrong shape raises ValueError.

    Rewards: ``"sparse"`` ``success_reward`` when the Gauss code matches the goal's
    (the episode then terminates), else 0, and ``timeout_penalty`` added on step
    ``horizon`` when still unsolved (KnotGym: +5 and -5; the registered time limit is 50 steps, pass
    ``horizon`` too when changing ``max_episode_steps``); ``"program"`` a
    reward program over the episode's trace so far (dense score or 0/1 success,
    ``program_reward``), read with the 3D pattern library.

    Success: the codes match up to the start bead and the direction of travel
    (``mirror=True`` also accepts the mirror image); ``strict=True`` compares the
    codes read from bead 0, as KnotGym does.

    ``info``: ``is_success`` (the reward's success), ``task_success`` (the Gauss
    code test), ``crossings``, ``gauss_code``, ``goal_crossings``,
    ``goal_gauss_code``, ``bead`` and ``force`` (the push), ``invalid_reason``,
    ``unstable``, ``reward/success`` (sparse) or ``program_score`` and
    ``reward/<clause>`` (program); ``annotation_text`` with ``annotate=True``
    (default with ``render_mode="ansi"``). ``env.unwrapped.last_trace`` is the
    episode's `Trace` so far (every ``record_stride``-th physics step).
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 5}

    def __init__(
        self,
        task: str = "unknot",
        crossings: int | list[int] = 2,
        split: str = "train",
        obs_mode: str = "rgb",
        reward_mode: str = "sparse",
        reward_program: Any = None,
        program_reward: str = "score",
        render_mode: str | None = None,
        image_size: int = 128,
        strict: bool = False,
        mirror: bool = False,
        success_reward: float = 1.0,
        timeout_penalty: float = 0.0,
        horizon: int = 50,
        record_stride: int = 8,
        annotate: bool | None = None,
        library: Any = None,
        text_budget: int = 4000,
        config: RopeConfig | None = None,
    ):
        super().__init__()
        if task not in TASK_NAMES:
            raise ValueError(f"task must be one of {TASK_NAMES}, got {task!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        if program_reward not in REWARD_KINDS:
            raise ValueError(f"program_reward must be one of {REWARD_KINDS}, got {program_reward!r}")
        if reward_mode == "program" and reward_program is None:
            raise ValueError("reward_mode='program' needs reward_program (text, .rwd path or RewardProgram)")
        if reward_mode == "sparse" and reward_program is not None:
            raise ValueError("reward_program given with reward_mode='sparse'; use reward_mode='program'")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}")
        if image_size < 16 or record_stride < 1 or horizon < 1:
            raise ValueError("image_size must be >= 16, record_stride and horizon >= 1")
        self.task = KnotTask.make(task, crossings)
        self.split = split
        self.configs = load_configurations(split)
        self.task.sample(self.configs, np.random.default_rng(0))  # fails now if the split lacks a level
        self.obs_mode, self.reward_mode, self.render_mode = obs_mode, reward_mode, render_mode
        self.image_size = int(image_size)
        self.strict, self.mirror = bool(strict), bool(mirror)
        self.success_reward, self.timeout_penalty = float(success_reward), float(timeout_penalty)
        self.horizon = int(horizon)
        self.record_stride = int(record_stride)
        self.annotate = (render_mode == "ansi") if annotate is None else bool(annotate)
        self.text_budget = int(text_budget)
        self.world = RopeWorld(config or RopeConfig())
        self._library = library
        self.program: ProgramReward | None = None
        if reward_mode == "program":
            self.program = ProgramReward(reward_program, program_reward, self.library)
        n = self.world.num_beads
        if obs_mode == "rgb":
            self.observation_space = spaces.Box(0, 255, (self.image_size, 2 * self.image_size, 3), np.uint8)
        else:
            # every bead lies within half the rope's length of its centre; stretched edges get slack
            reach = float(n * self.world.config.spacing)
            self.observation_space = spaces.Box(-reach, reach, (2, n, 3), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        self._renderer: Any = None
        self._goal_images: OrderedDict[Any, np.ndarray] = OrderedDict()
        self.goal_positions: np.ndarray | None = None
        self.goal_code: GaussCode | None = None
        self.start_index: int | None = None
        self.goal_index: int | None = None
        self.code = GaussCode()
        self.num_steps = 0
        self._trace: Trace | None = None
        self.last_annotation = None
        self._last_push: tuple[int, np.ndarray] | None = None
        self._success = False

    # ------------------------------------------------------------ helpers
    @property
    def library(self):
        if self._library is None:
            from simpatterns.detectors.library import PatternLibrary

            self._library = PatternLibrary.builtin("3d")
        return self._library

    @property
    def renderer(self):
        if self._renderer is None:
            from simpatterns.simulators.mujoco.render import RopeRenderer

            self._renderer = RopeRenderer(self.world, self.image_size, self.image_size)
        return self._renderer

    @property
    def last_trace(self) -> Trace | None:
        """The episode's trace so far (None before the first step)."""
        if self._trace is None and self.num_steps > 0 and self.world.recorder is not None:
            self._trace = self.world.trace({"task": self.task.name, "goal": self._goal_text(),
                                            "start_index": self.start_index, "goal_index": self.goal_index})
        return self._trace

    def _goal_text(self) -> str:
        code = self.goal_code.text if self.goal_code and self.goal_code.entries else "no crossings (a simple loop)"
        return f"make the rope's Gauss code {code}"

    def _pick(self, value: Any, role: str) -> tuple[np.ndarray, int | None]:
        if isinstance(value, (int, np.integer)):
            if not 0 <= int(value) < len(self.configs):
                raise ValueError(f"reset option {role!r}: index {value} outside [0, {len(self.configs)})")
            return self.configs.positions[int(value)], int(value)
        p = np.asarray(value, dtype=np.float64)
        if p.shape != (self.world.num_beads, 3) or not np.isfinite(p).all():
            raise ValueError(f"reset option {role!r}: expected an index or finite positions "
                             f"[{self.world.num_beads}, 3], got shape {p.shape}")
        return p, None

    def _goal_image(self) -> np.ndarray:
        key = self.goal_index if self.goal_index is not None else self.goal_positions.tobytes()
        img = self._goal_images.get(key)
        if img is None:
            img = self.renderer.render(self.goal_positions)
            self._goal_images[key] = img
            if len(self._goal_images) > GOAL_CACHE:
                self._goal_images.popitem(last=False)
        else:
            self._goal_images.move_to_end(key)
        return img

    def _observe(self) -> np.ndarray:
        if self.obs_mode == "rgb":
            return np.concatenate([self.renderer.render(), self._goal_image()], axis=1)
        p = self.world.positions()
        g = self.goal_positions
        obs = np.stack([p - p.mean(axis=0), g - g.mean(axis=0)]).astype(np.float32)
        return np.clip(obs, self.observation_space.low, self.observation_space.high)

    def _read_code(self) -> GaussCode:
        return diagram(self.world.positions()).code

    def _matches(self, code: GaussCode) -> bool:
        assert self.goal_code is not None
        if self.strict:
            return code.text == self.goal_code.text
        return code.same_as(self.goal_code, self.mirror)

    # ------------------------------------------------------------ Gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"start", "goal"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; use start and goal")
        start_i, goal_i = self.task.sample(self.configs, self.np_random)
        start, self.start_index = self._pick(options.get("start", start_i), "start")
        self.goal_positions, self.goal_index = self._pick(options.get("goal", goal_i), "goal")
        self.goal_code = (self.configs.code(self.goal_index) if self.goal_index is not None
                          else diagram(self.goal_positions).code)
        self.world.set_positions(start)
        self.world.start_recording(self.record_stride, {"simulator": "mujoco rope", "description": "rope loop"})
        self.code = self._read_code()
        self.num_steps = 0
        self._trace = None
        self.last_annotation = None
        self._last_push = None
        self._success = self._matches(self.code)
        info = {"task": self.task.name, "start_index": self.start_index, "goal_index": self.goal_index,
                "crossings": self.code.num_crossings, "gauss_code": self.code.text,
                "goal_crossings": self.goal_code.num_crossings, "goal_gauss_code": self.goal_code.text,
                "is_success": self._success, "task_success": self._success}
        return self._observe(), info

    def step(self, action: Any):
        if self.goal_code is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"action must be 6 numbers (point x, y, z, force x, y, z), got {action!r}") from exc
        if a.shape != (6,):
            raise ValueError(f"action must have shape (6,) = (point x, y, z, force x, y, z), got shape {a.shape}")
        reason = ""
        if not np.isfinite(a).all():
            reason = "action contains NaN or infinity: no force applied this step"
            self.world.settle(self.world.config.frame_skip)
            bead, force = -1, np.zeros(3)
        else:
            a = np.clip(a, -1.0, 1.0)
            bead = self.world.act(a)
            f = a[3:]
            norm = float(np.linalg.norm(f))
            force = (f / norm if norm > 1 else f) * self.world.config.max_force
        self.num_steps += 1
        self._trace = None
        self.last_annotation = None
        self._last_push = (bead, force)
        unstable = self.world.unstable()
        if not unstable:
            self.code = self._read_code()
        ok = (not unstable) and self._matches(self.code)
        self._success = ok
        info: dict[str, Any] = {
            "task": self.task.name, "crossings": self.code.num_crossings, "gauss_code": self.code.text,
            "goal_crossings": self.goal_code.num_crossings, "goal_gauss_code": self.goal_code.text,
            "bead": bead, "force": force, "invalid_reason": reason, "unstable": unstable, "task_success": ok,
        }
        timed_out = self.num_steps == self.horizon
        annotation = None
        if self.annotate:
            from simpatterns.annotate.annotator import annotate

            annotation = annotate(self.last_trace, self.library)
            self.last_annotation = annotation
            info["annotation_text"] = self._text()
        if self.program is not None:
            result = self.program(self.last_trace, annotation)
            self.last_annotation = result.annotation if annotation is None else annotation
            info["program_score"] = result.score
            info.update(result.clauses)
            terminated = result.success or unstable
        else:
            result = RewardResult(self.success_reward if ok else 0.0, ok, float(ok))
            terminated = ok or unstable
            if timed_out and not ok:
                result = RewardResult(result.reward + self.timeout_penalty, False, 0.0)
            info["reward/success"] = result.reward
        info["is_success"] = result.success
        obs = self._observe() if not unstable else np.zeros(self.observation_space.shape, self.observation_space.dtype)
        return obs, float(result.reward), bool(terminated), False, info

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode to the env")
            return None
        if self.goal_code is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        if self.render_mode == "ansi":
            return self._text()
        return np.concatenate([self.renderer.render(), self._goal_image()], axis=1)

    def _text(self) -> str:
        """What an LLM reads: the task, both Gauss codes, the last push and the episode's events."""
        assert self.goal_code is not None
        def code(c: GaussCode) -> str:
            n = c.num_crossings
            return f"{c.text} ({n} crossing{'s' if n != 1 else ''})" if n else "no crossings (a simple loop)"

        t = self.task
        lines = [
            f"Rope loop of {self.world.num_beads} beads (bead 0 to bead {self.world.num_beads - 1}), seen from above; "
            f"task {t.name}: from {'/'.join(map(str, t.start_crossings))} to "
            f"{'/'.join(map(str, t.goal_crossings))} crossings; step {self.num_steps}",
            f"Gauss code now: {code(self.code)}",
            f"Goal Gauss code: {code(self.goal_code)}",
            "Success: " + ("yes" if self._success else "no"),
        ]
        if self._last_push is not None:
            bead, force = self._last_push
            lines.append("Last action: " + ("none (invalid)" if bead < 0 else
                         f"force ({', '.join(f'{v:.3f}' for v in force)}) N on bead {bead}"))
        trace = self.last_trace
        if trace is not None:
            from simpatterns.annotate.annotator import annotate
            from simpatterns.annotate.text import timeline_text

            if self.last_annotation is None or set(self.last_annotation.patterns) != set(self.library.labels):
                self.last_annotation = annotate(trace, self.library)
            lines += ["", timeline_text(trace, self.last_annotation, self.text_budget)]
        return "\n".join(lines)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
