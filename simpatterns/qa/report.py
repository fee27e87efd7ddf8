"""Scores of a run on disk, and the markdown report with its plots.

`score_run` grades a run directory's stored responses (offline, any number
of times) and writes ``scores.json`` (groups) and ``graded.jsonl`` (one line
per response). `write_report` renders a page a researcher could put in an
appendix: accuracy by condition and family with 95 % bootstrap intervals and
the random and majority baselines, accuracy per template, unparsable answers,
percentage errors and set overlap, stable questions only; and, for study
directories, the library-size curve and the leave-one-out importance bars.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simpatterns.files import atomic_write, atomic_write_json, atomic_write_lines
from simpatterns.qa.questions import FAMILIES, Question, read_questions
from simpatterns.qa.runner import RESPONSES_FILE, QARunError, read_responses, read_run
from simpatterns.qa.scoring import GroupScore, find, grade_run, summarise
from simpatterns.qa.templates import get_template

SCORES_FILE = "scores.json"
GRADED_FILE = "graded.jsonl"
CURVE_FILE = "curve.json"
IMPORTANCE_FILE = "importance.json"
COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3"]


@dataclass
class RunScores:
    run_dir: Path
    info: dict[str, Any]
    questions: list[Question]
    scores: list[GroupScore]
    graded: list[Any]

    @property
    def conditions(self) -> list[str]:
        """Conditions in the order the run asked them."""
        present = list(dict.fromkeys(s.condition for s in self.scores))
        asked = (self.info.get("settings") or {}).get("conditions") or []
        return [c for c in asked if c in present] + [c for c in present if c not in asked]


def questions_of_run(run_dir: str | os.PathLike, questions: str | os.PathLike | None = None) -> list[Question]:
    if questions is not None:
        return read_questions(questions)
    info = read_run(run_dir)
    path = info.get("questions_path")
    if not path:
        raise QARunError(f"{Path(run_dir) / 'run.json'} does not say where its questions are; pass --questions")
    return read_questions(path)


def score_run(run_dir: str | os.PathLike, questions: str | os.PathLike | None = None, seed: int = 0) -> RunScores:
    run = Path(run_dir)
    qs = questions_of_run(run, questions)
    graded = grade_run(qs, read_responses(run))
    scores = summarise(graded, seed=seed)
    atomic_write_json(run / SCORES_FILE, {"scores": [s.to_json() for s in scores],
                                           "responses": len(graded)})
    atomic_write_lines(run / GRADED_FILE, (json.dumps(g.to_json(), default=str) for g in graded))
    return RunScores(run, read_run(run), qs, scores, graded)


# ------------------------------------------------------------------ plots
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_accuracy(rs: RunScores, path: Path, subset: str = "all") -> Path:
    """Grouped bars: accuracy per family (and overall) for each condition, 95 % intervals, baselines."""
    plt = _plt()
    groups = ["all"] + [f"family:{f}" for f in FAMILIES if find(rs.scores, rs.conditions[0], f"family:{f}", subset)]
    conds = rs.conditions
    width = 0.8 / max(1, len(conds))
    fig, ax = plt.subplots(figsize=(2.2 + 1.9 * len(groups), 4.2))
    x = np.arange(len(groups))
    for k, c in enumerate(conds):
        vals, lo, hi = [], [], []
        for g in groups:
            s = find(rs.scores, c, g, subset)
            vals.append(s.accuracy if s else np.nan)
            lo.append(s.accuracy - s.ci[0] if s else 0)
            hi.append(s.ci[1] - s.accuracy if s else 0)
        ax.bar(x - 0.4 + width * (k + 0.5), vals, width, yerr=[lo, hi], capsize=3, label=c,
               color=COLOURS[k % len(COLOURS)], edgecolor="white", linewidth=0.5)
    for j, g in enumerate(groups):
        s = find(rs.scores, conds[0], g, subset)
        if s is None:
            continue
        ax.hlines(s.random, j - 0.45, j + 0.45, colors="black", linestyles="dashed", linewidth=1.2,
                  label="random baseline" if j == 0 else None)
        ax.hlines(s.majority, j - 0.45, j + 0.45, colors="gray", linestyles="dotted", linewidth=1.6,
                  label="majority baseline" if j == 0 else None)
    names = []
    for g in groups:
        s = find(rs.scores, conds[0], g, subset)
        names.append(f"{g.split(':')[-1]}\n(n={s.n if s else 0})")
    ax.set_xticks(x)
    ax.set_xticklabels(names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_title(f"Q&A accuracy by condition and family ({'stable questions' if subset == 'stable' else 'all questions'}"
                 "; 95% bootstrap intervals)", fontsize=10)
    ax.legend(fontsize=8, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def plot_templates(rs: RunScores, path: Path) -> Path:
    """Accuracy per template (rows) for each condition, with the random baseline."""
    plt = _plt()
    tids = sorted({int(s.group.split(":")[1]) for s in rs.scores if s.group.startswith("template:")})
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(tids) + 1.4))
    y = np.arange(len(tids))
    for k, c in enumerate(rs.conditions):
        acc = [getattr(find(rs.scores, c, f"template:{t}"), "accuracy", np.nan) for t in tids]
        ax.plot(acc, y + (k - (len(rs.conditions) - 1) / 2) * 0.12, "o", color=COLOURS[k % len(COLOURS)], label=c,
                markersize=5)
    rnd = [getattr(find(rs.scores, rs.conditions[0], f"template:{t}"), "random", np.nan) for t in tids]
    ax.plot(rnd, y, "|", color="black", markersize=12, label="random baseline")
    labels = []
    for t in tids:
        s = find(rs.scores, rs.conditions[0], f"template:{t}")
        labels.append(f"A{t} {get_template(t).name} (n={s.n if s else 0})")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(-0.03, 1.03)
    ax.set_xlabel("accuracy")
    ax.set_title("Accuracy per question template", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _metric(study: dict[str, Any]) -> str:
    """The metric a study measured ("accuracy" on Q&A, "AUCCESS" on agents)."""
    return study.get("metric", "accuracy")


def _items(study: dict[str, Any]) -> str:
    """What the study's scores are averaged over: "40 questions" or "12 episodes"."""
    for key in ("questions", "episodes"):
        if key in study:
            return f"{study[key]} {key}"
    return "?"


