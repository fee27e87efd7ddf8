"""PHYRE's metric: AUCCESS, success@k and attempts, from attempt logs.

An attempt log is the sequence of ``(task, status)`` of one evaluation.
Invalid attempts (the ball overlaps a body or leaves the scene) are dropped
before anything is counted, as PHYRE drops them: they never use the budget.
For each task, ``solved_at`` is the number of its valid attempts up to and
including its first solving one.

- ``success@k`` = the share of tasks solved within k attempts;
- ``AUCCESS`` = sum_{k<=100} w_k success@k / sum_{k<=100} w_k with PHYRE's
  weights w_k = log(k+1) - log(k), which reward solving early;
- ``AUCCESS@K`` = the same sum cut at K (weights renormalised over k <= K),
  which is what PHYRE's ``Evaluator.get_auccess(K)`` returns;
- mean attempts = attempts used per task (up to the first success, or all
  of them), over all tasks.

A task never attempted counts as unsolved: the denominator is the number of
tasks given, not the number seen. `compute_metrics` returns the dictionary
PHYRE's evaluator computes, key for key, and equals it on every log
(`tests/agents/test_metrics.py` compares with PHYRE 0.2.2's output).
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

MAX_TEST_ATTEMPTS = 100


class SimulationStatus(enum.IntEnum):
    """Outcome of one attempt, with PHYRE's codes."""

    NOT_SOLVED = -1
    INVALID_INPUT = 0
    SOLVED = 1
    UNSTABLY_SOLVED = 2
    STABLY_SOLVED = 3

    def is_solved(self) -> bool:
        return self in (SimulationStatus.SOLVED, SimulationStatus.UNSTABLY_SOLVED, SimulationStatus.STABLY_SOLVED)

    def is_stably_solved(self) -> bool:
        return self is SimulationStatus.STABLY_SOLVED

    def is_not_solved(self) -> bool:
        return self is SimulationStatus.NOT_SOLVED

    def is_invalid(self) -> bool:
        return self is SimulationStatus.INVALID_INPUT


def as_status(status: Any) -> SimulationStatus:
    """A `SimulationStatus` from itself, its code (int or numeric string) or PHYRE's enum."""
    if isinstance(status, str):
        status = int(status)
    return SimulationStatus(int(status))


def auccess_weights(cap: int = MAX_TEST_ATTEMPTS) -> list[float]:
    """w_k = log(k+1) - log(k) for k = 1..cap."""
    return [math.log(k + 1) - math.log(k) for k in range(1, cap + 1)]


def solved_at(log: Iterable[tuple[str, Any]]) -> tuple[dict[str, int], Counter]:
    """(task -> valid attempts up to its first success, task -> valid attempts made)."""
    first: dict[str, int] = {}
    attempts: Counter = Counter()
    for task, status in log:
        st = as_status(status)
        if st.is_invalid():
            continue
        attempts[task] += 1
        if task not in first and st.is_solved():
            first[task] = attempts[task]
    return first, attempts


def solved_counts(solved: Iterable[int | None], cap: int = MAX_TEST_ATTEMPTS) -> list[int]:
    """``counts[k]`` = tasks solved within k attempts, k = 0..cap (a first success
    after ``cap`` attempts is not counted)."""
    per = Counter(s for s in solved if s is not None and 1 <= s <= cap)
    out = [0]
    for k in range(1, cap + 1):
        out.append(out[-1] + per.get(k, 0))
    return out


def auccess_curve(counts: Sequence[int], num_tasks: int) -> list[float]:
    """``aucs[K]`` = AUCCESS@K for K = 0..len(counts)-1 (``aucs[0]`` = 0), from
    `solved_counts`. Summed in the order PHYRE sums, so the floats are PHYRE's own."""
    if num_tasks < 1:
        raise ValueError("AUCCESS needs at least one task")
    aucs = [0.0]
    num = denom = 0.0
    for k in range(1, len(counts)):
        w = math.log(k + 1) - math.log(k)
        num += w * counts[k]
        denom += w
        aucs.append(num / denom / num_tasks)
    return aucs


def auccess(solved: Iterable[int | None], num_tasks: int, cap: int = MAX_TEST_ATTEMPTS) -> float:
    """AUCCESS@cap of ``num_tasks`` tasks whose first success came at ``solved`` (None: never)."""
    if cap < 1:
        raise ValueError(f"AUCCESS needs a cap >= 1, got {cap}")
    return auccess_curve(solved_counts(solved, cap), num_tasks)[cap]


