"""`PhyreOneBallEnv`: PHYRE's one-ball tasks as one-step Gymnasium episodes.

``reset`` picks a task (a template variant, or a purpose-built scene) and
returns the initial scene; ``step(action)`` places the red ball, simulates
the whole rollout and ends the episode (``terminated=True``). Registered as
``simpatterns/PhyreOneBall-v0`` with ``max_episode_steps=1``; see
``docs/readme/envs.md`` for the user guide.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simpatterns.envs.observation import (
    OBS_MODES,
    object_features,
    observation_space,
    semantic_grid,
)
from simpatterns.envs.reward import REWARD_KINDS, ProgramReward, RewardResult, builtin_library
from simpatterns.simulators.phyre import (
    MAX_STEPS,
    TEMPLATES,
    Scene,
    get_template,
    quantize_action,
    simulate,
)
from simpatterns.trace import Trace

REWARD_MODES = ("sparse", "program")
INITIAL_CACHE = 64  # tasks whose initial scene, state and observation are kept (LRU)
RENDER_MODES = ["rgb_array", "rgb_array_list", "ansi"]


@dataclass(frozen=True)
class Task:
    """One scene an episode can be played on: a template variant or a named scene."""

    template: str
    variant: int  # -1 for purpose-built scenes
    scene: Scene | None = None  # set for purpose-built scenes

    def build(self) -> Scene:
        if self.scene is not None:
            return self.scene
        return get_template(self.template).variant_scene(self.variant)

    @property
    def key(self) -> tuple[str, int]:
        return (self.template, self.variant)


def all_tasks() -> list[Task]:
    """Every shipped variant of every template."""
    return [Task(t, v) for t in TEMPLATES for v in range(TEMPLATES[t].num_variants)]


def _template_tasks(template: str | int) -> list[Task]:
    t = get_template(template)
    if t.num_variants == 0:
        raise ValueError(f"template {t.id} has no shipped variants; pick another template or pass a scene")
    return [Task(t.id, v) for v in range(t.num_variants)]


def _parse_task(item: Any) -> Task:
    if isinstance(item, Task):
        return item
    if isinstance(item, str) and ":" in item:
        t, v = item.split(":", 1)
        return _check_variant(Task(get_template(t).id, int(v)))
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return _check_variant(Task(get_template(item[0]).id, int(item[1])))
    raise ValueError(f"a task is (template, variant) or 'template:variant', got {item!r}")


def _check_variant(task: Task) -> Task:
    n = get_template(task.template).num_variants
    if not 0 <= task.variant < n:
        raise ValueError(f"template {task.template} has variants 0..{n - 1}, not {task.variant}")
    return task


def _scene_task(scene: Scene | str) -> Task:
    if isinstance(scene, str):
        from simpatterns.envs.scenes import named_scene

        scene = named_scene(scene)
    if not isinstance(scene, Scene):
        raise TypeError(f"scene must be a Scene or a named scene, got {type(scene).__name__}")
    return Task(scene.template or "scene", -1 if scene.variant is None else int(scene.variant), scene)


class PhyreOneBallEnv(gym.Env):
    """One-step PHYRE episodes: observe a scene, place the red ball, get the rollout's reward.

    Task set (at most one of these): ``scene`` (a `Scene` or a named scene
    such as ``"buckets"``); ``template`` + ``variant``; ``template`` alone
    (its variants, sampled at reset); ``tasks`` (a list of ``(template,
    variant)`` or ``"T:V"``); none: every shipped variant. ``reset(options=
    {"template": T, "variant": V})`` or ``options={"scene": ...}`` overrides
    the choice for one episode. Sampling uses the env's seeded ``np_random``.

    Actions: ``Box(0, 1, (3,))`` = (x, y, radius) of the red ball, or with
    ``action_bins=B`` a ``Discrete(B**3)`` grid (cell centres, x fastest). An
    action PHYRE rejects (overlap, outside the scene, out of range, NaN)
    simulates nothing: reward 0, ``terminated``, ``info["invalid_reason"]``
    says why. An action of the wrong shape or type raises ValueError.

    Observations (``obs_mode``): ``"rgb"`` 256x256x3 uint8, ``"semantic"``
    the 7-channel role grid (``semantic_size``), ``"objects"`` a feature
    array (``max_objects`` rows); see `simpatterns.envs.observation`. Reset
    shows the initial scene, step the rollout's last frame.

    Rewards (``reward_mode``): ``"sparse"`` 1.0 on PHYRE success (the green
    body touches the goal body for 3 s) or on ``success_fn(trace)`` when
    given; ``"program"`` a reward program (text, ``.rwd`` path or
    `RewardProgram`): the dense score (``program_reward="score"``) or 0/1
    success (``"success"``).

    ``info`` after a step: ``is_success`` (the reward's success), ``task_success``,
    ``invalid_reason`` ("" when valid), ``action`` (the continuous action),
    ``template``, ``variant``, ``num_frames``; in program mode
    ``program_score`` and ``reward/<clause>`` per top-level clause; with
    ``annotate=True`` (default when ``render_mode="ansi"``)
    ``annotation_text``, exactly what the ``ansi`` render shows; with
    ``info_trace=True`` the `Trace` itself as ``info["trace"]``.
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 15}

    def __init__(
        self,
        template: str | int | None = None,
        variant: int | None = None,
        tasks: Sequence[Any] | None = None,
        scene: Scene | str | None = None,
        obs_mode: str = "rgb",
        reward_mode: str = "sparse",
        reward_program: Any = None,
        program_reward: str = "score",
        success_fn: Callable[[Trace], bool] | None = None,
        action_bins: int | None = None,
        render_mode: str | None = None,
        semantic_size: int = 64,
        max_objects: int = 16,
        max_steps: int = MAX_STEPS,
        stride: int = 1,
        stop_on_success: bool = True,
        stop_when_settled: bool = False,
        annotate: bool | None = None,
        library: Any = None,
        info_trace: bool = False,
        text_budget: int = 6000,
        render_stride: int = 4,
    ):
        super().__init__()
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
        if action_bins is not None and not (isinstance(action_bins, (int, np.integer)) and action_bins >= 1):
            raise ValueError(f"action_bins must be a positive integer, got {action_bins!r}")
        if max_steps < 1 or stride < 1 or render_stride < 1:
            raise ValueError("max_steps, stride and render_stride must be >= 1")
        if semantic_size < 8 or max_objects < 2:
            raise ValueError(f"semantic_size must be >= 8 and max_objects >= 2, got {semantic_size}, {max_objects}")
        if success_fn is not None and reward_mode != "sparse":
            raise ValueError("success_fn is the sparse reward's test; with reward_mode='program' the program decides")
        if variant is not None and template is None:
            raise ValueError("variant given without template")
        given = [k for k, v in (("scene", scene), ("template", template), ("tasks", tasks)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"choose the task set with one of scene, template or tasks; got {' and '.join(given)}")

        self.obs_mode = obs_mode
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        self.action_bins = None if action_bins is None else int(action_bins)
        self.semantic_size = int(semantic_size)
        self.max_objects = int(max_objects)
        self.sim_kwargs = dict(max_steps=int(max_steps), stride=int(stride), stop_on_success=bool(stop_on_success),
                               stop_when_settled=bool(stop_when_settled))
        self.success_fn = success_fn
        self.info_trace = bool(info_trace)
        self.text_budget = int(text_budget)
        self.render_stride = int(render_stride)
        self.annotate = (render_mode == "ansi") if annotate is None else bool(annotate)
        self._library = library

        if scene is not None:
            self.tasks = [_scene_task(scene)]
        elif template is not None and variant is not None:
            self.tasks = [_check_variant(Task(get_template(template).id, int(variant)))]
        elif template is not None:
            self.tasks = _template_tasks(template)
        elif tasks is not None:
            self.tasks = [_parse_task(t) for t in tasks]
            if not self.tasks:
                raise ValueError("tasks is empty")
        else:
            self.tasks = all_tasks()
            if not self.tasks:
                raise ValueError("no template has shipped variants; pass a scene")

        self.program: ProgramReward | None = None
        if reward_mode == "program":
            self.program = ProgramReward(reward_program, program_reward, self.library)

        self.observation_space = observation_space(obs_mode, self.semantic_size, self.max_objects)
        self.action_space = (
            spaces.Box(0.0, 1.0, (3,), np.float32) if self.action_bins is None else spaces.Discrete(self.action_bins**3)
        )

        self._initial: OrderedDict[Any, tuple[Scene, Trace, np.ndarray, Task]] = OrderedDict()
        self._checked_bodies: set[tuple[str, int]] = set()
        self.task: Task | None = None
        self.scene: Scene | None = None
        self.initial_trace: Trace | None = None
        self.last_trace: Trace | None = None
        self.last_annotation = None
        self.last_invalid_reason: str | None = None
        self._stepped = False

    # ------------------------------------------------------------- helpers
    @property
    def library(self):
        if self._library is None:
            self._library = builtin_library()
        return self._library

    def _observe(self, trace: Trace, frame: int) -> np.ndarray:
        if self.obs_mode == "rgb":
            from simpatterns.simulators.phyre.render import frame_array

            return frame_array(trace, frame)
        if self.obs_mode == "semantic":
            return semantic_grid(trace, frame, self.semantic_size)
        return object_features(trace, frame, self.max_objects)

    def _initial_state(self, task: Task) -> tuple[Scene, Trace, np.ndarray]:
        """The scene and its state before the action (a zero-step rollout without
        the red ball) with its observation; cached per task (scenes are not mutated)."""
        key = task.key if task.scene is None else ("scene", id(task.scene))
        cached = self._initial.get(key)
        if cached is not None:
            self._initial.move_to_end(key)
        else:
            scene = task.build()
            trace = simulate(scene, None, max_steps=0).trace
            assert trace is not None
            # the task is kept so a purpose-built scene's id cannot be reused while cached
            cached = (scene, trace, self._observe(trace, 0), task)
            self._initial[key] = cached
            if len(self._initial) > INITIAL_CACHE:
                self._initial.popitem(last=False)
        return cached[0], cached[1], cached[2]

    def _continuous_action(self, action: Any) -> tuple[np.ndarray | None, str | None]:
        """(x, y, r) floats, or None and why the action is invalid. Raises on malformed actions."""
        if self.action_bins is not None:
            if isinstance(action, np.ndarray) and action.shape == ():
                action = action.item()
            if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
                raise ValueError(
                    f"action must be an integer in [0, {self.action_bins ** 3}) (Discrete), got {action!r}"
                )
            n = self.action_bins**3
            if not 0 <= int(action) < n:
                return None, f"action index {int(action)} outside [0, {n})"
            return quantize_action(int(action), self.action_bins), None
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"action must be 3 numbers (x, y, r) in [0, 1], got {action!r}") from exc
        if a.shape != (3,):
            raise ValueError(f"action must have shape (3,) = (x, y, r), got shape {a.shape}")
        return a, None

    # ------------------------------------------------------------- Gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"template", "variant", "scene"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; use template, variant or scene")
        if "scene" in options:
            task = _scene_task(options["scene"])
        elif "template" in options:
            if options.get("variant") is None:
                choices = _template_tasks(options["template"])
                task = choices[int(self.np_random.integers(len(choices)))]
            else:
                task = _check_variant(Task(get_template(options["template"]).id, int(options["variant"])))
        elif "variant" in options:
            raise ValueError("reset option 'variant' needs 'template'")
        else:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.task = task
        self.scene, self.initial_trace, obs = self._initial_state(task)
        if self.program is not None and task.key not in self._checked_bodies:
            self.program.check_bodies(self.initial_trace.names + ["red ball"], f"scene {task.template}:{task.variant}")
            self._checked_bodies.add(task.key)
        self.last_trace = None
        self.last_annotation = None
        self.last_invalid_reason = None
        self._stepped = False
        info = {"template": task.template, "variant": task.variant, "goal": self.scene.goal_text()}
        return obs.copy(), info

    def step(self, action: Any):
        if self.scene is None or self.task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._stepped:
            raise gym.error.ResetNeeded("the episode has ended (one step per episode); call reset()")
        self._stepped = True
        a, reason = self._continuous_action(action)
        trace = None
        if a is not None:
            rollout = simulate(self.scene, a, **self.sim_kwargs)
            trace, reason = rollout.trace, rollout.invalid_reason
        self.last_trace, self.last_invalid_reason = trace, reason
        info: dict[str, Any] = {
            "template": self.task.template,
            "variant": self.task.variant,
            "action": np.zeros(3) if a is None else np.asarray(a, dtype=np.float64),
            "invalid_reason": reason or "",
        }
        if trace is None:
            obs = self._initial_state(self.task)[2].copy()
            result = self.program.zero() if self.program is not None else RewardResult(0.0, False, 0.0)
            info.update(task_success=False, num_frames=0)
            if self.annotate:
                info["annotation_text"] = self._invalid_text(reason or "")
        else:
            obs = self._observe(trace, trace.num_frames - 1)
            annotation = None
            if self.annotate:
                from simpatterns.annotate.annotator import annotate
                from simpatterns.annotate.text import annotation_text

                annotation = annotate(trace, self.library)
                info["annotation_text"] = annotation_text(trace, annotation, self.text_budget)
            if self.program is not None:
                result = self.program(trace, annotation)
                annotation = result.annotation
            else:
                ok = bool(self.success_fn(trace)) if self.success_fn is not None else trace.success
                result = RewardResult(float(ok), ok, float(ok))
            self.last_annotation = annotation
            info.update(task_success=trace.success, num_frames=trace.num_frames)
            if self.info_trace:
                info["trace"] = trace
        info["is_success"] = result.success
        if self.program is not None:
            info["program_score"] = result.score
            info.update(result.clauses)
        return obs, float(result.reward), True, False, info

    def _invalid_text(self, reason: str) -> str:
        from simpatterns.annotate.text import scene_header

        assert self.initial_trace is not None
        return scene_header(self.initial_trace) + f"\n\nAction rejected, nothing was simulated: {reason}"

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode to the env")
            return None
        if self.initial_trace is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        trace = self.last_trace if self.last_trace is not None else self.initial_trace
        if self.render_mode == "ansi":
            return self._text()
        from simpatterns.simulators.phyre.render import frame_array

        if self.render_mode == "rgb_array":
            return frame_array(trace, trace.num_frames - 1)
        frames = list(range(0, trace.num_frames, self.render_stride))
        if frames[-1] != trace.num_frames - 1:
            frames.append(trace.num_frames - 1)
        return [frame_array(trace, f) for f in frames]

    def _text(self) -> str:
        """What an LLM reads: the scene (before the action), or the annotated rollout."""
        from simpatterns.annotate.text import annotation_text, scene_header

        assert self.initial_trace is not None
        if not self._stepped:
            return scene_header(self.initial_trace) + "\n\nNo action taken yet."
        if self.last_trace is None:
            return self._invalid_text(self.last_invalid_reason or "")
        if self.last_annotation is None or set(self.last_annotation.patterns) != set(self.library.labels):
            from simpatterns.annotate.annotator import annotate

            self.last_annotation = annotate(self.last_trace, self.library)
        return annotation_text(self.last_trace, self.last_annotation, self.text_budget)
