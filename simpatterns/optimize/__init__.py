"""Action search for PHYRE scenes: simulated annealing and random search (paper §5.2)."""

from simpatterns.optimize.objective import Evaluation, Objective, RolloutPool
from simpatterns.optimize.search import AnnealConfig, SearchResult, anneal, random_search

__all__ = ["AnnealConfig", "Evaluation", "Objective", "RolloutPool", "SearchResult", "anneal", "random_search"]
