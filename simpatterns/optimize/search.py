"""Simulated annealing over PHYRE actions, and a random-search baseline (paper §5.2).

Both spend a budget of *samples*: simulated rollouts of valid actions.
Proposals PHYRE rejects (the ball overlaps a body or leaves the scene) are
redrawn before simulation and counted in ``invalid_proposals``, not in the
budget, as PHYRE does not count them as attempts.

Annealing works in the unit cube of the objective's actions (``(x, y, r)``
for PHYRE; ``objective.action_dim`` numbers for others, e.g. the rope's
pushes, `simpatterns.optimize.rope.RopeObjective`), or on the ``bins**3``
grid of PHYRE's quantised action space. Each round proposes ``batch_size``
neighbours of the current action (Gaussian steps of ``step_size``,
reflected into [0, 1]; on the grid rounded to cells, at least one cell
away), evaluates them together (in parallel with a process pool), takes the
best and accepts it by the Metropolis rule at the round's temperature. The
temperature falls from ``t_start`` to ``t_end`` over the budget
(``schedule`` "geometric" or "linear"); the step size falls from
``step_size`` to ``step_size * step_decay``. All randomness comes from
``seed``: a run gives the same result for any number of workers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from simpatterns.optimize.objective import Evaluation, Objective, RolloutPool
from simpatterns.simulators.phyre import quantize_action
from simpatterns.trace import Trace

SCHEDULES = ("geometric", "linear")
MAX_REDRAWS = 10_000  # proposals per sample before giving up (a scene with almost no valid action)

ProgressFn = Callable[[int, int, float], None]  # (samples done, budget, best score so far)


@dataclass(frozen=True)
class AnnealConfig:
    """Simulated-annealing settings (see the module docstring)."""

    t_start: float = 0.1
    t_end: float = 0.002
    schedule: str = "geometric"
    step_size: float = 0.15
    step_decay: float = 0.3
    batch_size: int = 1

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not (self.t_start > 0 and self.t_end > 0):
            raise ValueError("temperatures must be > 0")
        if not self.step_size > 0 or not self.step_decay > 0:
            raise ValueError("step_size and step_decay must be > 0")
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")

    def temperature(self, frac: float) -> float:
        if self.schedule == "linear":
            return self.t_start + (self.t_end - self.t_start) * frac
        return self.t_start * (self.t_end / self.t_start) ** frac

    def step(self, frac: float) -> float:
        return self.step_size * self.step_decay**frac


@dataclass
class SearchResult:
    """Outcome of one search. ``curve[k]`` is the best score after sample k+1."""

    method: str
    best_action: list[float]
    best_score: float
    best_success: bool  # the reward's success
    best_goal_success: bool  # the objective's success test
    curve: np.ndarray
    samples: int
    budget: int
    invalid_proposals: int
    seconds: float
    evaluations: list[Evaluation] = field(default_factory=list)
    best_trace: Trace | None = None

    @property
    def first_success(self) -> int | None:
        """1-based sample at which the reward first succeeded, or None."""
        for k, e in enumerate(self.evaluations, start=1):
            if e.success:
                return k
        return None

    def to_json(self) -> dict:
        return {
            "method": self.method, "best_action": self.best_action, "best_score": self.best_score,
            "best_success": self.best_success, "best_goal_success": self.best_goal_success,
            "samples": self.samples, "budget": self.budget, "invalid_proposals": self.invalid_proposals,
            "first_success": self.first_success, "seconds": self.seconds, "curve": self.curve.tolist(),
        }


class _Space:
    """Continuous unit cube of ``dim`` numbers, or PHYRE's bins^3 grid (cells as integer coordinates)."""

    def __init__(self, bins: int | None, dim: int = 3):
        if bins is not None and bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        if bins is not None and dim != 3:
            raise ValueError(f"bins quantise PHYRE's (x, y, r) actions; this objective has {dim} action numbers")
        self.bins, self.dim = bins, int(dim)

    def random(self, rng: np.random.Generator) -> np.ndarray:
        if self.bins is None:
            return rng.random(self.dim)
        return rng.integers(0, self.bins, 3).astype(np.float64)

    def neighbour(self, x: np.ndarray, step: float, rng: np.random.Generator) -> np.ndarray:
        if self.bins is None:
            return _reflect(x + rng.normal(0.0, step, self.dim), 0.0, 1.0)
        delta = np.rint(rng.normal(0.0, max(step * self.bins, 0.5), 3))
        if not delta.any():
            delta[rng.integers(3)] = rng.choice((-1.0, 1.0))
        return np.clip(_reflect(x + delta, 0.0, self.bins - 1.0), 0, self.bins - 1)

    def action(self, x: np.ndarray) -> list[float]:
        if self.bins is None:
            return [float(v) for v in x]
        ix, iy, ir = (int(v) for v in x)
        return quantize_action(ix + self.bins * iy + self.bins**2 * ir, self.bins).tolist()


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Mirror values back into [lo, hi] (a step past an edge bounces off it)."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    y = np.mod(x - lo, 2 * span)
    return lo + np.where(y > span, 2 * span - y, y)