def compute_metrics(log: Sequence[tuple[str, Any]], num_tasks: int) -> dict[str, Any]:
    """PHYRE's metrics dictionary for an attempt log over ``num_tasks`` tasks (normalised by it).

    Keys as PHYRE's ``Evaluator.compute_all_metrics``: ``independent_solved_by``
    (share solved within k attempts, k = 0..100), ``independent_solved_by_aucs``
    (AUCCESS@k, k = 0..100), ``global_solved_by`` (share solved within the first
    100 / 1000 / 100000 valid attempts of the whole log), ``total_attempts``,
    ``total_solved`` (per task).
    """
    first, attempts = solved_at(log)
    counts = solved_counts(first.values())
    # global_solved_by counts by position in the whole log of valid attempts
    points = []
    position = 0
    seen: set[str] = set()
    for task, status in log:
        st = as_status(status)
        if st.is_invalid():
            continue
        position += 1
        if task not in seen and st.is_solved():
            seen.add(task)
            points.append(position)
    return {
        "independent_solved_by": [c / num_tasks for c in counts],
        "independent_solved_by_aucs": auccess_curve(counts, num_tasks),
        "global_solved_by": {t: sum(p <= t for p in points) / num_tasks for t in (100, 1000, 100000)},
        "total_attempts": sum(attempts.values()) / num_tasks,
        "total_solved": len(points) / num_tasks,
    }


@dataclass(frozen=True)
class Scores:
    """The numbers of one evaluation (one condition, one seed, its tasks)."""

    tasks: int
    budget: int
    auccess: float  # cut at min(budget, 100): attempts beyond the budget cannot happen
    auccess_at: dict[int, float]
    success_at_1: float
    success_at_budget: float
    mean_attempts: float
    curve: list[float]  # success@k for k = 1..budget

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "budget": self.budget, "auccess": self.auccess,
                "auccess_at": {str(k): v for k, v in self.auccess_at.items()}, "success_at_1": self.success_at_1,
                "success_at_budget": self.success_at_budget, "mean_attempts": self.mean_attempts,
                "curve": self.curve}


def score(solved: Mapping[str, int | None], used: Mapping[str, int], budget: int,
          caps: Sequence[int] = (10,)) -> Scores:
    """`Scores` of tasks ``solved`` (task -> first solving attempt or None) and ``used``
    (task -> attempts used). AUCCESS is PHYRE's (cap 100); with a budget under 100 the
    curve stays flat after the budget, so AUCCESS@budget is also given in ``auccess_at``."""
    n = len(solved)
    if n == 0:
        raise ValueError("no tasks to score")
    if not 1 <= budget <= MAX_TEST_ATTEMPTS:
        raise ValueError(f"budget must be in 1..{MAX_TEST_ATTEMPTS}, got {budget}")
    counts = solved_counts(solved.values())
    aucs = auccess_curve(counts, n)
    return Scores(
        tasks=n, budget=budget, auccess=aucs[MAX_TEST_ATTEMPTS],
        auccess_at={k: aucs[k] for k in sorted({*caps, budget}) if 1 <= k <= MAX_TEST_ATTEMPTS},
        success_at_1=counts[1] / n, success_at_budget=counts[budget] / n,
        mean_attempts=float(np.mean([used.get(t, 0) for t in solved])),
        curve=[c / n for c in counts[1 : budget + 1]],
    )


def expected_random_curve(valid: int, solving: int, budget: int) -> np.ndarray:
    """success@k, k = 1..budget, of trying ``valid`` choices in a uniformly random order
    without replacement when ``solving`` of them solve: 1 - C(N-S, k) / C(N, k)."""
    if not 0 <= solving <= valid:
        raise ValueError(f"solving ({solving}) must be in 0..valid ({valid})")
    out = np.empty(budget)
    miss = 1.0  # P(first k all fail), a running product
    for k in range(1, budget + 1):
        if k <= valid:
            miss *= max(0.0, (valid - solving - (k - 1)) / (valid - (k - 1)))
        out[k - 1] = 1.0 - miss
    return out


def expected_random_attempts(valid: int, solving: int, budget: int) -> float:
    """Expected attempts used (to the first success, at most ``budget``, at most ``valid``)."""
    curve = expected_random_curve(valid, solving, budget)
    # E[min(T, B)] = sum_{k=0}^{B-1} P(T > k), and no more than the menu holds
    survive = np.concatenate([[1.0], 1.0 - curve[:-1]])
    return float(survive[: min(budget, valid)].sum())


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean (0 for fewer than two values)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
