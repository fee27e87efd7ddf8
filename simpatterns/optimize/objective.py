"""What an action search maximises: one scene, one reward, one success test.

An `Objective` is plain, picklable data (scene, program text, reward kind,
simulation settings); its `RewardProgram` is parsed, checked and compiled
once in whichever process evaluates (the main one, and each worker once),
and scores every rollout by its one path, ``RewardProgram.evaluate``.
`RolloutPool` evaluates batches of actions inline or over worker processes
(`simpatterns.parallel`); results never depend on the number of workers.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Sequence

from simpatterns.errors import SimpatternsError
from simpatterns.parallel import Backend, Executor, WorkerSetup, make_executor, runs_inline
from simpatterns.simulators.phyre import MAX_STEPS, Scene, check_action, simulate
from simpatterns.simulators.phyre.physics import AGENT_NAME
from simpatterns.trace import Trace

REWARDS = ("score", "success", "task", "goal")


@dataclass
class Evaluation:
    """One candidate action and what it scored. ``success`` is the reward's own
    success (score 1); ``goal_success`` is the objective's success test."""

    action: list[float]
    score: float
    success: bool
    goal_success: bool
    frames: int = 0


@dataclass
class Objective:
    """Maximise ``reward`` of the rollout of an action on ``scene``.

    ``reward``: ``"score"`` the program's dense score, ``"success"`` the
    program's success as 0/1 (the sparse version of the same goal),
    ``"task"`` PHYRE's success as 0/1, ``"goal"`` ``goal(trace)`` as 0/1.
    ``goal`` is the success test reported for every evaluation (e.g. the
    paper's final-distance criterion); it defaults to the reward's success.
    ``program`` is reward-program text; ``library`` a pattern library spec
    (`PatternLibrary.to_spec`), None for the built-in one.
    """

    scene: Scene
    program: str | None = None
    reward: str = "score"
    goal: Callable[[Trace], bool] | None = None
    library: list | None = None
    max_steps: int = MAX_STEPS
    stop_on_success: bool = True
    stop_when_settled: bool = False
    _runtime: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if self.reward in ("score", "success") and self.program is None:
            raise ValueError(f"reward {self.reward!r} needs a reward program")
        if self.reward == "goal" and self.goal is None:
            raise ValueError("reward 'goal' needs a goal test")
        if self.program is not None:
            _ = self.reward_program  # compile now: a bad program fails here, not in a worker

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_runtime"] = None  # compiled programs and detectors hold functions; rebuilt on demand
        return state

    @property
    def reward_program(self):
        """The compiled `RewardProgram`, checked against the scene's bodies (built
        on first use in each process; None without a program)."""
        if self.program is None:
            return None
        if self._runtime is None:
            from simpatterns.detectors.library import PatternLibrary
            from simpatterns.dsl import RewardProgram

            lib = None if self.library is None else PatternLibrary.from_spec(self.library)  # None: built-in
            program = RewardProgram.coerce(self.program, lib)
            names = [b.name or b.kind for b in self.scene.bodies] + [AGENT_NAME]
            program.require_bodies(names, f"scene {self.scene.template or '?'}")
            self._runtime = program
        return self._runtime

    def check(self, action: Sequence[float]) -> str | None:
        """None if the action is valid in the scene, else why not."""
        return check_action(self.scene, action)

    def rollout(self, action: Sequence[float]) -> Trace | None:
        r = simulate(self.scene, action, max_steps=self.max_steps, stop_on_success=self.stop_on_success,
                     stop_when_settled=self.stop_when_settled)
        return r.trace

    def score_trace(self, trace: Trace) -> tuple[float, bool, bool]:
        """(score, reward success, goal success) of a rollout."""
        if self.reward in ("score", "success"):
            res = self.reward_program.evaluate(None, trace)
            ok = res.success
            score = res.score if self.reward == "score" else float(ok)
        elif self.reward == "task":
            ok = trace.success
            score = float(ok)
        else:
            assert self.goal is not None
            ok = bool(self.goal(trace))
            score = float(ok)
        goal_ok = bool(self.goal(trace)) if self.goal is not None else ok
        return float(score), bool(ok), goal_ok

    def evaluate(self, action: Sequence[float]) -> Evaluation:
        """Simulate and score one action; an invalid action scores 0. A rollout that stopped
        at success is simulated on to its horizon when the program's verdict needs the frames
        it skipped (`EvalResult.determined`)."""
        a = [float(v) for v in action]
        trace = self.rollout(a)
        if trace is None:
            return Evaluation(a, 0.0, False, False, 0)
        if (self.reward in ("score", "success") and trace.num_frames < trace.horizon
                and not self.reward_program.evaluate(None, trace).determined):
            trace = simulate(self.scene, a, max_steps=self.max_steps, stop_on_success=False,
                             stop_when_settled=self.stop_when_settled).trace
        score, ok, goal_ok = self.score_trace(trace)
        return Evaluation(a, score, ok, goal_ok, trace.num_frames)


