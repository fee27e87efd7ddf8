"""The report of an agent run: the AUCCESS table and the pictures.

Numbers per condition: for each seed, the scores of its test tasks
(`metrics.score`; AUCCESS is PHYRE's, computed from the attempt log exactly
as PHYRE's evaluator computes it, and checked against `metrics.compute_metrics`
here); then the mean over seeds and its standard error. With one seed the
standard error is over tasks instead. ``random (expected)`` is the exact
expectation of the random agent on the same menus (no sampling), when the
menus' outcomes are all known.

Pictures:

- ``success_vs_attempts.png`` (the paper's Figure 9 form): one ellipse per
  condition centred at (mean attempts, success rate); its half-width and
  half-height are the standard errors of the two;
- ``success_curve.png``: success within k attempts against k, per condition
  (PHYRE's Figure 3 form), the expected random curve dashed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simpatterns.agents.episode import AgentEpisode
from simpatterns.agents.metrics import (
    MAX_TEST_ATTEMPTS,
    Scores,
    auccess,
    compute_metrics,
    expected_random_attempts,
    expected_random_curve,
    score,
    standard_error,
)
from simpatterns.agents.runner import read_run
from simpatterns.files import atomic_open, atomic_write, atomic_write_json
from simpatterns.qa.report import CURVE_FILE, IMPORTANCE_FILE, curve_section, importance_section

EXPECTED_RANDOM = "random (expected)"


@dataclass
class ConditionSummary:
    condition: str
    seeds: list[int]
    tasks: int  # per seed (mean)
    per_seed: dict[int, Scores]
    auccess: float
    auccess_se: float
    auccess_at: dict[int, float]
    success_at_1: float
    success: float  # within the budget
    success_se: float
    mean_attempts: float
    attempts_se: float
    wasted: float  # per task
    invalid: float  # per task
    curve: list[float]
    complete: bool  # every test task of every seed has an episode

    def to_json(self) -> dict[str, Any]:
        return {"condition": self.condition, "seeds": self.seeds, "tasks": self.tasks, "auccess": self.auccess,
                "auccess_se": self.auccess_se, "auccess_at": {str(k): v for k, v in self.auccess_at.items()},
                "success_at_1": self.success_at_1, "success": self.success, "success_se": self.success_se,
                "mean_attempts": self.mean_attempts, "attempts_se": self.attempts_se, "wasted_per_task": self.wasted,
                "invalid_per_task": self.invalid, "complete": self.complete, "curve": self.curve,
                "per_seed": {str(s): sc.to_json() for s, sc in self.per_seed.items()}}


def _mean_se(per_seed: Sequence[float], per_task: Sequence[float]) -> tuple[float, float]:
    if len(per_seed) > 1:
        return float(np.mean(per_seed)), standard_error(per_seed)
    return float(np.mean(per_seed)), standard_error(per_task)


def summarize(run: dict[str, Any], episodes: Sequence[AgentEpisode], caps: Sequence[int] = (10,)) -> list[ConditionSummary]:
    """One summary per condition of the run (in the run's order), over its finished episodes."""
    budget = int(run["config"]["budget"])
    tests = {int(s): ts for s, ts in run["test_tasks"].items()}
    by_cond: dict[str, dict[int, dict[str, AgentEpisode]]] = defaultdict(lambda: defaultdict(dict))
    for e in episodes:
        by_cond[e.condition][e.seed][e.task] = e
    out = []
    for cond in [c["name"] for c in run["conditions"]]:
        if cond not in by_cond:
            continue
        per_seed: dict[int, Scores] = {}
        task_success: list[float] = []
        task_attempts: list[float] = []
        wasted = invalid = 0
        n_eps = 0
        complete = True
        for seed in sorted(by_cond[cond]):
            eps = by_cond[cond][seed]
            complete = complete and set(eps) == set(tests.get(seed, []))
            solved = {t: e.solved_at for t, e in eps.items()}
            used = {t: e.used for t, e in eps.items()}
            sc = score(solved, used, budget, caps)
            # the same number through PHYRE's evaluator arithmetic, from the raw attempt log
            phyre = compute_metrics([x for e in eps.values() for x in e.phyre_log()], len(eps))
            if phyre["independent_solved_by_aucs"][MAX_TEST_ATTEMPTS] != sc.auccess:
                raise RuntimeError(f"{cond} seed {seed}: AUCCESS from the attempt log differs from the episodes' "
                                   "(a corrupt episodes.jsonl?)")
            per_seed[seed] = sc
            task_success += [float(e.solved_at is not None) for e in eps.values()]
            task_attempts += [float(e.used) for e in eps.values()]
            wasted += sum(e.count("wasted") for e in eps.values())
            invalid += sum(e.count("invalid") for e in eps.values())
            n_eps += len(eps)
        seeds = sorted(per_seed)
        auc, auc_se = _mean_se([per_seed[s].auccess for s in seeds],
                               _task_auccess(by_cond[cond]) if len(seeds) == 1 else [])
        succ, succ_se = _mean_se([per_seed[s].success_at_budget for s in seeds], task_success)
        att, att_se = _mean_se([per_seed[s].mean_attempts for s in seeds], task_attempts)
        out.append(ConditionSummary(
            condition=cond, seeds=seeds, tasks=round(n_eps / len(seeds)), per_seed=per_seed,
            auccess=auc, auccess_se=auc_se,
            auccess_at={k: float(np.mean([per_seed[s].auccess_at[k] for s in seeds])) for k in per_seed[seeds[0]].auccess_at},
            success_at_1=float(np.mean([per_seed[s].success_at_1 for s in seeds])), success=succ, success_se=succ_se,
            mean_attempts=att, attempts_se=att_se, wasted=wasted / n_eps, invalid=invalid / n_eps,
            curve=np.mean([per_seed[s].curve for s in seeds], axis=0).tolist(), complete=complete,
        ))
    return out


def _task_auccess(seed_eps: dict[int, dict[str, AgentEpisode]]) -> list[float]:
    """Per-task AUCCESS (of one task alone): AUCCESS is their mean, so their SE is its SE over tasks."""
    [eps] = seed_eps.values()
    return [auccess([e.solved_at], 1) for e in eps.values()]


def expected_random(run: dict[str, Any], caps: Sequence[int] = (10,)) -> ConditionSummary | None:
    """The random agent's exact expectation on the run's menus (None if some outcome is unknown)."""
    menus = run.get("menus") or {}
    budget = int(run["config"]["budget"])
    seeds = sorted(int(s) for s in run["test_tasks"])
    per_seed_curves, per_seed_att = [], []
    w = np.log(np.arange(2, MAX_TEST_ATTEMPTS + 2)) - np.log(np.arange(1, MAX_TEST_ATTEMPTS + 1))
    for s in seeds:
        tasks = run["test_tasks"][str(s)]
        if not tasks or any(t not in menus or not menus[t]["known"] for t in tasks):
            return None
        curves = [expected_random_curve(menus[t]["choices"], menus[t]["solving"], MAX_TEST_ATTEMPTS) for t in tasks]
        # attempts stop at the budget: success after it cannot happen
        curves = [np.concatenate([c[:budget], np.full(MAX_TEST_ATTEMPTS - budget, c[budget - 1])]) for c in curves]
        per_seed_curves.append(np.mean(curves, axis=0))
        per_seed_att.append(np.mean([expected_random_attempts(menus[t]["choices"], menus[t]["solving"], budget)
                                     for t in tasks]))
    curve = np.mean(per_seed_curves, axis=0)
    aucs = [float(np.dot(w, c) / w.sum()) for c in per_seed_curves]

    def at(c: np.ndarray, k: int) -> float:
        return float(np.dot(w[:k], c[:k]) / w[:k].sum())

    caps_all = sorted({*caps, budget})
    return ConditionSummary(
        condition=EXPECTED_RANDOM, seeds=seeds, tasks=round(np.mean([len(run["test_tasks"][str(s)]) for s in seeds])),
        per_seed={}, auccess=float(np.mean(aucs)), auccess_se=0.0,
        auccess_at={k: float(np.mean([at(c, k) for c in per_seed_curves])) for k in caps_all},
        success_at_1=float(curve[0]), success=float(curve[budget - 1]), success_se=0.0,
        mean_attempts=float(np.mean(per_seed_att)), attempts_se=0.0, wasted=0.0, invalid=0.0,
        curve=curve[:budget].tolist(), complete=True,
    )


# ------------------------------------------------------------------ text
def _pm(v: float, se: float, pct: bool = True) -> str:
    if pct:
        return f"{100 * v:.1f} ± {100 * se:.1f}" if se else f"{100 * v:.1f}"
    return f"{v:.1f} ± {se:.1f}" if se else f"{v:.1f}"


def table_rows(summaries: Sequence[ConditionSummary], budget: int) -> tuple[list[str], list[list[str]]]:
    caps = [k for k in summaries[0].auccess_at if k != budget] if summaries else []
    head = ["condition", "seeds", "tasks", "AUCCESS"] + [f"AUCCESS@{k}" for k in caps] + [
        "success@1", f"success@{budget}", "mean attempts", "wasted/task"]
    rows = []
    for s in summaries:
        rows.append([s.condition + ("" if s.complete else " (incomplete)"), str(len(s.seeds)), str(s.tasks),
                     _pm(s.auccess, s.auccess_se)] + [f"{100 * s.auccess_at[k]:.1f}" for k in caps] + [
            f"{100 * s.success_at_1:.1f}", _pm(s.success, s.success_se), _pm(s.mean_attempts, s.attempts_se, False),
            f"{s.wasted:.2f}"])
    return head, rows


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------ pictures
def plot_ellipses(summaries: Sequence[ConditionSummary], path: str | os.PathLike, budget: int) -> Path:
    """Success rate against mean attempts, one standard-error ellipse per condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Ellipse

    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=120)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, s in enumerate(summaries):
        if s.condition == EXPECTED_RANDOM:  # an expectation: no spread to draw
            ax.plot([s.mean_attempts], [100 * s.success], "x", color="gray", ms=7, label=s.condition)
            continue
        c = colors[k % len(colors)]
        x, y = s.mean_attempts, 100 * s.success
        w, h = 2 * s.attempts_se, 2 * 100 * s.success_se
        ax.add_patch(Ellipse((x, y), max(w, 1e-9), max(h, 1e-9), facecolor=c, alpha=0.35, edgecolor=c, lw=1.5))
        ax.plot([x], [y], "o", color=c, ms=4, label=s.condition)
    xs = [s.mean_attempts for s in summaries] + [0]
    ax.set_xlim(0, max(budget, max(xs)) * 1.05)
    ax.set_ylim(0, 105)
    ax.set_xlabel(f"mean attempts per task (budget {budget})")
    ax.set_ylabel(f"tasks solved within {budget} attempts (%)")
    ax.set_title("Success against attempts (ellipses: ± 1 standard error)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_curves(summaries: Sequence[ConditionSummary], path: str | os.PathLike, budget: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=120)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    k = np.arange(1, budget + 1)
    for i, s in enumerate(summaries):
        style = "--" if s.condition == EXPECTED_RANDOM else "-"
        ax.plot(k[: len(s.curve)], 100 * np.asarray(s.curve), style, color="gray" if style == "--" else
                colors[i % len(colors)], label=f"{s.condition} (AUCCESS {100 * s.auccess:.1f})")
    ax.set_xscale("log")
    ax.set_xlim(1, budget)
    ax.set_ylim(0, 102)
    ax.set_xlabel("attempts per task (log scale)")
    ax.set_ylabel("tasks solved (%)")
    ax.set_title("Success within k attempts")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: str | os.PathLike) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)
    return path


# ------------------------------------------------------------------ the page
def write_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None,
                 caps: Sequence[int] = (10,)) -> dict[str, Any]:
    """``report.md``, ``summary.json`` and the two pictures, into ``out_dir`` (default: the run)."""
    run, episodes = read_run(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    budget = int(run["config"]["budget"])
    summaries = summarize(run, episodes, caps)
    if not summaries:
        raise ValueError(f"{run_dir}: no finished episodes yet")
    expected = expected_random(run, caps)
    shown = summaries + ([expected] if expected is not None else [])
    head, rows = table_rows(shown, budget)
    plot_ellipses(shown, out / "success_vs_attempts.png", budget)
    plot_curves(shown, out / "success_curve.png", budget)
    cfg = run["config"]
    menus = run.get("menus") or {}
    choices = [m["choices"] for m in menus.values()]
    solving = [m["solving"] for m in menus.values()]
    added = sum(m["added_solution"] for m in menus.values())
    where = f"`{cfg['setup']}` seeds {', '.join(map(str, cfg['seeds']))}" if cfg.get("setup") else "given tasks"
    sub = f", first {cfg['per_template']} test tasks per template" if cfg.get("per_template") else ""
    lines = [
        "# Agents on PHYRE tasks",
        "",
        f"Tasks: {where}{sub}; budget {budget} attempts per task (invalid actions not counted); "
        f"menus of the {cfg['bins']}³ grid, scan `{cfg['scan']}`.",
        (f"Menus: {np.mean(choices):.0f} valid choices per task on average (min {min(choices)}, max "
         f"{max(choices)}), {np.mean(solving):.1f} solving; {added} of {len(menus)} tasks had no solving cell and "
         "got their stored solution added.") if menus else "",
        "",
        "AUCCESS is PHYRE's (weights log(k+1) − log(k), k ≤ 100), in %; ± is one standard error "
        + ("over seeds." if len(cfg["seeds"]) > 1 else "over tasks (one seed)."),
        "",
        markdown_table(head, rows),
        "",
        "![success against attempts](success_vs_attempts.png)",
        "",
        "![success within k attempts](success_curve.png)",
        "",
    ]
    text = "\n".join(lines)
    atomic_write(out / "report.md", text)
    data = {"run": str(run_dir), "config": cfg, "conditions": [s.to_json() for s in summaries],
            "expected_random": expected.to_json() if expected is not None else None}
    atomic_write_json(out / "summary.json", data)
    return {"markdown": text, "head": head, "rows": rows, "summaries": summaries, "expected": expected,
            "dir": out}




# ------------------------------------------------------------------ library studies
def is_study(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a library-study directory (``curve.json`` or ``importance.json``)."""
    return (Path(path) / CURVE_FILE).exists() or (Path(path) / IMPORTANCE_FILE).exists()


def write_study_report(study_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """``report.md`` and the plot of a library study (the Q&A report's sections, scored by AUCCESS);
    each view is an agent run under the study directory, reportable on its own. Returns the page."""
    study = Path(study_dir)
    out = Path(out_dir) if out_dir is not None else study
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Agents on PHYRE tasks: library study", ""]
    if (study / CURVE_FILE).exists():
        lines += curve_section(study, out)
    if (study / IMPORTANCE_FILE).exists():
        lines += importance_section(study, out)
    if len(lines) == 2:
        raise ValueError(f"{study}: not a library study (no {CURVE_FILE} or {IMPORTANCE_FILE})")
    views = sorted(p.parent.name for p in study.glob("*/episodes.jsonl"))
    if views:
        lines += [f"Each view is an agent run (`simpatterns agent report {study}/VIEW`): {', '.join(views)}.", ""]
    md = out / "report.md"
    atomic_write(md, "\n".join(lines).rstrip() + "\n")
    return md
