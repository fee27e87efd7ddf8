"""Library studies on the Q&A benchmark: the library-size curve (§4.2) and leave-one-out importance (§4.4).

Both annotate every rollout once with the full library and then show only
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
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.questions import Question
from simpatterns.qa.report import CURVE_FILE, IMPORTANCE_FILE
from simpatterns.qa.runner import EvalSettings, read_responses, run_eval, slug
from simpatterns.qa.scoring import bootstrap_ci, grade_run


def _correct(questions: Sequence[Question], run_dir: Path, condition: str) -> np.ndarray:
    return np.array([g.correct for g in grade_run(questions, read_responses(run_dir)) if g.condition == condition],
                    dtype=float)


def _view_run(questions: Sequence[Question], builder: ContextBuilder, visible: list[str] | None, client: Any,
              run_dir: Path, settings: EvalSettings, run_info: dict[str, Any], workers: int,
              log: Callable[[str], None] | None) -> np.ndarray:
    view = replace(builder, visible=visible)
    outcome = run_eval(questions, view, client, run_dir, settings, run_info=run_info, workers=workers, log=log)
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


def library_curve(questions: Sequence[Question], builder: ContextBuilder, client: Any, out_dir: str | os.PathLike,
                  sizes: Sequence[int], trials: int = 3, seed: int = 0, settings: EvalSettings | None = None, *,
                  run_info: dict[str, Any] | None = None, workers: int = 1,
                  log: Callable[[str], None] | None = None) -> dict[str, Any]:
    settings = settings or EvalSettings(conditions=["annotation"])
    out = Path(out_dir)
    labels = builder.library.order()
    builder.prepare(questions, settings.conditions, workers=workers)
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
            correct = _view_run(questions, builder, visible, client, run_dir, settings, dict(run_info or {}),
                                workers, log)
            pooled.setdefault(size, []).append(correct)
            points.append({"size": size, "trial": trial, "labels": visible, "accuracy": float(correct.mean()),
                           "n": int(correct.size), "run": run_dir.name})
    summary = []
    for size in sizes:
        arrs = pooled[size]
        allc = np.concatenate(arrs)
        summary.append({"size": size, "trials": len(arrs), "mean": float(np.mean([a.mean() for a in arrs])),
                        "ci": list(bootstrap_ci(allc, seed)), "n": int(allc.size)})
    result = {"study": "library-curve", "condition": settings.conditions[0], "questions": len(questions),
              "trials": trials, "seed": seed, "library": labels, "points": points, "summary": summary}
    atomic_write_json(out / CURVE_FILE, result)
    return result


def importance(questions: Sequence[Question], builder: ContextBuilder, client: Any, out_dir: str | os.PathLike,
               labels: Sequence[str] | None = None, repeats: int = 1, settings: EvalSettings | None = None, *,
               run_info: dict[str, Any] | None = None, workers: int = 1,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    settings = settings or EvalSettings(conditions=["annotation"])
    out = Path(out_dir)
    lib = builder.library
    full = lib.order()
    targets = [normalize_label(x) for x in (labels or full)]
    unknown = [t for t in targets if t not in full]
    if unknown:
        raise ValueError(f"not in the library: {', '.join(unknown)}; its patterns are {', '.join(full)}")
    builder.prepare(questions, settings.conditions, workers=workers)

    def accuracy_of(visible: list[str] | None, name: str) -> list[float]:
        accs = []
        for r in range(repeats):
            s = replace(settings, seed=settings.seed + r)
            if log:
                log(f"{name}, repeat {r + 1}/{repeats}")
            accs.append(float(_view_run(questions, builder, visible, client, out / f"{slug(name)}_r{r}", s,
                                        dict(run_info or {}), workers, log).mean()))
        return accs

    base = accuracy_of(None, "full library")
    base_mean = float(np.mean(base))
    rows = []
    for label in targets:
        removed = [label] + lib.dependents(label)
        visible = [x for x in full if x not in removed]
        accs = accuracy_of(visible, f"without {label}")
        drops = [100.0 * (b - a) / b if b > 0 else 0.0 for a, b in zip(accs, base)]
        rows.append({"label": label, "removed": removed, "accuracy": float(np.mean(accs)),
                     "importance": float(np.mean(drops)),
                     "importance_sd": float(np.std(drops, ddof=1)) if len(drops) > 1 else None})
    result = {"study": "importance", "condition": settings.conditions[0], "questions": len(questions),
              "repeats": repeats, "baseline": base_mean, "baseline_runs": base, "patterns": rows}
    atomic_write_json(out / IMPORTANCE_FILE, result)
    return result
