"""`KnotRopeEnv`: KnotGym's rope-and-knot tasks on our MuJoCo rope world.

Registered as ``simpatterns/KnotRope-v0`` (``max_episode_steps=50``, as in
KnotGym). Each episode draws a start and a goal configuration of the task
from the shipped split; every step applies one KnotGym action (a point
snapped to the nearest bead, a force held for the frame skip) and the knot
oracle reads the rope's Gauss code. See ``docs/guide/mujoco.md`` for the
user guide and the comparison with KnotGym.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simpatterns.envs.options import route_options
from simpatterns.envs.rope_options import (
    OBS_MODES,
    RENDER_MODES,
    ROPE_GROUPS,
    RopeObservationOptions,
    RopeRenderOptions,
    RopeSimulationOptions,
    RopeTaskOptions,
)
from simpatterns.simulators.mujoco.knot import GaussCode, diagram
from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld
from simpatterns.simulators.mujoco.tasks import load_configurations
from simpatterns.trace import Trace

GOAL_CACHE = 64  # goal images kept (LRU)

__all__ = ["OBS_MODES", "RENDER_MODES", "KnotRopeEnv"]


class KnotRopeEnv(gym.Env):
    """Manipulate a rope loop until its Gauss code matches the goal's.

    Options come in four groups (`simpatterns.envs.rope_options`): ``task``
    (`RopeTaskOptions`: ``task`` "unknot", "tie" or "convert" at difficulty
    ``crossings``, an int or a list drawn per episode, from ``split`` "train"
    or "eval"; the success test; the sparse reward), ``simulation``
    (`RopeSimulationOptions`), ``observation`` (`RopeObservationOptions`) and
    ``rendering`` (`RopeRenderOptions`). Each field may also be given as a
    flat keyword (``gym.make(ID, task="tie", crossings=3, obs_mode="state")``;
    a string ``task`` is the task's name). ``reset(options=...)`` may fix
    ``start``/``goal`` (an index into the split, or bead positions
    ``[beads, 3]``). See `simpatterns.simulators.mujoco.tasks`.

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

    Reward: ``success_reward`` when the Gauss code matches the goal's (the
    episode then terminates), else 0, and ``timeout_penalty`` added on step
    ``horizon`` when still unsolved (KnotGym: +5 and -5; the registered time
    limit is 50 steps, pass ``horizon`` too when changing
    ``max_episode_steps``). A reward program over the episode's trace replaces
    it through `RewardProgramWrapper` (compiled against this env's
    ``library``, the 3D one), the one way a program reaches an env.

    Success: the codes match up to the start bead and the direction of travel
    (``mirror=True`` also accepts the mirror image); ``strict=True`` compares the
    codes read from bead 0, as KnotGym does.

    ``info`` after reset: ``task``, ``goal`` (the goal in words),
    ``start_index``, ``goal_index``, ``crossings``, ``gauss_code``,
    ``goal_crossings``, ``goal_gauss_code``, ``is_success``, ``task_success``
    and ``bodies`` (the bead names a trace of this rope has). After a step:
    ``is_success`` and ``task_success`` (the Gauss code test), ``crossings``,
    ``gauss_code``, ``goal_crossings``, ``goal_gauss_code``, ``bead`` and
    ``force`` (the push), ``invalid_reason``, ``unstable``,
    ``reward/success``; with ``annotate`` (default when
    ``render_mode="ansi"``) ``annotation_text``, exactly what the ``ansi``
    render shows, and ``annotation``, the library's `Annotation` of the
    episode so far; with ``info_trace=True`` (the wrapper switches it on) the
    episode's `Trace` so far as ``info["trace"]`` (every ``record_stride``-th
    physics step; also ``env.unwrapped.last_trace``).
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 5}

    def __init__(
        self,
        task: RopeTaskOptions | str | None = None,
        simulation: RopeSimulationOptions | None = None,
        observation: RopeObservationOptions | None = None,
        rendering: RopeRenderOptions | None = None,
        *,
        info_trace: bool = False,
        **options: Any,
    ):
        super().__init__()
        if isinstance(task, str):  # the task's name, given flat: gym.make(ID, task="tie", crossings=3)
            options = {"task": task, **options}
            task = None
        groups = route_options(type(self).__name__, {"task": task, "simulation": simulation,
                                                     "observation": observation, "rendering": rendering},
                               options, ROPE_GROUPS)
        self.task_options: RopeTaskOptions = groups["task"]
        self.sim_options: RopeSimulationOptions = groups["simulation"]
        self.obs_options: RopeObservationOptions = groups["observation"]
        self.render_options: RopeRenderOptions = groups["rendering"]
        self.render_mode = self.render_options.render_mode
        self.info_trace = bool(info_trace)
        t = self.task_options
        self.task = t.knot_task()
        self.configs = load_configurations(t.split)
        self.task.sample(self.configs, np.random.default_rng(0))  # fails now if the split lacks a level
        self.obs_mode = self.obs_options.obs_mode
        self.image_size = int(self.obs_options.image_size)
        self.world = RopeWorld(self.sim_options.config or RopeConfig())
        n = self.world.num_beads
        if self.obs_mode == "rgb":
            self.observation_space = spaces.Box(0, 255, (self.image_size, 2 * self.image_size, 3), np.uint8)
        else:
            # every bead lies within half the rope's length of its centre; stretched edges get slack
            reach = float(n * self.world.config.spacing)
            self.observation_space = spaces.Box(-reach, reach, (2, n, 3), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        self._renderer: Any = None
        self._annotator: Any = None
        self._timeline: Any = None  # the annotation text's lines, kept from step to step
        self._goal_images: OrderedDict[Any, np.ndarray] = OrderedDict()
        self._bodies: tuple[str, ...] | None = None
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
        """The patterns of the annotation text and, through `RewardProgramWrapper`,
        of reward programs (``rendering.library``, default the built-in 3D library)."""
        lib = self.render_options.library
        if lib is None:
            from simpatterns.dsl import builtin_library

            lib = builtin_library("3d")
        return lib

    @property
    def annotator(self):
        """Annotates the episode's trace with `library` after each step: an
        `IncrementalAnnotator` (the crossings of earlier frames are kept, not found again)."""
        if self._annotator is None:
            from simpatterns.annotate.incremental import IncrementalAnnotator

            self._annotator = IncrementalAnnotator(self.library)
        return self._annotator

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
            self._trace = self.world.trace({"task": self.task.name, "task_goal": self._goal_text(),
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
        if self.task_options.strict:
            return code.text == self.goal_code.text
        return code.same_as(self.goal_code, self.task_options.mirror)

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
        recorder = self.world.start_recording(int(self.sim_options.record_stride),
                                              {"simulator": "mujoco rope", "description": "rope loop"})
        if self._bodies is None:
            self._bodies = tuple(b.name for b in recorder.map.bodies)
        self.code = self._read_code()
        self.num_steps = 0
        self._trace = None
        self.last_annotation = None
        self._last_push = None
        if self._annotator is not None:
            self._annotator.reset()
        if self._timeline is not None:
            self._timeline.clear()
        self._success = self._matches(self.code)
        info = {"task": self.task.name, "goal": self._goal_text(), "start_index": self.start_index,
                "goal_index": self.goal_index, "crossings": self.code.num_crossings, "gauss_code": self.code.text,
                "goal_crossings": self.goal_code.num_crossings, "goal_gauss_code": self.goal_code.text,
                "is_success": self._success, "task_success": self._success, "bodies": self._bodies}
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
        t = self.task_options
        reward = float(t.success_reward) if ok else 0.0
        if self.num_steps == t.horizon and not ok:
            reward += float(t.timeout_penalty)
        info["reward/success"] = reward
        info["is_success"] = ok
        if self.render_options.annotates:
            self.last_annotation = self.annotator.annotate(self.last_trace)
            info["annotation"] = self.last_annotation
            info["annotation_text"] = self._text()
        if self.info_trace:
            info["trace"] = self.last_trace
        obs = self._observe() if not unstable else np.zeros(self.observation_space.shape, self.observation_space.dtype)
        return obs, reward, bool(ok or unstable), False, info

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
            from simpatterns.annotate.text import TimelineLines, timeline_text

            if self.last_annotation is None or set(self.last_annotation.patterns) != set(self.library.labels):
                self.last_annotation = self.annotator.annotate(trace)
            if self._timeline is None:
                self._timeline = TimelineLines()
            lines += ["", timeline_text(trace, self.last_annotation, int(self.render_options.text_budget),
                                        timeline=self._timeline)]
        return "\n".join(lines)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
