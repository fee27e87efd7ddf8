"""PHYRE's ``metrics`` entry points: folds, eval setups and the ``Evaluator`` (AUCCESS), on our tasks."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from simpatterns.agents.folds import EVAL_SETUPS, get_fold as _get_fold
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, SimulationStatus, as_status, compute_metrics
from simpatterns.agents.tasks import TIER
from simpatterns.errors import SimpatternsError

MAIN_EVAL_SETUPS: tuple[str, ...] = EVAL_SETUPS
logger = logging.getLogger(__name__)


def get_fold(eval_setup: str, seed: int) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(train_ids, dev_ids, test_ids)`` of the fold (our tasks; PHYRE's ids and split rules)."""
    fold = _get_fold(eval_setup, seed)
    return fold.train, fold.dev, fold.test


def list_eval_setups() -> tuple[str, ...]:
    return tuple(sorted(EVAL_SETUPS))


def eval_setup_to_action_tier(eval_setup_name: str) -> str:
    if eval_setup_name.startswith(TIER):
        return TIER
    raise ValueError(f"no action tier for eval setup {eval_setup_name!r}; setups here: {', '.join(EVAL_SETUPS)}")


class AttemptLimitError(SimpatternsError, AssertionError):
    """More than MAX_TEST_ATTEMPTS valid attempts on one task (PHYRE raises AssertionError too)."""


class Evaluator:
    """Logs attempts and computes PHYRE's metrics, as ``phyre.Evaluator`` does."""

    def __init__(self, task_ids: Sequence[str]):
        self._task_ids = tuple(task_ids)
        self._log: list[tuple[str, SimulationStatus]] = []
        self.attempts_per_task_index = [0] * len(self._task_ids)

    def maybe_log_attempt(self, task_index: int, status: Any) -> bool:
        """Log a valid attempt (an invalid one is ignored: returns False)."""
        st = as_status(status)
        if st.is_invalid():
            return False
        if self.attempts_per_task_index[task_index] >= MAX_TEST_ATTEMPTS:
            raise AttemptLimitError(
                f"task {self._task_ids[task_index]} (index {task_index}) already has {MAX_TEST_ATTEMPTS} attempts, "
                "the most PHYRE's protocol allows")
        self._log.append((self._task_ids[task_index], st))
        self.attempts_per_task_index[task_index] += 1
        return True

    def compute_all_metrics(self) -> dict[str, Any]:
        metrics = compute_metrics(self._log, len(self._task_ids))
        if metrics["total_attempts"] < MAX_TEST_ATTEMPTS:  # PHYRE's warning, word for word
            logger.warning("Used %f attempts per task instead of maximum allowed %f. That probably indicate a bug "
                           "in evaluation loop.", metrics["total_attempts"], MAX_TEST_ATTEMPTS)
        return metrics

    def get_auccess(self, attempts: int = MAX_TEST_ATTEMPTS) -> float:
        return self.compute_all_metrics()["independent_solved_by_aucs"][attempts]

    def get_aucess(self, attempts: int = MAX_TEST_ATTEMPTS) -> float:  # PHYRE's deprecated spelling
        return self.get_auccess(attempts)

    def get_attempts_for_task(self, task_index: int) -> int:
        return self.attempts_per_task_index[task_index]

    @property
    def task_ids(self) -> tuple[str, ...]:
        return self._task_ids

    def __len__(self) -> int:
        return len(self._log)