# ------------------------------------------------------------------ pool
def _worker_objective(objective: Objective) -> Objective:
    """The objective in a worker, its program compiled once there (not per action)."""
    _ = objective.reward_program
    return objective


def _evaluate(objective: Objective, action: list[float]) -> Evaluation:
    return objective.evaluate(action)


class CheckpointError(SimpatternsError, ValueError):
    """A checkpoint file that belongs to other settings, or cannot be read."""


class EvaluationLog:
    """A search's checkpoint: every evaluation, one JSON line each, appended (and flushed)
    as it finishes, after a first line holding the search's settings. A search is
    deterministic given its seed, so re-running it against the log replays the evaluations
    it holds (no simulation) and simulates only the rest: the resumed result is the
    uninterrupted one. A last line cut by a kill is ignored."""

    def __init__(self, path: str | os.PathLike, settings: dict[str, Any]):
        self.path = Path(path)
        self.settings = json.loads(json.dumps(settings))
        self.known: dict[tuple[float, ...], Evaluation] = {}
        self._fh: IO[str] | None = None
        self._cut = False  # a line cut short: rewrite the file before appending to it
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{self.path}: cannot read the checkpoint ({exc})") from None
        try:
            head = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            head = None
        if not isinstance(head, dict) or head.get("settings") != self.settings:
            raise CheckpointError(f"{self.path}: a checkpoint of another search (other settings); "
                                  "delete it, or give this search another --out")
        for line in lines[1:]:
            try:
                e = Evaluation(**json.loads(line))
            except (json.JSONDecodeError, TypeError):
                self._cut = True  # the line a kill cut short; what follows it (nothing) is not trusted
                break
            self.known[tuple(e.action)] = e

    def get(self, action: Sequence[float]) -> Evaluation | None:
        return self.known.get(tuple(action))

    def add(self, evaluations: Sequence[Evaluation]) -> None:
        if self._fh is None:
            fresh = not self.path.exists() or not self.known or self._cut
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w" if fresh else "a", encoding="utf-8")
            if fresh:  # (re)written whole: the settings, then what is known so far
                self._fh.write(json.dumps({"settings": self.settings}) + "\n")
                for old in self.known.values():
                    self._fh.write(json.dumps(asdict(old)) + "\n")
        for e in evaluations:
            self.known[tuple(e.action)] = e
            self._fh.write(json.dumps(asdict(e)) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class RolloutPool:
    """Evaluates batches of actions for one objective over ``workers`` processes
    (`simpatterns.parallel`); each worker builds the objective once. Use as a context
    manager; results keep input order and do not depend on the number of workers.
    With a ``checkpoint`` (`EvaluationLog`) evaluations it holds are replayed and new
    ones are added to it as each batch finishes. ``backend``: where the workers run (None:
    this machine's processes)."""

    def __init__(self, objective: Objective, workers: int = 1, checkpoint: EvaluationLog | None = None,
                 backend: Backend | None = None):
        self.objective = objective
        self.backend = backend
        self.workers = max(1, int(workers))
        self.checkpoint = checkpoint
        self.replayed = 0
        self._executor: Executor | None = None

    def __enter__(self) -> "RolloutPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self.checkpoint is not None:
            self.checkpoint.close()

    def evaluate(self, actions: Sequence[Sequence[float]]) -> list[Evaluation]:
        acts = [[float(v) for v in a] for a in actions]
        if self.checkpoint is None:
            return self._simulate(acts)
        out: list[Evaluation | None] = [self.checkpoint.get(a) for a in acts]
        todo = [a for a, e in zip(acts, out) if e is None]
        self.replayed += len(acts) - len(todo)
        fresh = iter(self._simulate(todo) if todo else [])
        out = [e if e is not None else next(fresh) for e in out]
        self.checkpoint.add([e for e in out if tuple(e.action) not in self.checkpoint.known])
        return out  # type: ignore[return-value]

    def _simulate(self, acts: list[list[float]]) -> list[Evaluation]:
        if (self.workers <= 1 and runs_inline(1, self.backend)) or len(acts) <= 1:  # one rollout: no round trip
            return [self.objective.evaluate(a) for a in acts]
        if self._executor is None:  # workers start on the first batch and serve every later one
            self._executor = make_executor(self.workers, WorkerSetup(_worker_objective, (self.objective,)),
                                           backend=self.backend)
        return self._executor.map(_evaluate, acts, chunksize=1)
