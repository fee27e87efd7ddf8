"""Solution and near-miss rollouts of the shipped PHYRE variants, run to the horizon and as the
simulator stops them by default (at success), cached per process: what the Appendix G goal
programs are compared on (test_dsl_goal_agreement.py, benchmarks/goal_agreement.py)."""

from __future__ import annotations

from functools import lru_cache

from simpatterns.simulators.dataset import RolloutJob, job_rollout
from simpatterns.simulators.phyre import TEMPLATES, load_scene, simulate
from simpatterns.trace import Trace

KINDS = ("solution", "near-miss")


@lru_cache(maxsize=None)
def action(template: str, variant: int, kind: str) -> tuple[float, ...] | None:
    """The variant's shipped solution, or a perturbed solution that fails (simulators/dataset.py)."""
    r = job_rollout(RolloutJob(template, variant, kind, 0, seed=0))
    return None if r is None else tuple(r.trace.meta["action"])


@lru_cache(maxsize=None)
def rollout(template: str, variant: int, kind: str, full: bool = True) -> Trace | None:
    """The rollout of `action`: to the horizon (``full``), or stopped at success."""
    a = action(template, variant, kind)
    if a is None:
        return None
    return simulate(load_scene(template, variant), list(a), stop_on_success=not full).trace


def cases(variants: int) -> list[tuple[str, int, str]]:
    """(template, variant, kind) for the first ``variants`` variants of every template."""
    return [(t, v, k) for t in sorted(TEMPLATES) for v in range(variants) for k in KINDS]
