"""`RewardProgramWrapper`: the one way a reward program reaches an environment.

The wrapper switches on the environment's ``info_trace``, so each step's
``info["trace"]`` reaches it with the rollout's `Trace`, and scores it with the
program's one evaluation path, `RewardProgram.evaluate`: the trace is
annotated with only the patterns the program reads (plus their
dependencies), so a program made of NEARBY_AT/TOUCHING clauses costs no
detector at all, and the result equals ``simpatterns reward eval`` on the
same trace. An annotation the environment already made (``info
["annotation"]``, with ``annotate=True``) is used when it holds those
patterns. The annotation is made by an `IncrementalAnnotator`: on a
multi-step episode, whose trace grows step by step, the earlier frames'
per-frame work is not done again (the rope's step 50 costs about 1.1x its
step 1, against 3-4x when re-annotated whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from simpatterns.dsl import RewardProgram

if TYPE_CHECKING:
    from simpatterns.annotate.incremental import IncrementalAnnotator

REWARD_KINDS = ("score", "success", "gain")
INVALID_SCORES = ("left-alone", "zero")


class RewardProgramWrapper(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Replace the reward of one of our environments with a reward program's.

    ``program``: text, a ``.rwd`` path or a `RewardProgram` (text and paths
    are compiled once, against ``library``; by default the environment's own
    library, ``env.unwrapped.library``: the built-in one for PHYRE, the 3D one
    for the rope).
    ``reward="score"`` pays the dense score in [0, 1]; ``"success"`` 1.0 on
    the program's success, else 0.0; ``"gain"`` 1.0 on success, else how
    much the score rose above the program's score on the task's rollout left
    alone, and 0 where it did not (``info["left_alone_score"]``; taken as 0
    for an environment with no such rollout). Most actions leave the goal
    bodies as they were and score what doing nothing scores, which differs
    from scene to scene: the gain pays only for coming closer than that. It
    never pays less than 0: actions that disturb the goal bodies without
    solving are where solutions lie, and a learner penalised for them stays
    away (in `benchmarks/rl.py` the gain trained PPO better than the score
    and than a signed gain). An invalid action changes nothing, so by
    default (``invalid="left-alone"``) it is scored as the world left alone:
    the program on the scene's rollout without the action (for environments
    that offer one, ``left_alone_trace()``; else 0, and 0 for a program about
    the action's own ball). A dense reward then pays
    for coming closer to the goal than doing nothing, not for validity itself
    (a learner paid 0 for invalid actions learns to avoid the regions around
    obstacles, where PHYRE's solutions often lie). ``invalid="zero"`` pays 0.
    Each step pays the change of that value since the previous step (0 at
    reset): a one-step episode is paid its score, and a multi-step episode,
    whose trace grows step by step, returns exactly its final score. This is
    potential-based shaping, so it leaves the optimal policy unchanged, and
    hovering near success earns nothing more than reaching it.

    Reset checks the program's body names against the scene's (``info
    ["bodies"]``) and raises ValueError naming the scene when one is
    missing. The step's ``info`` gains ``is_success`` (the program's
    success), ``program_score``,
    ``program_determined`` (False when the rollout stopped at success before
    its horizon and the frames it skipped could change the verdict) and one
    ``reward/<clause>`` key per top-level clause; the environment's own
    success stays in ``info["task_success"]``. ``terminate_on_success``
    also ends the episode when the program succeeds (for multi-step
    environments such as the rope's; the environment's own termination
    stands either way). Only with ``info_trace=True`` does ``info`` also carry
    the rollout's ``trace`` and the ``annotation`` the program read: they are
    hundreds of kB, and vector environments ship every step's ``info``
    between processes.

        env = RewardProgramWrapper(gym.make("simpatterns/PhyreOneBall-v0"), "goal.rwd")
        env = RewardProgramWrapper(gym.make("simpatterns/KnotRope-v0"), 'EVENT("crossing removed")')
    """

    def __init__(self, env: gym.Env, program: Any, reward: str = "score", library: Any = None,
                 terminate_on_success: bool = False, info_trace: bool = False, invalid: str = "left-alone"):
        gym.utils.RecordConstructorArgs.__init__(self, program=program, reward=reward, library=library,
                                                 terminate_on_success=terminate_on_success, info_trace=info_trace,
                                                 invalid=invalid)
        gym.Wrapper.__init__(self, env)
        if reward not in REWARD_KINDS:
            raise ValueError(f"program reward must be one of {REWARD_KINDS}, got {reward!r}")
        if invalid not in INVALID_SCORES:
            raise ValueError(f"invalid must be one of {INVALID_SCORES}, got {invalid!r}")
        self.invalid = invalid
        if not hasattr(env.unwrapped, "info_trace"):
            raise TypeError(
                f"{type(env.unwrapped).__name__} cannot put its rollout's trace in info (no info_trace switch); "
                "RewardProgramWrapper needs one of simpatterns' environments"
            )
        if library is None and not isinstance(program, RewardProgram):
            library = getattr(env.unwrapped, "library", None)  # the env's patterns (the rope's are 3D)
        self.program = RewardProgram.coerce(program, library)
        self.reward_kind = reward
        self.terminate_on_success = bool(terminate_on_success)
        self.info_trace = bool(info_trace)
        self._env_info_trace = bool(env.unwrapped.info_trace)  # the caller's own setting for the env
        self.info_keys = [f"reward/{c}" for c in self.program.clauses]
        env.unwrapped.info_trace = True
        self._fitted: set[tuple[str, ...]] = set()
        self._alone_fits: dict[tuple[str, ...], bool] = {}  # body names -> the program fits the left-alone scene
        self._alone_results: dict[int, tuple[Any, Any]] = {}  # id(left-alone trace) -> (trace, EvalResult)
        self._scene_checked = False
        self._paid = 0.0  # the value paid so far this episode (the potential)
        self._annotator_made: "IncrementalAnnotator | None" = None

    def _fit(self, names: Any, where: str) -> None:
        key = tuple(names)
        if key not in self._fitted:
            self.program.require_bodies(list(key), where)
            self._fitted.add(key)

    @property
    def _annotator(self) -> "IncrementalAnnotator":
        """Annotates each step's trace with the patterns the program reads; a multi-step
        episode's trace grows, and only its new frames' per-frame work is done."""
        if self._annotator_made is None:
            from simpatterns.annotate.incremental import IncrementalAnnotator

            self._annotator_made = IncrementalAnnotator(self.program.needed_library)
        return self._annotator_made

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._paid = 0.0
        if self._annotator_made is not None:
            self._annotator_made.reset()
        bodies = info.get("bodies")
        self._scene_checked = bodies is not None
        if bodies is not None:
            where = f"scene {info['template']}:{info['variant']}" if "template" in info else \
                f"{info.get('task', 'this')} task"
            self._fit(bodies, where)
        return obs, info

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        trace = info.get("trace")
        info.setdefault("task_success", info.get("is_success", False))
        given = info.get("annotation")
        alone = trace is None  # an invalid action: nothing was simulated
        if alone:
            trace, given = self._left_alone(), None
        if trace is None:
            info.update(is_success=False, program_score=0.0, program_determined=True)
            info.update({k: 0.0 for k in self.info_keys})
            return obs, self._pay(0.0), terminated, truncated, self._trimmed(info, None)
        if not self._scene_checked:
            self._fit(trace.names, "trace")
        if alone:
            result = self._scored_alone(trace)
        else:
            if given is None or not self.program.covers(given):
                given = self._annotator.annotate(trace)
            result = self.program.evaluate(given, trace)
        info["is_success"] = bool(result.success)
        info["program_score"] = float(result.score)
        value = float(result.success) if self.reward_kind == "success" else float(result.score)
        if self.reward_kind == "gain":
            info["left_alone_score"] = baseline = self._left_alone_score()
            value = 1.0 if result.success else max(0.0, value - baseline)
        # False when the rollout stopped before its horizon and the frames it did not simulate could
        # change the verdict (run the environment with stop_on_success=False to simulate them)
        info["program_determined"] = bool(result.determined)
        info.update({k: float(c.score) for k, c in zip(self.info_keys, result.clauses)})
        reward = self._pay(value)
        terminated = terminated or (self.terminate_on_success and bool(result.success))
        return obs, reward, terminated, truncated, self._trimmed(info, result.annotation)

    def _scored_alone(self, trace: Any) -> Any:
        """The program's result on the task's rollout left alone: the same trace each time, scored once."""
        hit = self._alone_results.get(id(trace))
        if hit is None or hit[0] is not trace:
            if len(self._alone_results) >= 64:
                self._alone_results.clear()
            hit = self._alone_results[id(trace)] = (trace, self.program.evaluate(None, trace))
        return hit[1]

    def _left_alone_score(self) -> float:
        """``reward="gain"``'s baseline: the program's score on the task's rollout left alone; 0
        without one."""
        trace = self._alone_trace()
        return 0.0 if trace is None else float(self._scored_alone(trace).score)

    def _left_alone(self) -> Any:
        """The rollout an invalid action is scored on, or None to pay 0 (``invalid="zero"``, or
        no rollout left alone to grade)."""
        return None if self.invalid == "zero" else self._alone_trace()

    def _alone_trace(self) -> Any:
        """The task's rollout left alone, or None: an environment with no such rollout, or a
        program about the action's own ball, which the world left alone never placed."""
        make = getattr(self.env.unwrapped, "left_alone_trace", None)
        if make is None:
            return None
        trace = make()
        key = tuple(trace.names)
        fits = self._alone_fits.get(key)
        if fits is None:
            fits = self._alone_fits[key] = not self.program.check_bodies(list(key))
        return trace if fits else None

    def _pay(self, value: float) -> float:
        """The change of the episode's value since the last step."""
        reward, self._paid = value - self._paid, value
        return reward

    def _trimmed(self, info: dict[str, Any], annotation: Any) -> dict[str, Any]:
        """``info`` with the trace and the program's annotation only where asked for."""
        if self.info_trace:
            info["annotation"] = annotation
        elif not self._env_info_trace:
            info.pop("trace", None)
        return info
