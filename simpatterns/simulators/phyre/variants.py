"""Offline search for each template's shipped variants (PHYRE's solvable-but-not-trivial rule).

For a template, candidate parameter sets are visited in a seeded shuffled
order. For each one:

1. **Estimate** the random-action solve rate from `ESTIMATE_ACTIONS` uniformly
   random *valid* actions (invalid ones are redrawn, as PHYRE's random agent
   does). Stop early and reject once 10% or more of that budget has solved:
   the variant is too easy.
2. **Search** for one solving action if the estimate found none: up to
   `SEARCH_ACTIONS` more valid actions, half uniform and half drawn near the
   goal bodies (a ball dropped onto or beside them), since a uniform search
   wastes most samples on empty sky. With the "reuse" strategy the first
   tries are solutions of already accepted variants of the same template
   (neighbouring layouts often share a solution). Reject if none solves.
3. **Verify** the solving action with a full simulation (no early stopping
   shortcuts); only then keep the row.

Screening rollouts use ``stop_when_settled`` (a run whose bodies all move
slower than the settle threshold with the goal pair apart is taken as
failed): a heuristic that can drop a slow-creeping solution from the
screen, which costs only candidates, never a wrong row; the verification
run does not use it.

Each candidate's random stream is derived from (seed, template, candidate
index), so results do not depend on worker count or order. Rows record the
estimated solve rate and the numbers of actions tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable

import numpy as np

from simpatterns.parallel import Backend, make_executor
from simpatterns.simulators.phyre.physics import check_action, simulate
from simpatterns.simulators.phyre.scene import Scene, SkipVariant
from simpatterns.simulators.phyre.templates import get_template

ESTIMATE_ACTIONS = 40
MAX_SOLVE_RATE = 0.10
SEARCH_ACTIONS = 200
TARGET_VARIANTS = 100
REUSE_TRIES = 40  # "reuse" strategy: known solutions tried before random search
CHUNK = 8  # candidates per round; fixed so "reuse" results do not depend on worker count
BUILD_SEED = 20261122


@dataclass
class CandidateResult:
    index: int
    params: dict[str, Any]
    accepted: bool
    reason: str
    solution: list[float] | None = None
    solve_rate: float | None = None
    estimate_solved: int = 0
    estimate_actions: int = 0
    search_actions: int = 0

    def row(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "solution": self.solution,
            "solve_rate": self.solve_rate,
            "estimate": f"{self.estimate_solved}/{self.estimate_actions}",
            "search_actions": self.search_actions,
        }


def random_valid_action(scene: Scene, sampler: Callable[[], np.ndarray]) -> np.ndarray:
    """Redraw from ``sampler`` until PHYRE would accept the action (as its random agent does)."""
    for _ in range(1000):
        a = sampler()
        if check_action(scene, a) is None:
            return a
    raise RuntimeError(f"template {scene.template}: no valid action in 1000 draws")


def near_goal_sampler(scene: Scene, rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """Actions whose ball starts above or beside one of the goal bodies (within 30 px in x)."""
    goal = [scene.bodies[i] for i in scene.goal] if scene.goal else []
    boxes = [(b.left, b.right, b.bottom, b.top) for b in goal]

    def sample() -> np.ndarray:
        left, right, bottom, top = boxes[int(rng.integers(len(boxes)))]
        r = rng.random()
        x = rng.uniform(max(0.0, left - 30), min(255.0, right + 30))
        y = rng.uniform(min(max(bottom, 0.0), 250.0), 255.0)  # above or beside the body
        return np.clip([x / 255.0, y / 255.0, r], 0.0, 1.0)

    return sample


def evaluate_candidate(
    template_id: str, index: int, params: dict[str, Any], seed: int = BUILD_SEED,
    known_solutions: list[list[float]] | None = None,
) -> CandidateResult:
    template = get_template(template_id)
    try:
        scene = template.scene(params)
    except SkipVariant:
        return CandidateResult(index, params, False, "skipped by template")
    rng = np.random.default_rng([seed, int(template_id), index])
    uniform = lambda: rng.random(3)  # noqa: E731
    solved_actions: list[np.ndarray] = []
    limit = math.ceil(MAX_SOLVE_RATE * ESTIMATE_ACTIONS)
    tried = 0
    for tried in range(1, ESTIMATE_ACTIONS + 1):
        a = random_valid_action(scene, uniform)
        if simulate(scene, a, stop_when_settled=True).success:
            solved_actions.append(a)
            if len(solved_actions) >= limit:
                return CandidateResult(
                    index, params, False, "too easy", estimate_solved=len(solved_actions), estimate_actions=tried
                )
    result = CandidateResult(
        index, params, False, "", solve_rate=len(solved_actions) / ESTIMATE_ACTIONS,
        estimate_solved=len(solved_actions), estimate_actions=ESTIMATE_ACTIONS,
    )
    if not solved_actions:
        near = near_goal_sampler(scene, rng)
        # "reuse": neighbouring parameter sets are often solved by the same action
        reuse = [np.asarray(a) for a in (known_solutions or [])[-REUSE_TRIES:][::-1]]
        reuse = [a for a in reuse if check_action(scene, a) is None]
        for k in range(1, SEARCH_ACTIONS + 1):
            a = reuse[k - 1] if k <= len(reuse) else random_valid_action(scene, uniform if k % 2 else near)
            result.search_actions = k
            if simulate(scene, a, stop_when_settled=True).success:
                solved_actions.append(a)
                break
    if not solved_actions:
        result.reason = "no solution found"
        return result
    for a in solved_actions:
        action = [float(v) for v in a]  # exact: JSON round-trips float64
        if simulate(scene, action).success:  # full run, as users will run it
            result.solution = action
            result.accepted = True
            result.reason = "accepted"
            return result
    result.reason = "solution did not verify"
    return result


def _evaluate_item(template_id: str, seed: int, known: list[list[float]] | None,
                   item: tuple[int, dict[str, Any]]) -> CandidateResult:
    return evaluate_candidate(template_id, item[0], item[1], seed, known)


def candidate_order(template_id: str, seed: int = BUILD_SEED) -> list[tuple[int, dict[str, Any]]]:
    template = get_template(template_id)
    sets = list(template.valid_param_sets())
    order = np.random.default_rng([seed, int(template_id)]).permutation(len(sets))
    return [(int(i), sets[int(i)]) for i in order]


def build_template(
    template_id: str,
    target: int = TARGET_VARIANTS,
    workers: int = 1,
    seed: int = BUILD_SEED,
    progress: Callable[[CandidateResult], None] | None = None,
    strategy: str = "reuse",
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Visit candidates in order until ``target`` are accepted (or candidates run out).

    ``strategy``: "random" searches each candidate independently; "reuse" (the
    default) first tries the solutions already accepted in earlier rounds of
    `CHUNK` candidates, which keeps results independent of worker count. ``backend``: where
    candidates run (None: this machine's processes).
    """
    if strategy not in ("random", "reuse"):
        raise ValueError(f"strategy must be 'random' or 'reuse', got {strategy!r}")
    candidates = candidate_order(template_id, seed)
    accepted: list[CandidateResult] = []
    stats: dict[str, int] = {}
    chunk = CHUNK if strategy == "reuse" else max(1, workers * 4)

    def consume(results: Iterable[CandidateResult]) -> bool:
        for res in results:
            stats[res.reason] = stats.get(res.reason, 0) + 1
            if progress:
                progress(res)
            if res.accepted:
                accepted.append(res)
                if len(accepted) >= target:
                    return True
        return False

    with make_executor(workers, backend=backend) as executor:
        for start in range(0, len(candidates), chunk):
            batch = candidates[start : start + chunk]
            known = [r.solution for r in accepted] if strategy == "reuse" else None
            # results in candidate order: the outcome does not depend on which worker finished first
            if consume(executor.map(partial(_evaluate_item, template_id, seed, known), batch)):
                break
    return {
        "template": template_id,
        "strategy": strategy,
        "rows": [r.row() for r in accepted],
        "stats": stats,
        "candidates_total": len(candidates),
    }


