"""Action search: simulated annealing and random search (paper §5.2) for PHYRE scenes and rope tasks."""

from simpatterns.optimize.objective import CheckpointError, Evaluation, EvaluationLog, Objective, RolloutPool
from simpatterns.optimize.search import AnnealConfig, SearchResult, anneal, random_search


def __getattr__(name: str):
    # the rope objective imports MuJoCo: load it on first use only
    if name in ("RopeObjective", "code_goal", "final_code"):
        from simpatterns.optimize import rope

        return getattr(rope, name)
    raise AttributeError(f"module 'simpatterns.optimize' has no attribute {name!r}")


__all__ = ["AnnealConfig", "CheckpointError", "Evaluation", "EvaluationLog", "Objective", "RolloutPool", "RopeObjective",
           "SearchResult", "anneal", "code_goal", "final_code", "random_search"]
