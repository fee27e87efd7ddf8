"""Library studies: the library-size curve (§4.2) and leave-one-out importance (§4.4).

`curve_study` and `importance_study` are the mechanism, for any benchmark: they
choose the views of the library (which patterns are shown), ask the benchmark
to score each view in its own run directory (a `ViewScorer`), and summarise.
`library_curve` and `importance` run them on the Q&A benchmark;
`simpatterns.agents.studies` on the agent benchmark.

On Q&A both annotate every rollout once with the full library and then show only
some patterns (`views.restrict`; dependencies of a shown pattern run but are
not shown), so each point costs only its model requests. Each point is an
ordinary eval run in a subdirectory, so a killed study resumes where it
stopped and every answer can be re-scored offline.

- Library-size curve: for each size k, ``trials`` random k-subsets of the
  library's labels (the full library once); mean accuracy over trials, with a
  95 % bootstrap interval over the pooled questions of the trials.
- Leave-one-out: the full library (``repeats`` runs with different request
  seeds), then for each pattern the library without it and every pattern
  that depends on it (`PatternLibrary.dependents`); importance = percentage
  drop of accuracy from the full library's.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.detectors.contract import normalize_label
from simpatterns.files import atomic_write_json
from simpatterns.parallel import Backend
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.questions import Question
from simpatterns.qa.report import CURVE_FILE, IMPORTANCE_FILE
from simpatterns.qa.runner import EvalSettings, read_responses, run_eval, slug
from simpatterns.qa.scoring import bootstrap_ci, grade_run


# (labels shown, or None for the full library; the run directory of that view; the repeat) -> per-item scores,
# whose mean is the benchmark's metric (Q&A: 1/0 per answer; agents: AUCCESS per episode)
ViewScorer = Callable[[list[str] | None, Path, int], Sequence[float]]


def _correct(questions: Sequence[Question], run_dir: Path, condition: str) -> np.ndarray:
    return np.array([g.correct for g in grade_run(questions, read_responses(run_dir)) if g.condition == condition],
                    dtype=float)


def _view_run(questions: Sequence[Question], builder: ContextBuilder, visible: list[str] | None, client: Any,
              run_dir: Path, settings: EvalSettings, run_info: dict[str, Any], workers: int,
              log: Callable[[str], None] | None, backend: Backend | None = None) -> np.ndarray:
    view = replace(builder, visible=visible)
    outcome = run_eval(questions, view, client, run_dir, settings, run_info=run_info, workers=workers, log=log,
                       backend=backend)
    if outcome.stopped:
        raise RuntimeError(f"{run_dir}: stopped: {outcome.stopped}")
    if outcome.failed:
        raise RuntimeError(f"{run_dir}: {outcome.failed} request(s) failed, e.g. {outcome.errors[0]}; "
                           "run the study again to retry them")
    return _correct(questions, run_dir, settings.conditions[0])


def parse_sizes(spec: str, n_labels: int) -> list[int]:
    """``"0,1,2,4,8,all"`` -> sizes (``all`` = the library's size), sorted, capped at the library."""
    out = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if part == "all":
            out.add(n_labels)
            continue
        if not part.isdigit():
            raise ValueError(f"--sizes: {part!r} is not a whole number or 'all' (in {spec!r})")
        out.add(min(int(part), n_labels))
    if not out:
        raise ValueError(f"--sizes {spec!r} names no size")
    return sorted(out)


def curve_study(labels: Sequence[str], score_view: ViewScorer, out_dir: str | os.PathLike, sizes: Sequence[int],
                trials: int = 3, seed: int = 0, *, metric: str = "accuracy", info: dict[str, Any] | None = None,
                log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The library-size curve of any benchmark: ``score_view(visible, run_dir, 0)`` scores one view.

    For each size k, ``trials`` random k-subsets of ``labels`` (size 0 and the full library once); the
    mean of the trials' means, with a 95 % bootstrap interval over the pooled items of the trials.
    Writes ``curve.json`` (``info`` merged in: what the study ran on) and returns it."""
    out = Path(out_dir)
    labels = list(labels)
    points: list[dict[str, Any]] = []
    pooled: dict[int, list[np.ndarray]] = {}
    for size in sizes:
        n_trials = 1 if size in (0, len(labels)) else trials
        for trial in range(n_trials):
            rng = np.random.default_rng([seed, size, trial])
            shown = sorted(rng.choice(len(labels), size=size, replace=False).tolist()) if size else []
            visible = [labels[i] for i in shown]
            run_dir = out / f"size{size:02d}_trial{trial}"
            if log:
                log(f"library size {size}, trial {trial + 1}/{n_trials}: {', '.join(visible) or '(none)'}")
            values = np.asarray(score_view(visible, run_dir, 0), dtype=float)
            pooled.setdefault(size, []).append(values)
            points.append({"size": size, "trial": trial, "labels": visible, metric: float(values.mean()),
                           "n": int(values.size), "run": run_dir.name})
    summary = []
    for size in sizes:
        arrs = pooled[size]
        allv = np.concatenate(arrs)
        summary.append({"size": size, "trials": len(arrs), "mean": float(np.mean([a.mean() for a in arrs])),
                        "ci": list(bootstrap_ci(allv, seed)), "n": int(allv.size)})
    result = {"study": "library-curve", "metric": metric, **(info or {}), "trials": trials, "seed": seed,
              "library": labels, "points": points, "summary": summary}
    atomic_write_json(out / CURVE_FILE, result)
    return result


def importance_study(library: Any, score_view: ViewScorer, out_dir: str | os.PathLike,
                     labels: Sequence[str] | None = None, repeats: int = 1, *, metric: str = "accuracy",
                     info: dict[str, Any] | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Leave-one-out importance of any benchmark: ``score_view(visible, run_dir, repeat)`` scores one view
    (``visible`` None: the full library). Importance = % drop of the metric from the full library's.
    Writes ``importance.json`` (``info`` merged in) and returns it."""
    out = Path(out_dir)
    full = library.order()
    targets = check_labels(library, labels)

    def scores_of(visible: list[str] | None, name: str) -> list[float]:
        vals = []
        for r in range(repeats):
            if log:
                log(f"{name}, repeat {r + 1}/{repeats}")
            vals.append(float(np.mean(score_view(visible, out / f"{slug(name)}_r{r}", r))))
        return vals

    base = scores_of(None, "full library")
    rows = []
    for label in targets:
        removed = [label] + library.dependents(label)
        vals = scores_of([x for x in full if x not in removed], f"without {label}")
        drops = [100.0 * (b - a) / b if b > 0 else 0.0 for a, b in zip(vals, base)]
        rows.append({"label": label, "removed": removed, metric: float(np.mean(vals)),
                     "importance": float(np.mean(drops)),
                     "importance_sd": float(np.std(drops, ddof=1)) if len(drops) > 1 else None})
    result = {"study": "importance", "metric": metric, **(info or {}), "repeats": repeats,
              "baseline": float(np.mean(base)), "baseline_runs": base, "patterns": rows}
    atomic_write_json(out / IMPORTANCE_FILE, result)
    return result


def check_labels(library: Any, labels: Sequence[str] | None) -> list[str]:
    """``labels`` normalised (default: the whole library); one line naming any not in the library."""
    full = library.order()
    targets = [normalize_label(x) for x in (labels or full)]
    unknown = [t for t in targets if t not in full]
    if unknown:
        raise ValueError(f"not in the library: {', '.join(unknown)}; its patterns are {', '.join(full)}")
    return targets


# ------------------------------------------------------------------ on the Q&A benchmark
def library_curve(questions: Sequence[Question], builder: ContextBuilder, client: Any, out_dir: str | os.PathLike,
                  sizes: Sequence[int], trials: int = 3, seed: int = 0, settings: EvalSettings | None = None, *,
                  run_info: dict[str, Any] | None = None, workers: int = 1,
                  log: Callable[[str], None] | None = None, backend: Backend | None = None) -> dict[str, Any]:
    settings = settings or EvalSettings(conditions=["annotation"])
    builder.prepare(questions, settings.conditions, workers=workers, backend=backend)

    def score_view(visible: list[str] | None, run_dir: Path, repeat: int) -> np.ndarray:
        return _view_run(questions, builder, visible, client, run_dir, settings, dict(run_info or {}), workers, log,
                         backend)

    return curve_study(builder.library.order(), score_view, out_dir, sizes, trials, seed,
                       info={"condition": settings.conditions[0], "questions": len(questions)}, log=log)


def importance(questions: Sequence[Question], builder: ContextBuilder, client: Any, out_dir: str | os.PathLike,
               labels: Sequence[str] | None = None, repeats: int = 1, settings: EvalSettings | None = None, *,
               run_info: dict[str, Any] | None = None, workers: int = 1,
               log: Callable[[str], None] | None = None, backend: Backend | None = None) -> dict[str, Any]:
    settings = settings or EvalSettings(conditions=["annotation"])
    check_labels(builder.library, labels)
    builder.prepare(questions, settings.conditions, workers=workers, backend=backend)

    def score_view(visible: list[str] | None, run_dir: Path, repeat: int) -> np.ndarray:
        s = replace(settings, seed=settings.seed + repeat)
        return _view_run(questions, builder, visible, client, run_dir, s, dict(run_info or {}), workers, log,
                         backend)

    return importance_study(builder.library, score_view, out_dir, labels, repeats,
                            info={"condition": settings.conditions[0], "questions": len(questions)}, log=log)
