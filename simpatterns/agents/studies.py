"""Library studies on the agent benchmark: the library-size curve (§4.2) and leave-one-out importance (§4.4).

The mechanism is the Q&A benchmark's (`simpatterns.qa.studies.curve_study`,
`importance_study`): it picks the views of the library and summarises; here a
view is scored by an ordinary agent run (`runner.evaluate`) of one
language-model condition whose feedback shows only the view's patterns
(`LLMAgent` ``patterns``: the library still runs in full, so the dependencies
of a shown pattern fire as before, unshown). Each view is a run directory of
its own under the study's, so a killed study resumes where it stopped and
every view can be reported with ``simpatterns agent report``.

The score of a view is AUCCESS (PHYRE's, or AUCCESS@K with ``cap``) per
episode: the AUCCESS of a set of tasks is the mean of its tasks' own, so the
study's mean is the run's AUCCESS and its bootstrap interval is over the
episodes (seed × task). Importance = percentage drop of AUCCESS from the full
library's. Unlike Q&A, where every view reads the same rollouts, here the
rollouts differ between views (the model chooses differently), so each view
simulates and annotates its own attempts.

Repeats of the leave-one-out study change the model's request seeds
(``sample_seed``), which matters only when sampling (temperature > 0).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.agents.episode import AgentEpisode
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, auccess
from simpatterns.agents.runner import Condition, EvalConfig, RunError, evaluate
from simpatterns.parallel import Backend
from simpatterns.qa.studies import check_labels, curve_study, importance_study


def metric_name(cap: int = MAX_TEST_ATTEMPTS) -> str:
    return "AUCCESS" if cap == MAX_TEST_ATTEMPTS else f"AUCCESS@{cap}"


def view_condition(condition: Condition, visible: Sequence[str] | None, repeat: int = 0) -> Condition:
    """``condition`` showing only ``visible`` patterns (None: all), with request seeds of ``repeat``."""
    if condition.agent != "llm":
        raise RunError(f"library studies need a language-model condition (llm/...), not {condition.name}")
    opts = {k: v for k, v in condition.options.items() if k not in ("patterns", "sample_seed")}
    if visible is not None:
        opts["patterns"] = list(visible)
    if repeat:
        opts["sample_seed"] = repeat
    return replace(condition, options=opts)


def episode_scores(episodes: Sequence[AgentEpisode], condition: str, cap: int = MAX_TEST_ATTEMPTS) -> np.ndarray:
    """AUCCESS@cap of each episode of ``condition`` alone (their mean is the condition's AUCCESS@cap)."""
    return np.array([auccess([e.solved_at], 1, cap) for e in episodes if e.condition == condition], dtype=float)


def _scorer(config: EvalConfig, condition: Condition, client: Any, cap: int, library: Any, cache_dir: Any,
            workers: int, log: Callable[[str], None] | None, backend: Backend | None = None
            ) -> Callable[[list[str] | None, Path, int], np.ndarray]:
    def score_view(visible: list[str] | None, run_dir: Path, repeat: int) -> np.ndarray:
        cond = view_condition(condition, visible, repeat)
        outcome = evaluate(run_dir, config, [cond], workers=workers, backend=backend, cache_dir=cache_dir,
                           client_factory=lambda _: client, library=library, log=log or (lambda s: None))
        scores = episode_scores(outcome.episodes, cond.name, cap)
        if scores.size == 0:
            raise RunError(f"{run_dir}: no episodes")
        return scores

    return score_view


def _info(config: EvalConfig, condition: Condition, cap: int) -> dict[str, Any]:
    from simpatterns.agents.runner import test_tasks

    n = sum(len(test_tasks(config, s)) for s in config.seeds)
    return {"benchmark": "agents", "condition": condition.name, "episodes": n, "cap": cap, "config": config.to_json()}


def _library(library: Any) -> Any:
    if library is None:
        from simpatterns.detectors.library import PatternLibrary

        library = PatternLibrary.builtin()
    return library


def _check_cap(cap: int) -> None:
    if not 1 <= cap <= MAX_TEST_ATTEMPTS:
        raise ValueError(f"cap must be in 1..{MAX_TEST_ATTEMPTS}, got {cap}")


def library_curve(config: EvalConfig, condition: Condition, client: Any, out_dir: str | os.PathLike,
                  sizes: Sequence[int], trials: int = 3, seed: int = 0, *, cap: int = MAX_TEST_ATTEMPTS,
                  library: Any = None, cache_dir: str | os.PathLike | None = None, workers: int = 1,
                  log: Callable[[str], None] | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """AUCCESS against the number of patterns shown: ``trials`` random subsets per size (``curve.json``)."""
    _check_cap(cap)
    library = _library(library)
    view_condition(condition, None)  # an llm condition
    score = _scorer(config, condition, client, cap, library, cache_dir, workers, log, backend)
    return curve_study(library.order(), score, out_dir, sizes, trials, seed, metric=metric_name(cap),
                       info=_info(config, condition, cap), log=log)


def importance(config: EvalConfig, condition: Condition, client: Any, out_dir: str | os.PathLike,
               labels: Sequence[str] | None = None, repeats: int = 1, *, cap: int = MAX_TEST_ATTEMPTS,
               library: Any = None, cache_dir: str | os.PathLike | None = None, workers: int = 1,
               log: Callable[[str], None] | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """Leave-one-out: each pattern removed with its dependents; importance = % AUCCESS drop
    (``importance.json``)."""
    _check_cap(cap)
    library = _library(library)
    view_condition(condition, None)
    check_labels(library, labels)
    score = _scorer(config, condition, client, cap, library, cache_dir, workers, log, backend)
    return importance_study(library, score, out_dir, labels, repeats, metric=metric_name(cap),
                            info=_info(config, condition, cap), log=log)
