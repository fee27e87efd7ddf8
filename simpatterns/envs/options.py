"""The options of `PhyreOneBallEnv`, in four small frozen groups.

(`KnotRopeEnv`'s groups, same names and the same routing, are in
`simpatterns.envs.rope_options`.)

=============  ===============================================================
group          fields
=============  ===============================================================
task           ``template``, ``variant``, ``tasks``, ``scene``: which scenes
simulation     ``max_steps``, ``stride``, ``stop_on_success``,
               ``stop_when_settled``, ``success_fn``: how a rollout runs and
               what counts as success
observation    ``obs_mode``, ``semantic_size``, ``max_objects``,
               ``channels_first``, ``onehot_value``, ``action_bins``,
               ``action_range``: what the agent sees and does
rendering      ``render_mode``, ``render_stride``, ``annotate`` (annotation
               text in ``info`` and the ``ansi`` render), ``text_budget``,
               ``library`` (the patterns of that text)
=============  ===============================================================

Pass a group whole (``PhyreOneBallEnv(observation=ObservationOptions(
obs_mode="objects"))``) or its fields as flat keywords
(``gym.make(..., template=7, obs_mode="objects")``), which `route_options`
puts into their groups; a flat keyword overrides the same field of a group
given beside it. Each group checks its values when built, so a bad value
fails with one line naming it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace
from typing import Any, Callable

import numpy as np

from simpatterns.envs.observation import OBS_MODES, ONEHOT_VALUES
from simpatterns.simulators.phyre import MAX_STEPS, Scene
from simpatterns.trace import Trace

RENDER_MODES = ["rgb_array", "rgb_array_list", "ansi"]
ACTION_RANGES = ("unit", "symmetric")


@dataclass(frozen=True)
class TaskOptions:
    """Which scenes episodes are played on (at most one of ``scene``, ``template``,
    ``tasks``): ``scene`` (a `Scene` or a named scene such as ``"buckets"``);
    ``template`` + ``variant``; ``template`` alone (its variants, drawn at
    reset); ``tasks`` (``(template, variant)`` pairs or ``"T:V"`` strings);
    none: every shipped variant."""

    template: str | int | None = None
    variant: int | None = None
    tasks: tuple[Any, ...] | None = None
    scene: Scene | str | None = None

    def __post_init__(self) -> None:
        if self.variant is not None and self.template is None:
            raise ValueError("variant given without template")
        given = [k for k in ("scene", "template", "tasks") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"choose the task set with one of scene, template or tasks; got {' and '.join(given)}")
        if self.tasks is not None:
            if isinstance(self.tasks, (str, bytes)) or not hasattr(self.tasks, "__iter__"):
                raise ValueError(f"tasks must be a list of (template, variant) or 'T:V', got {self.tasks!r}")
            object.__setattr__(self, "tasks", tuple(self.tasks))


@dataclass(frozen=True)
class SimulationOptions:
    """How a rollout runs (``max_steps`` physics steps at most, a frame every
    ``stride`` steps, ending at PHYRE success or once everything rests) and
    what succeeds: ``success_fn(trace)`` when given, else PHYRE's success."""

    max_steps: int = MAX_STEPS
    stride: int = 1
    stop_on_success: bool = True
    stop_when_settled: bool = False
    success_fn: Callable[[Trace], bool] | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.stride < 1:
            raise ValueError(f"max_steps and stride must be >= 1, got {self.max_steps}, {self.stride}")
        if self.success_fn is not None and not callable(self.success_fn):
            raise ValueError(f"success_fn must be callable (trace -> bool), got {self.success_fn!r}")

    def simulate_kwargs(self) -> dict[str, Any]:
        """The keywords of `simpatterns.simulators.phyre.simulate`."""
        return dict(max_steps=int(self.max_steps), stride=int(self.stride),
                    stop_on_success=bool(self.stop_on_success), stop_when_settled=bool(self.stop_when_settled))