def plot_library_curve(curve: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    metric = _metric(curve)
    pts = curve["points"]
    sizes = sorted({p["size"] for p in curve["summary"]})
    summ = {p["size"]: p for p in curve["summary"]}
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    mean = [summ[s]["mean"] for s in sizes]
    lo = [summ[s]["ci"][0] for s in sizes]
    hi = [summ[s]["ci"][1] for s in sizes]
    ax.fill_between(sizes, lo, hi, color=COLOURS[0], alpha=0.2, label="95% bootstrap interval")
    ax.plot(sizes, mean, "o-", color=COLOURS[0], label=f"mean over trials ({curve['condition']})")
    ax.plot([p["size"] for p in pts], [p[metric] for p in pts], ".", color="black", alpha=0.5,
            label="single trials")
    ax.set_xlabel("patterns shown (library size)")
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Library-size curve: {_items(curve)}, {curve['trials']} trials per size", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _dependents(n: int) -> str:
    return "" if n == 0 else f" (+{n} dependent{'s' if n > 1 else ''})"


def plot_importance(imp: dict[str, Any], path: Path) -> Path:
    plt = _plt()
    rows = sorted(imp["patterns"], key=lambda r: -r["importance"])
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(rows) + 1.5))
    y = np.arange(len(rows))
    vals = [r["importance"] for r in rows]
    err = [r.get("importance_sd") or 0.0 for r in rows]
    colours = [COLOURS[0] if v >= 0 else COLOURS[3] for v in vals]
    ax.barh(y, vals, xerr=err if any(err) else None, color=colours, capsize=2)
    ax.set_yticks(y)
    ax.set_yticklabels([r["label"] + _dependents(len(r["removed"]) - 1) for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"importance: % drop in {_metric(imp)} when removed (with its dependents)")
    ax.set_title(f"Leave-one-out importance ({imp['condition']}; full library {_metric(imp)} {imp['baseline']:.3f})",
                 fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ markdown
def _pct(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{100 * v:.1f}"


def _run_section(rs: RunScores, out: Path, title: str) -> list[str]:
    stem = rs.run_dir.name or "run"
    fam_png = plot_accuracy(rs, out / f"{stem}_accuracy.png")
    tpl_png = plot_templates(rs, out / f"{stem}_templates.png")
    has_stable = any(s.subset == "stable" for s in rs.scores)
    lines = [f"## {title}", ""]
    llm = rs.info.get("llm") or {}
    asked = len({g.qid for g in rs.graded})
    of = f" (of {len(rs.questions)} in the data set)" if asked < len(rs.questions) else ""
    lines.append(f"Run `{rs.run_dir}`: {asked} questions{of}, model `{llm.get('model', '?')}` "
                 f"(backend `{llm.get('spec', '?')}`), conditions {', '.join(rs.conditions)}; "
                 f"library: {len((rs.info.get('library') or {}).get('labels') or [])} patterns"
                 + (f", showing {len(rs.info['library']['visible'])}" if (rs.info.get('library') or {}).get('visible')
                    is not None else "") + ".")
    lines += ["", f"![accuracy by condition and family]({fam_png.name})", ""]
    lines.append("Accuracy in % (95 % bootstrap interval); baselines on the same questions.")
    lines.append("")
    head = "| condition | " + " | ".join(["all"] + list(FAMILIES)) + " | unparsable | percent MAE | set Jaccard |"
    lines += [head, "|" + "---|" * (len(FAMILIES) + 5)]
    for c in rs.conditions:
        cells = []
        for g in ["all"] + [f"family:{f}" for f in FAMILIES]:
            s = find(rs.scores, c, g)
            cells.append("-" if s is None else f"{_pct(s.accuracy)} ({_pct(s.ci[0])}–{_pct(s.ci[1])})")
        s = find(rs.scores, c, "all")
        mae = find(rs.scores, c, "family:counts")
        jac = find(rs.scores, c, "template:2")
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {_pct(s.unparsable if s else None)} | "
                     f"{'-' if not mae or mae.mae is None else f'{mae.mae:.1f} pts'} | "
                     f"{'-' if not jac or jac.jaccard is None else f'{jac.jaccard:.2f}'} |")
    for name, attr in (("random baseline", "random"), ("majority baseline", "majority")):
        cells = []
        for g in ["all"] + [f"family:{f}" for f in FAMILIES]:
            s = find(rs.scores, rs.conditions[0], g)
            cells.append("-" if s is None else _pct(getattr(s, attr)))
        lines.append(f"| *{name}* | " + " | ".join(cells) + " | | | |")
    if has_stable:
        st = plot_accuracy(rs, out / f"{stem}_accuracy_stable.png", subset="stable")
        lines += ["", "Stable questions only (answers that survive a 1 px nudge of the action):", "",
                  f"![stable questions]({st.name})", "", "| condition | all questions | stable questions |", "|---|---|---|"]
        for c in rs.conditions:
            a, b = find(rs.scores, c, "all"), find(rs.scores, c, "all", "stable")
            lines.append(f"| {c} | {_pct(a.accuracy if a else None)} (n={a.n if a else 0}) | "
                         f"{_pct(b.accuracy if b else None)} (n={b.n if b else 0}) |")
    lines += ["", "### Per template", "", f"![accuracy per template]({tpl_png.name})", ""]
    lines.append("| template | family | n | " + " | ".join(rs.conditions) + " | random | majority |")
    lines.append("|" + "---|" * (len(rs.conditions) + 5))
    tids = sorted({int(s.group.split(":")[1]) for s in rs.scores if s.group.startswith("template:")})
    for t in tids:
        tpl = get_template(t)
        s0 = find(rs.scores, rs.conditions[0], f"template:{t}")
        accs = [_pct(getattr(find(rs.scores, c, f"template:{t}"), "accuracy", None)) for c in rs.conditions]
        lines.append(f"| A{t} {tpl.name} | {tpl.family} | {s0.n if s0 else 0} | " + " | ".join(accs)
                     + f" | {_pct(s0.random if s0 else None)} | {_pct(s0.majority if s0 else None)} |")
    bad = [g for g in rs.graded if g.unparsable]
    if bad:
        lines += ["", f"Unparsable answers: {len(bad)} of {len(rs.graded)}. First ones:", ""]
        for g in bad[:5]:
            lines.append(f"- `{g.qid}` [{g.condition}]: {g.error}")
    return lines + [""]


def curve_section(study: Path, out: Path) -> list[str]:
    """The markdown (and plot, written into ``out``) of a library-size curve study directory."""
    curve = json.loads((study / CURVE_FILE).read_text())
    metric = _metric(curve)
    png = plot_library_curve(curve, out / f"{study.name}_library_curve.png")
    lines = ["## Library-size curve", "", f"Study `{study}`: random subsets of the library's patterns (their "
             f"dependencies run but are not shown), several trials per size; {metric} in the "
             f"`{curve['condition']}` condition over {_items(curve)}.", "", f"![library-size curve]({png.name})",
             "", f"| patterns shown | trials | mean {metric} % | 95 % interval |", "|---|---|---|---|"]
    for p in curve["summary"]:
        lines.append(f"| {p['size']} | {p['trials']} | {_pct(p['mean'])} | {_pct(p['ci'][0])}–{_pct(p['ci'][1])} |")
    return lines + [""]


def importance_section(study: Path, out: Path) -> list[str]:
    """The markdown (and plot, written into ``out``) of a leave-one-out study directory."""
    imp = json.loads((study / IMPORTANCE_FILE).read_text())
    metric = _metric(imp)
    png = plot_importance(imp, out / f"{study.name}_importance.png")
    lines = ["## Leave-one-out importance", "", f"Study `{study}`: each pattern removed with every pattern that "
             f"depends on it; importance = % drop from the full library's {metric} ({_pct(imp['baseline'])} %) in "
             f"the `{imp['condition']}` condition, {imp['repeats']} repeat(s), {_items(imp)}.", "",
             f"![leave-one-out importance]({png.name})", "", f"| pattern | removed | {metric} % | importance % |",
             "|---|---|---|---|"]
    for r in sorted(imp["patterns"], key=lambda r: -r["importance"]):
        lines.append(f"| {r['label']} | {len(r['removed'])} | {_pct(r[metric])} | {r['importance']:+.1f} |")
    return lines + [""]


def write_report(sources: Sequence[str | os.PathLike], out: str | os.PathLike | None = None,
                 title: str = "Q&A benchmark report") -> Path:
    """Render the report of eval runs and study directories into ``out`` (default: the first source's
    ``report/``); returns the markdown file."""
    if not sources:
        raise QARunError("no run or study directory given")
    out_dir = Path(out) if out is not None else Path(sources[0]) / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", ""]
    for src in map(Path, sources):
        if (src / CURVE_FILE).exists():
            lines += curve_section(src, out_dir)
        elif (src / IMPORTANCE_FILE).exists():
            lines += importance_section(src, out_dir)
        elif (src / RESPONSES_FILE).exists():
            lines += _run_section(score_run(src), out_dir, f"Run {src.name}")
        else:
            raise QARunError(f"{src}: neither a Q&A run (responses.jsonl) nor a study ({CURVE_FILE}, {IMPORTANCE_FILE})")
    md = out_dir / "report.md"
    atomic_write(md, "\n".join(lines).rstrip() + "\n")
    return md