class _Run:
    """Bookkeeping shared by both searches: budget, best, curve, redraws."""

    def __init__(self, objective: Objective, pool: RolloutPool, space: _Space, budget: int,
                 stop_on_success: bool, progress: ProgressFn | None, stop_on_goal: bool = False):
        if budget < 1:
            raise ValueError(f"budget must be >= 1, got {budget}")
        self.objective, self.pool, self.space = objective, pool, space
        self.budget, self.stop_on_success, self.progress = budget, stop_on_success, progress
        self.stop_on_goal = stop_on_goal
        self.goal_reached = False
        self.evaluations: list[Evaluation] = []
        self.curve: list[float] = []
        self.best: Evaluation | None = None
        self.invalid = 0

    @property
    def left(self) -> int:
        return self.budget - len(self.evaluations)

    @property
    def done(self) -> bool:
        if self.left <= 0 or (self.stop_on_goal and self.goal_reached):
            return True
        return self.stop_on_success and self.best is not None and self.best.success

    def valid(self, draw: Callable[[], np.ndarray]) -> np.ndarray:
        for _ in range(MAX_REDRAWS):
            x = draw()
            if self.objective.check(self.space.action(x)) is None:
                return x
            self.invalid += 1
        raise RuntimeError(f"no valid action found in {MAX_REDRAWS} proposals; is the scene full?")

    def evaluate(self, xs: list[np.ndarray]) -> list[Evaluation]:
        xs = xs[: self.left]
        evals = self.pool.evaluate([self.space.action(x) for x in xs])
        for e in evals:
            self.evaluations.append(e)
            self.goal_reached = self.goal_reached or e.goal_success
            if self.best is None or e.score > self.best.score:
                self.best = e
            self.curve.append(self.best.score)
        if self.progress is not None:
            assert self.best is not None
            self.progress(len(self.evaluations), self.budget, self.best.score)
        return evals

    def result(self, method: str, seconds: float, keep_trace: bool) -> SearchResult:
        assert self.best is not None
        trace = self.objective.rollout(self.best.action) if keep_trace else None
        return SearchResult(
            method=method, best_action=self.best.action, best_score=self.best.score,
            best_success=self.best.success, best_goal_success=self.best.goal_success,
            curve=np.asarray(self.curve, dtype=np.float64), samples=len(self.evaluations), budget=self.budget,
            invalid_proposals=self.invalid, seconds=seconds, evaluations=self.evaluations, best_trace=trace,
        )


def anneal(
    objective: Objective,
    budget: int,
    *,
    seed: int = 0,
    config: AnnealConfig = AnnealConfig(),
    bins: int | None = None,
    workers: int = 1,
    pool: RolloutPool | None = None,
    stop_on_success: bool = True,
    stop_on_goal: bool = False,
    keep_trace: bool = True,
    progress: ProgressFn | None = None,
) -> SearchResult:
    """Simulated annealing for ``budget`` samples; see the module docstring.

    ``bins`` searches the quantised Discrete(bins**3) space; ``workers > 1``
    evaluates each round's batch in a process pool (or pass an open `pool`).
    Stops early once the reward succeeds (score 1) unless ``stop_on_success``
    is False; ``stop_on_goal`` also stops at the first sample that meets the
    objective's goal test (an agent stops once the task is solved, whatever
    its reward says). ``keep_trace`` re-simulates the best action for ``best_trace``.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    space = _Space(bins, getattr(objective, "action_dim", 3))
    own = pool is None
    pool = pool if pool is not None else RolloutPool(objective, workers if config.batch_size > 1 else 1)
    try:
        if own:
            pool.__enter__()
        run = _Run(objective, pool, space, budget, stop_on_success, progress, stop_on_goal)
        x_cur = run.valid(lambda: space.random(rng))
        s_cur = run.evaluate([x_cur])[0].score
        while not run.done:
            frac = len(run.evaluations) / max(1, budget - 1)
            temp, step = config.temperature(frac), config.step(frac)
            n = min(config.batch_size, run.left)
            xs = [run.valid(lambda: space.neighbour(x_cur, step, rng)) for _ in range(n)]
            evals = run.evaluate(xs)
            k = int(np.argmax([e.score for e in evals]))  # first best on ties: deterministic
            s_new = evals[k].score
            u = rng.random()
            if s_new >= s_cur or u < math.exp((s_new - s_cur) / temp):
                x_cur, s_cur = xs[k], s_new
    finally:
        if own:
            pool.close()
    return run.result("anneal", time.perf_counter() - t0, keep_trace)


def random_search(
    objective: Objective,
    budget: int,
    *,
    seed: int = 0,
    bins: int | None = None,
    batch_size: int = 8,
    workers: int = 1,
    pool: RolloutPool | None = None,
    stop_on_success: bool = True,
    stop_on_goal: bool = False,
    keep_trace: bool = True,
    progress: ProgressFn | None = None,
) -> SearchResult:
    """Uniformly random valid actions (or grid cells); keeps the best. Same
    budget accounting, stopping rules and result as `anneal`."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    space = _Space(bins, getattr(objective, "action_dim", 3))
    own = pool is None
    pool = pool if pool is not None else RolloutPool(objective, workers)
    try:
        if own:
            pool.__enter__()
        run = _Run(objective, pool, space, budget, stop_on_success, progress, stop_on_goal)
        while not run.done:
            n = min(max(1, batch_size), run.left)
            run.evaluate([run.valid(lambda: space.random(rng)) for _ in range(n)])
    finally:
        if own:
            pool.close()
    return run.result("random", time.perf_counter() - t0, keep_trace)
