"""`PhyreOneBallEnv`: PHYRE's one-ball tasks as one-step Gymnasium episodes.

``reset`` picks a task (a template variant, or a purpose-built scene) and
returns the initial scene; ``step(action)`` places the red ball, simulates
the whole rollout and ends the episode (``terminated=True``, never
``truncated``). Registered as ``simpatterns/PhyreOneBall-v0`` (PHYRE's
conventions) and ``-v1`` (actions in [-1, 1], channel-first images); see
``docs/guide/environments.md`` for the user guide.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from simpatterns.envs.observation import as_layout, object_features, observation_space, semantic_grid
from simpatterns.envs.options import (
    RENDER_MODES,
    ObservationOptions,
    RenderOptions,
    SimulationOptions,
    TaskOptions,
    route_options,
)
from simpatterns.simulators.phyre import TEMPLATES, Scene, get_template, quantize_action, simulate
from simpatterns.simulators.phyre.physics import AGENT_NAME
from simpatterns.trace import Trace

INITIAL_CACHE = 64  # tasks whose initial scene, state and observation are kept (LRU)


@dataclass(frozen=True)
class EpisodeScene:
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


# Bodies besides walls (and the agent's ball) in the fullest shipped variant of each
# template: the rows an objects observation needs (tests/envs check it against the scenes).
SHIPPED_MAX_BODIES = {
    "00000": 2, "00001": 5, "00002": 3, "00003": 3, "00004": 6, "00005": 3, "00006": 5, "00007": 6,
    "00008": 9, "00009": 4, "00010": 5, "00011": 3, "00012": 33, "00013": 51, "00014": 5, "00015": 4,
    "00016": 17, "00017": 6, "00018": 6, "00019": 6, "00020": 12, "00021": 11, "00022": 6, "00023": 8,
    "00024": 5,
}


class TaskCache:
    """What depends only on the task (a scene's initial state, its rollout left alone), kept
    for the last `INITIAL_CACHE` tasks used (LRU). A purpose-built scene is keyed by identity
    and kept with its task, so its id cannot be reused while cached (scenes are not mutated)."""

    def __init__(self, size: int = INITIAL_CACHE):
        self.size = size
        self._items: OrderedDict[Any, tuple[Any, EpisodeScene]] = OrderedDict()

    def get(self, task: EpisodeScene, build: Callable[[], Any]) -> Any:
        key = task.key if task.scene is None else ("scene", id(task.scene))
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            return hit[0]
        value = build()
        self._items[key] = (value, task)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return value


def scene_bodies(scene: Scene) -> int:
    """Bodies of ``scene`` an objects observation shows (all but the walls; the agent's ball aside)."""
    return sum(1 for b in scene.bodies if b.kind != "wall")


def objects_rows(tasks: list[EpisodeScene]) -> int:
    """Rows of an objects observation with room for every task of ``tasks``: the most
    bodies any of them has, plus the agent's row."""
    most = 0
    for task in tasks:
        n = SHIPPED_MAX_BODIES.get(task.template) if task.scene is None else None
        most = max(most, scene_bodies(task.build()) if n is None else n)
    return most + 1


def all_tasks() -> list[EpisodeScene]:
    """Every shipped variant of every template."""
    return [EpisodeScene(t, v) for t in TEMPLATES for v in range(TEMPLATES[t].num_variants)]


def _template_tasks(template: str | int) -> list[EpisodeScene]:
    t = get_template(template)
    if t.num_variants == 0:
        raise ValueError(f"template {t.id} has no shipped variants; pick another template or pass a scene")
    return [EpisodeScene(t.id, v) for v in range(t.num_variants)]


def _parse_task(item: Any) -> EpisodeScene:
    if isinstance(item, EpisodeScene):
        return item
    if isinstance(item, str) and ":" in item:
        t, v = item.split(":", 1)
        return _check_variant(EpisodeScene(get_template(t).id, int(v)))
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return _check_variant(EpisodeScene(get_template(item[0]).id, int(item[1])))
    raise ValueError(f"a task is (template, variant) or 'template:variant', got {item!r}")


def _check_variant(task: EpisodeScene) -> EpisodeScene:
    n = get_template(task.template).num_variants
    if not 0 <= task.variant < n:
        raise ValueError(f"template {task.template} has variants 0..{n - 1}, not {task.variant}")
    return task


def _scene_task(scene: Scene | str) -> EpisodeScene:
    if isinstance(scene, str):
        from simpatterns.envs.scenes import named_scene

        scene = named_scene(scene)
    if not isinstance(scene, Scene):
        raise TypeError(f"scene must be a Scene or a named scene, got {type(scene).__name__}")
    return EpisodeScene(scene.template or "scene", -1 if scene.variant is None else int(scene.variant), scene)


class PhyreOneBallEnv(gym.Env):
    """One-step PHYRE episodes: observe a scene, place the red ball, get the rollout's reward.

    Options come in four groups (`simpatterns.envs.options`): ``task``
    (`TaskOptions`: ``scene``, ``template`` + ``variant``, ``tasks``; none:
    every shipped variant), ``simulation`` (`SimulationOptions`),
    ``observation`` (`ObservationOptions`) and ``rendering``
    (`RenderOptions`). Each field may also be given as a flat keyword
    (``gym.make(ID, template=7, obs_mode="objects")``). ``reset(options=
    {"template": T, "variant": V})`` or ``options={"scene": ...}`` overrides
    the task for one episode. Sampling uses the env's seeded ``np_random``.

    Actions: ``Box(0, 1, (3,))`` = (x, y, radius) of the red ball
    (``Box(-1, 1, (3,))`` with ``action_range="symmetric"``, mapped to PHYRE's
    [0, 1] by (a + 1) / 2; ``info["action"]`` is PHYRE's), or with
    ``action_bins=B`` a ``Discrete(B**3)`` grid (cell centres, x fastest). An
    action PHYRE rejects (overlap, outside the scene, out of range, NaN)
    simulates nothing: reward 0, ``terminated``, ``info["invalid_reason"]``
    says why. An action of the wrong shape or type raises ValueError.

    Observations (``obs_mode``): ``"rgb"`` 256x256x3 uint8, ``"semantic"``
    the 7-channel role grid (``semantic_size``), ``"objects"`` a feature
    array (``max_objects`` rows; by default as many as the task set's fullest
    scene needs, 52 for all templates); see `simpatterns.envs.observation`. Reset
    shows the initial scene, step the rollout's last frame.

    Reward: 1.0 on PHYRE success (the green body touches the goal body for
    3 s), or on ``success_fn(trace)`` when given. A reward program replaces
    it through `RewardProgramWrapper`, the one way a program reaches an env.

    ``info`` after reset: ``template``, ``variant``, ``goal`` and ``bodies``
    (every body name a rollout of this task has, the red ball included).
    After a step: ``is_success``, ``task_success`` (PHYRE's),
    ``invalid_reason`` ("" when valid), ``action`` (the continuous action),
    ``template``, ``variant``, ``num_frames``; with ``annotate`` (default
    when ``render_mode="ansi"``) ``annotation_text``, exactly what the
    ``ansi`` render shows, and ``annotation``, the full library's
    `Annotation`; with ``info_trace=True`` (the wrapper switches it on) the
    rollout's `Trace` as ``info["trace"]`` (None after an invalid action).
    """

    metadata = {"render_modes": RENDER_MODES, "render_fps": 15}

    def __init__(
        self,
        task: TaskOptions | None = None,
        simulation: SimulationOptions | None = None,
        observation: ObservationOptions | None = None,
        rendering: RenderOptions | None = None,
        *,
        info_trace: bool = False,
        **options: Any,
    ):
        super().__init__()
        groups = route_options(type(self).__name__, {"task": task, "simulation": simulation,
                                                     "observation": observation, "rendering": rendering}, options)
        self.task_options: TaskOptions = groups["task"]
        self.sim_options: SimulationOptions = groups["simulation"]
        self.obs_options: ObservationOptions = groups["observation"]
        self.render_options: RenderOptions = groups["rendering"]
        self.render_mode = self.render_options.render_mode
        self.info_trace = bool(info_trace)
        self.sim_kwargs = self.sim_options.simulate_kwargs()

        t = self.task_options
        if t.scene is not None:
            self.tasks = [_scene_task(t.scene)]
        elif t.template is not None and t.variant is not None:
            self.tasks = [_check_variant(EpisodeScene(get_template(t.template).id, int(t.variant)))]
        elif t.template is not None:
            self.tasks = _template_tasks(t.template)
        elif t.tasks is not None:
            self.tasks = [_parse_task(x) for x in t.tasks]
            if not self.tasks:
                raise ValueError("tasks is empty")
        else:
            self.tasks = all_tasks()
            if not self.tasks:
                raise ValueError("no template has shipped variants; pass a scene")

        o = self.obs_options
        if o.max_objects is None:  # sized for this task set, so no reset can overflow it
            self.obs_options = o = replace(o, max_objects=objects_rows(self.tasks))
        self.observation_space = observation_space(o.obs_mode, int(o.semantic_size), int(o.max_objects),
                                                   channels_first=bool(o.channels_first),
                                                   onehot_value=int(o.onehot_value))
        bins = None if o.action_bins is None else int(o.action_bins)
        low = -1.0 if o.action_range == "symmetric" else 0.0
        self.action_space = spaces.Box(low, 1.0, (3,), np.float32) if bins is None else spaces.Discrete(bins**3)

        self._initial = TaskCache()  # (scene, trace, observation, body names) per task
        self._left_alone = TaskCache()  # the task's rollout without the red ball
        self.task: EpisodeScene | None = None
        self.scene: Scene | None = None
        self.initial_trace: Trace | None = None
        self.last_trace: Trace | None = None
        self.last_annotation = None
        self.last_invalid_reason: str | None = None
        self._stepped = False

    # ------------------------------------------------------------- helpers
    @property
    def library(self):
        """The patterns of the annotation text (``rendering.library``, default the built-in library)."""
        lib = self.render_options.library
        if lib is None:
            from simpatterns.dsl import builtin_library

            lib = builtin_library()
        return lib

    def _observe(self, trace: Trace, frame: int) -> np.ndarray:
        o = self.obs_options
        if o.obs_mode == "rgb":
            from simpatterns.simulators.phyre.render import frame_array

            return as_layout(frame_array(trace, frame), bool(o.channels_first))
        if o.obs_mode == "semantic":
            return as_layout(semantic_grid(trace, frame, int(o.semantic_size), int(o.onehot_value)),
                             bool(o.channels_first))
        return object_features(trace, frame, int(o.max_objects))

    def _initial_state(self, task: EpisodeScene) -> tuple[Scene, Trace, np.ndarray, tuple[str, ...]]:
        """The scene and its state before the action (a zero-step rollout without
        the red ball) with its observation and the body names of its rollouts;
        cached per task (scenes are not mutated)."""
        return self._initial.get(task, lambda: self._initial_of(task))

    def _initial_of(self, task: EpisodeScene) -> tuple[Scene, Trace, np.ndarray, tuple[str, ...]]:
        scene = task.build()
        trace = simulate(scene, None, max_steps=0).trace
        assert trace is not None
        bodies = tuple(trace.names) + ((AGENT_NAME,) if AGENT_NAME not in trace.names else ())
        return scene, trace, self._observe(trace, 0), bodies

    def left_alone_trace(self) -> Trace:
        """The current task's rollout with no action (the scene without the red
        ball, simulated as a valid action would be): what an invalid action
        leaves the world to do. Cached per task."""
        if self.scene is None or self.task is None:
            raise gym.error.ResetNeeded("call reset() before left_alone_trace()")
        scene = self.scene

        def rollout() -> Trace:
            trace = simulate(scene, None, **self.sim_kwargs).trace
            assert trace is not None
            return trace

        return self._left_alone.get(self.task, rollout)

    def _continuous_action(self, action: Any) -> tuple[np.ndarray | None, str | None]:
        """(x, y, r) floats, or None and why the action is invalid. Raises on malformed actions."""
        bins = self.obs_options.action_bins
        if bins is not None:
            bins = int(bins)
            if isinstance(action, np.ndarray) and action.shape == ():
                action = action.item()
            if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
                raise ValueError(f"action must be an integer in [0, {bins ** 3}) (Discrete), got {action!r}")
            n = bins**3
            if not 0 <= int(action) < n:
                return None, f"action index {int(action)} outside [0, {n})"
            return quantize_action(int(action), bins), None
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"action must be 3 numbers (x, y, r) in [0, 1], got {action!r}") from exc
        if a.shape != (3,):
            raise ValueError(f"action must have shape (3,) = (x, y, r), got shape {a.shape}")
        if self.obs_options.action_range == "symmetric":  # [-1, 1] -> PHYRE's [0, 1]
            a = (a + 1.0) / 2.0
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
                task = _check_variant(EpisodeScene(get_template(options["template"]).id, int(options["variant"])))
        elif "variant" in options:
            raise ValueError("reset option 'variant' needs 'template'")
        else:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.task = task
        self.scene, self.initial_trace, obs, bodies = self._initial_state(task)
        self.last_trace = None
        self.last_annotation = None
        self.last_invalid_reason = None
        self._stepped = False
        info = {"template": task.template, "variant": task.variant, "goal": self.scene.goal_text(), "bodies": bodies}
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
            ok = False
            info.update(task_success=False, num_frames=0)
            if self.render_options.annotates:
                info["annotation_text"] = self._invalid_text(reason or "")
                info["annotation"] = None
        else:
            obs = self._observe(trace, trace.num_frames - 1)
            if self.render_options.annotates:
                from simpatterns.annotate.annotator import annotate
                from simpatterns.annotate.text import annotation_text

                self.last_annotation = annotate(trace, self.library)
                info["annotation_text"] = annotation_text(trace, self.last_annotation,
                                                          int(self.render_options.text_budget))
                info["annotation"] = self.last_annotation
            success_fn = self.sim_options.success_fn
            ok = bool(success_fn(trace)) if success_fn is not None else bool(trace.success)
            info.update(task_success=trace.success, num_frames=trace.num_frames)
        if self.info_trace:
            info["trace"] = trace
        info["is_success"] = ok
        return obs, float(ok), True, False, info

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
        frames = list(range(0, trace.num_frames, int(self.render_options.render_stride)))
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
        return annotation_text(self.last_trace, self.last_annotation, int(self.render_options.text_budget))
