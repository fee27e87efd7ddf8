"""Reward programs as environment rewards.

`ProgramReward` scores one trace with a reward program: it annotates the
trace with only the patterns the program reads (plus their dependencies),
so a program made of NEARBY_AT/TOUCHING clauses costs no annotation at all,
and evaluates the program. The events of a pattern depend only on the trace
and on its dependencies' events, so the result equals evaluating on the
full library's annotation (what ``simpatterns reward eval`` does).

`RewardProgramWrapper` puts a program reward on any environment of ours
that exposes its last rollout as ``env.unwrapped.last_trace``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium as gym

from simpatterns.annotate.annotation import Annotation
from simpatterns.detectors.library import PatternLibrary
from simpatterns.trace import Trace

REWARD_KINDS = ("score", "success")


@lru_cache(maxsize=1)
def builtin_library() -> PatternLibrary:
    """The built-in library, loaded once per process (detectors are immutable)."""
    return PatternLibrary.builtin()


def load_program(program: Any, library: PatternLibrary | None = None):
    """A `RewardProgram` from a program object, a ``.rwd`` path, or program text.

    A string that names an existing file, or ends in ``.rwd``, is read as a file.
    """
    from simpatterns.dsl import RewardProgram

    if isinstance(program, RewardProgram):
        return program
    if isinstance(program, os.PathLike) or (
        isinstance(program, str) and "(" not in program and (program.endswith(".rwd") or Path(program).is_file())
    ):
        return RewardProgram.load(program, library)
    if isinstance(program, str):
        return RewardProgram.from_text(program, library)
    raise TypeError(f"reward program must be text, a .rwd path or a RewardProgram, got {type(program).__name__}")


def program_patterns(program) -> set[str] | None:
    """Normalised pattern labels the program reads; None if some pattern
    argument is not a literal label (then every pattern may matter)."""
    from simpatterns.dsl.checker import bind
    from simpatterns.dsl.matching import is_wildcard, normalize_text
    from simpatterns.dsl.predicates import PREDICATES
    from simpatterns.dsl.syntax import Call, Str, walk

    labels: set[str] = set()
    for node in walk(program.program.root):
        if not isinstance(node, Call) or node.name not in PREDICATES:
            continue
        cls = PREDICATES[node.name]
        bound = bind(node, cls, lambda *a, **k: None)
        if bound is None:
            return None
        named = bound[0]
        for arg in cls.SIGNATURE:
            if arg.kind not in ("pattern", "pattern_or_state") or arg.name not in named:
                continue
            value = named[arg.name]
            if isinstance(value, Str):
                if is_wildcard(value.value):
                    return None
                labels.add(normalize_text(value.value))
            elif not isinstance(value, Call):
                return None
    return labels


@dataclass
class RewardResult:
    """One trace's program reward: ``reward`` is the score, or 0/1 success."""

    reward: float
    success: bool
    score: float
    clauses: dict[str, float] = field(default_factory=dict)  # clause text -> score
    annotation: Annotation | None = None


class ProgramReward:
    """Scores traces with one reward program (see the module docstring).

    ``reward="score"`` gives the dense score in [0, 1]; ``"success"`` gives 1.0
    on success, else 0.0. ``library`` defaults to the built-in library.
    """

    def __init__(self, program: Any, reward: str = "score", library: PatternLibrary | None = None):
        if reward not in REWARD_KINDS:
            raise ValueError(f"program reward must be one of {REWARD_KINDS}, got {reward!r}")
        self.reward = reward
        self._library = library
        self.program = load_program(program, None)
        labels = program_patterns(self.program)
        if labels == set():  # positions and contacts only: no detector runs, no library needed
            self.needed = PatternLibrary()
            return
        from simpatterns.dsl import DSLErrors, check

        errors = check(self.program.program, self.library)  # pattern names and param keys
        if errors:
            raise DSLErrors(errors)
        self.needed = self.library if labels is None else self.library.subset(sorted(labels))

    @property
    def library(self) -> PatternLibrary:
        if self._library is None:
            self._library = builtin_library()
        return self._library

    @property
    def clauses(self) -> list[str]:
        return self.program.clauses

    @property
    def info_keys(self) -> list[str]:
        """``reward/<clause>`` keys, one per top-level clause."""
        return [f"reward/{c}" for c in self.program.clauses]

    def covers(self, annotation: Annotation) -> bool:
        """True when ``annotation`` holds every pattern the program reads."""
        return set(self.needed.labels) <= set(annotation.patterns)

    def check_bodies(self, names: list[str], where: str = "scene") -> None:
        """Raise ValueError if the program names a body that ``names`` lacks."""
        from simpatterns.dsl import DSLErrors, check

        errors = check(self.program.program, None, names)
        if errors:
            raise ValueError(f"reward program does not fit the {where}:\n{DSLErrors(errors)}")

    def annotate(self, trace: Trace) -> Annotation:
        from simpatterns.annotate.annotator import annotate

        return annotate(trace, self.needed)

    def __call__(self, trace: Trace, annotation: Annotation | None = None) -> RewardResult:
        """Score a trace. ``annotation`` (e.g. the full library's) is used when
        given; it must hold the program's patterns."""
        ann = annotation if annotation is not None and self.covers(annotation) else self.annotate(trace)
        res = self.program.evaluate(ann, trace)
        reward = res.score if self.reward == "score" else float(res.success)
        clauses = {f"reward/{c.text}": float(c.score) for c in res.clauses}
        return RewardResult(float(reward), bool(res.success), float(res.score), clauses, ann)

    def zero(self) -> RewardResult:
        """The result for an action that was never simulated (invalid)."""
        return RewardResult(0.0, False, 0.0, {k: 0.0 for k in self.info_keys}, None)


class RewardProgramWrapper(gym.Wrapper):
    """Replace the reward of one of our environments with a reward program's.

    The wrapped environment must expose its last rollout as
    ``env.unwrapped.last_trace`` (None after an invalid action, which then
    scores 0). The step's ``info`` gains ``is_success`` (the program's
    success), ``program_score`` and one ``reward/<clause>`` key per top-level
    clause; the environment's own success stays in ``info["task_success"]``.
    ``library`` defaults to the environment's (``env.unwrapped.library``).

        env = RewardProgramWrapper(gym.make("simpatterns/PhyreOneBall-v0"), "goal.rwd")
    """

    def __init__(self, env: gym.Env, program: Any, reward: str = "score",
                 library: PatternLibrary | None = None):
        super().__init__(env)
        if not hasattr(env.unwrapped, "last_trace"):
            raise TypeError(
                f"{type(env.unwrapped).__name__} does not expose last_trace; "
                "RewardProgramWrapper needs one of simpatterns' environments"
            )
        if library is None:  # the environment's own library (the rope's is the 3D one)
            library = getattr(env.unwrapped, "library", None)
        self.program_reward = ProgramReward(program, reward, library)

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        trace = self.env.unwrapped.last_trace
        if trace is None:
            result = self.program_reward.zero()
        else:
            result = self.program_reward(trace, getattr(self.env.unwrapped, "last_annotation", None))
        info = dict(info)
        info.setdefault("task_success", info.get("is_success", False))
        info["is_success"] = result.success
        info["program_score"] = result.score
        info.update(result.clauses)
        return obs, result.reward, terminated, truncated, info