@dataclass(frozen=True)
class ObservationOptions:
    """What the agent sees (``obs_mode``: ``"rgb"``, ``"semantic"`` with
    ``semantic_size``, ``"objects"`` with ``max_objects`` rows; images (H, W,
    C), or (C, H, W) with ``channels_first``; a semantic pixel's set channel
    is ``onehot_value``, 1 or 255) and does (continuous (x, y, r) in PHYRE's
    [0, 1] with ``action_range="unit"`` or in [-1, 1] with ``"symmetric"``,
    or a ``Discrete(action_bins**3)`` grid)."""

    obs_mode: str = "rgb"
    semantic_size: int = 64
    max_objects: int | None = None  # None: room for the task set's fullest scene (the env decides)
    action_bins: int | None = None
    action_range: str = "unit"
    channels_first: bool = False
    onehot_value: int = 1

    def __post_init__(self) -> None:
        if self.obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {self.obs_mode!r}")
        if self.semantic_size < 8 or (self.max_objects is not None and self.max_objects < 2):
            raise ValueError(f"semantic_size must be >= 8 and max_objects >= 2, "
                             f"got {self.semantic_size}, {self.max_objects}")
        bins = self.action_bins
        if bins is not None and not (isinstance(bins, (int, np.integer)) and not isinstance(bins, bool) and bins >= 1):
            raise ValueError(f"action_bins must be a positive integer, got {bins!r}")
        if self.action_range not in ACTION_RANGES:
            raise ValueError(f"action_range must be one of {ACTION_RANGES}, got {self.action_range!r}")
        if not isinstance(self.channels_first, (bool, np.bool_)):
            raise ValueError(f"channels_first must be True or False, got {self.channels_first!r}")
        if self.onehot_value not in ONEHOT_VALUES or isinstance(self.onehot_value, bool):
            raise ValueError(f"onehot_value must be one of {ONEHOT_VALUES}, got {self.onehot_value!r}")


@dataclass(frozen=True)
class RenderOptions:
    """``render_mode`` (``"rgb_array"``, ``"rgb_array_list"`` every
    ``render_stride``-th frame, ``"ansi"`` the annotation text, or None);
    ``annotate``: put the annotation text (at most ``text_budget``
    characters, patterns of ``library``, the built-in one by default) in
    ``info`` after each step; None: on exactly with ``render_mode="ansi"``."""

    render_mode: str | None = None
    render_stride: int = 4
    annotate: bool | None = None
    text_budget: int = 6000
    library: Any = None

    def __post_init__(self) -> None:
        if self.render_mode is not None and self.render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {self.render_mode!r}")
        if self.render_stride < 1:
            raise ValueError(f"render_stride must be >= 1, got {self.render_stride}")

    @property
    def annotates(self) -> bool:
        return (self.render_mode == "ansi") if self.annotate is None else bool(self.annotate)


GROUPS: dict[str, type] = {
    "task": TaskOptions,
    "simulation": SimulationOptions,
    "observation": ObservationOptions,
    "rendering": RenderOptions,
}
FIELD_GROUP: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}

# former keywords, with where their job went
_MOVED = {
    "reward_mode": "a reward program is added with RewardProgramWrapper(env, program)",
    "reward_program": "a reward program is added with RewardProgramWrapper(env, program)",
    "program_reward": "use RewardProgramWrapper(env, program, reward='score'|'success'|'gain')",
}


def route_options(owner: str, groups: dict[str, Any], flat: dict[str, Any],
                  classes: dict[str, type] = GROUPS) -> dict[str, Any]:
    """The groups of ``classes`` (name -> dataclass; PHYRE's four by default),
    each the one given in ``groups`` (or the default) with the flat keywords
    of its fields applied. Unknown keywords raise TypeError naming them, with
    the closest option."""
    field_group = FIELD_GROUP if classes is GROUPS else \
        {f.name: group for group, cls in classes.items() for f in fields(cls)}
    for name, value in groups.items():
        if value is not None and not isinstance(value, classes[name]):
            raise TypeError(f"{owner}: {name}= must be a {classes[name].__name__}, got {type(value).__name__}")
    per_group: dict[str, dict[str, Any]] = {name: {} for name in classes}
    for key, value in flat.items():
        group = field_group.get(key)
        if group is None:
            if key in _MOVED:
                raise TypeError(f"{owner} has no option {key!r}: {_MOVED[key]}")
            close = difflib.get_close_matches(key, [*field_group, *classes], n=1)
            raise TypeError(f"{owner} got an unknown option {key!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + f"; options are {', '.join(sorted(field_group))}")
        per_group[group][key] = value
    out = {}
    for name, cls in classes.items():
        base = groups.get(name)
        out[name] = (replace(base, **per_group[name]) if base is not None else cls(**per_group[name])) \
            if per_group[name] or base is None else base
    return out
