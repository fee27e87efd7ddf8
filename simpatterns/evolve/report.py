"""``simpatterns evolve report RUN_DIR``: what a discovery job did, from its log alone.

Writes into ``RUN_DIR/report/``: one PNG per label with the best fitness of
each island against the sample index, the baseline (the library alone) and
the acceptance threshold (baseline + theta, from ``job.json``), and
``report.md`` with the accepted programs and a table of rejection reasons.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from simpatterns.evolve.database import DetectorProgram
from simpatterns.evolve.records import LabelDone, LabelStart, RecordError, Sample, record_from_json
from simpatterns.evolve.runlog import RunLog, RunLogError
from simpatterns.files import atomic_open, atomic_write


@dataclass
class LabelReport:
    label: str
    samples: int = 0
    baseline: float | None = None
    theta: float | None = None  # acceptance: best fitness - baseline > theta
    accepted: bool | None = None
    why: str = ""
    best: DetectorProgram | None = None
    curves: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # island -> (sample, best so far)
    reasons: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    plot: Path | None = None


@dataclass
class Report:
    run_dir: Path
    labels: list[LabelReport]
    markdown: Path | None = None

    @property
    def reasons(self) -> Counter:
        total: Counter = Counter()
        for lab in self.labels:
            total.update(lab.reasons)
        return total


def build_report(run_dir: str | Path, write: bool = True) -> Report:
    """What the run did, from its log (`simpatterns.evolve.records`); raises `RunLogError`
    naming the line of a record it cannot read."""
    log = RunLog(run_dir)
    if not log.samples_path.is_file():
        raise FileNotFoundError(f"{run_dir}: no samples.jsonl; is this a discovery run directory?")
    theta = _theta(log)
    labels: dict[str, LabelReport] = {}
    best_now: dict[tuple[str, int], float] = {}
    for offset, raw in log.records():
        try:
            rec = record_from_json(raw)
        except RecordError as exc:
            raise RunLogError(f"{log.samples_path}: record ending at byte {offset}: {exc}") from None
        if isinstance(rec, LabelStart):
            lab = labels.setdefault(rec.label, LabelReport(rec.label))
            lab.baseline = rec.baseline
            lab.theta = theta
            seed_fit = rec.seed_program.fitness
            if rec.seed_program.parts.get("rejected") is None:
                for isl in range(rec.database.num_islands):
                    best_now[(rec.label, isl)] = seed_fit
                    lab.curves.setdefault(isl, []).append((0, seed_fit))
        elif isinstance(rec, Sample):
            lab = labels.setdefault(rec.label, LabelReport(rec.label))
            lab.samples += 1
            status = rec.status or "?"
            lab.statuses[status] += 1
            if rec.reason is not None:
                lab.reasons[rec.reason.code] += 1
            if status == "registered" and rec.fitness is not None:
                key = (rec.label, rec.island)
                fit = float(rec.fitness["fitness"])
                if fit > best_now.get(key, float("-inf")):
                    best_now[key] = fit
                lab.curves.setdefault(rec.island, []).append((rec.sample + 1, best_now[key]))
        elif isinstance(rec, LabelDone):
            lab = labels.setdefault(rec.label, LabelReport(rec.label))
            lab.accepted = rec.accepted
            lab.why = rec.why
            lab.best = rec.program
    report = Report(Path(run_dir), list(labels.values()))
    if write:
        out = Path(run_dir) / "report"
        for lab in report.labels:
            lab.plot = _plot(lab, out)
        report.markdown = _markdown(report, out)
    return report


def _theta(log: RunLog) -> float | None:
    """The run's acceptance threshold over the baseline (the kind's default when unset); None
    without a readable ``job.json``."""
    from simpatterns.evolve.config import EvolveConfig

    job = log.read_job()
    try:
        return float(EvolveConfig.from_json(job["config"]).fitness.resolved().theta)
    except (TypeError, KeyError, ValueError):
        return None


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "label"


def _plot(lab: LabelReport, out: Path) -> Path | None:
    if not lab.curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.0, 3.6), dpi=110)
    for isl, pts in sorted(lab.curves.items()):
        xs = [p[0] for p in pts] + [lab.samples]
        ys = [p[1] for p in pts] + [pts[-1][1]]
        ax.step(xs, ys, where="post", label=f"island {isl}")
    if lab.baseline is not None:
        ax.axhline(lab.baseline, color="grey", linestyle="--", linewidth=1, label="baseline (library alone)")
        if lab.theta is not None:
            ax.axhline(lab.baseline + lab.theta, color="black", linestyle=":", linewidth=1.2,  # no island is black
                       label=f"acceptance threshold (baseline + {lab.theta:g})")
    ax.set_xlabel("sample")
    ax.set_ylabel("best fitness")
    ax.set_title(f"{lab.label}" + ("  (accepted)" if lab.accepted else "  (not accepted)" if lab.accepted is False else ""))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside: covers no curve
    fig.tight_layout()
    path = out / f"fitness_{_slug(lab.label)}.png"
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)
    return path


def _markdown(report: Report, out: Path) -> Path:
    lines = [f"# Discovery run `{report.run_dir}`", ""]
    lines.append("| label | samples | accepted | best fitness | gain over baseline | note |")
    lines.append("|---|---|---|---|---|---|")
    for lab in report.labels:
        fit = lab.best.fitness if lab.best is not None else None
        gain = "-" if fit is None or lab.baseline is None else f"{fit - lab.baseline:+.5f}"
        lines.append(f"| {lab.label} | {lab.samples} | {'yes' if lab.accepted else 'no'} | "
                     f"{'-' if fit is None else f'{fit:.5f}'} | {gain} | {lab.why or ''} |")
    lines += ["", "## Rejection reasons", "", "| reason | " + " | ".join(lab.label for lab in report.labels) + " | total |",
              "|---|" + "---|" * (len(report.labels) + 1)]
    for code, total in report.reasons.most_common():
        lines.append(f"| {code} | " + " | ".join(str(lab.reasons.get(code, 0)) for lab in report.labels) + f" | {total} |")
    for lab in report.labels:
        if lab.accepted and lab.best is not None:
            parts = lab.best.parts
            nan = float("nan")
            if parts.get("kind") == "evidence":
                terms = (f"evidence {parts.get('evidence', nan):.2f} sd: dynamics {parts.get('evidence_dynamics', nan):.2f}, "
                         f"place {parts.get('evidence_place', nan):.2f}, new {parts.get('evidence_new', nan):.2f}")
            else:
                terms = (f"correlation {parts.get('correlation', nan):.5f}, novelty {parts.get('novelty', nan):.3f}")
            lines += ["", f"## {lab.label}", "",
                      f"fitness {lab.best.fitness:.5f} ({terms}, length penalty "
                      f"{parts.get('length_penalty', nan):.3f}, time penalty "
                      f"{parts.get('time_penalty', nan):.2f}); sample {lab.best.sample}, "
                      f"model {lab.best.model or '-'}", "", "```python", lab.best.source.rstrip(), "```"]
        if lab.plot:
            lines += ["", f"![{lab.label}]({lab.plot.name})"]
    return atomic_write(out / "report.md", "\n".join(lines) + "\n")
