"""The demo's pipeline, from Python: `run_demo` does what ``simpatterns demo`` shows.

1. simulate a small dataset of PHYRE rollouts (verified solutions and random actions);
2. annotate it with the built-in pattern library;
3. the annotation text of one rollout (what an LLM reads);
4. evaluate a reward program on the template 00000 rollouts (success and dense score);
5. simulated annealing on the goal "get the green ball in the second bucket"
   (paper §5.2), and a small dense-vs-sparse comparison;
6. write a report folder: README.md (the summary), the best rollout as a
   captioned GIF and a browser page (`simpatterns view`), its timeline plot, the
   annealing curve, the annotation text, the dataset with its annotations and
   its browser index (dataset.html), and summary.json.

Each step hands its result to ``on_event`` as it is done (`StepStarted` before
it, then one of `DatasetDone`, `AnnotationDone`, `TextDone`, `ProgramDone`,
`AnnealDone`, `ComparisonDone`), so a caller can show the run as it goes;
`run_demo` returns the `DemoReport`.

Examples:
    >>> from simpatterns.demo.pipeline import run_demo
    >>> report = run_demo("demo-report", budget=15, trials=1, workers=1)  # doctest: +SKIP
    >>> report.readme, report.summary["anneal"]["success"]  # doctest: +SKIP
    (PosixPath('demo-report/README.md'), True)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_open, atomic_write
from simpatterns.optimize import SearchResult
from simpatterns.parallel import Backend, make_executor

# "The red ball hits something, then the green ball collides with the blue ball, and the
# two touch at the end" for template 00000's scenes (green and blue balls).
DEMO_GOAL = "the red ball hits something, then the green ball hits the blue ball, and they touch at the end"
DEMO_PROGRAM = f"""# {DEMO_GOAL}
AND(
    EVENT("collision start", {{"object_a": "red ball"}}),
    AFTER("collision start", "collision start",
          first_params={{"object_a": "red ball"}},
          second_params={{"object_a": "green ball", "object_b": "blue ball"}}),
    TOUCHING("green ball", "blue ball", t=1.0),
)
"""
DEMO_TEMPLATES = ("00000", "00002", "00007", "00012")
ANNEAL_GOAL = 2  # the second bucket




@dataclass(frozen=True)
class StepStarted:
    """Step ``title`` starts, ``seconds`` into the run."""

    title: str
    seconds: float


@dataclass(frozen=True)
class DatasetDone:
    """The dataset's index rows (those with a trace file), its templates and folder."""

    rows: list[dict[str, Any]]
    templates: list[str]
    folder: Path


@dataclass(frozen=True)
class AnnotationDone:
    """Per rollout: (file, frames, events, its three most frequent patterns, solved)."""

    patterns: int
    events: int
    rollouts: list[tuple[str, int, int, str, bool]]


@dataclass(frozen=True)
class TextDone:
    """The annotation text of ``rollout`` (also in annotation.txt)."""

    rollout: str
    text: str

    def excerpt(self, lines: int = 28) -> str:
        """The first ``lines`` lines, and how many more annotation.txt holds."""
        all_lines = self.text.splitlines()
        more = [f"... ({len(all_lines) - lines} more lines in annotation.txt)"] if len(all_lines) > lines else []
        return "\n".join(all_lines[:lines] + more)


@dataclass(frozen=True)
class ProgramDone:
    """The reward program (``goal`` in words) on the template 00000 rollouts: per rollout
    its file, PHYRE's success, the program's success, dense score and clause scores."""

    goal: str
    program: str
    clauses: int
    rollouts: list[dict[str, Any]]


@dataclass(frozen=True)
class AnnealDone:
    """Annealing on the bucket scene with the dense program reward and, same seed, the
    sparse 0/1 reward; the best rollout's distance to the target jar and the explanation
    of its program score."""

    goal: str
    program: str
    budget: int
    dense: SearchResult
    sparse: SearchResult
    distance: float
    threshold: float
    explain: str


@dataclass(frozen=True)
class ComparisonDone:
    """Successes of each arm over ``trials`` more seeds."""

    trials: int
    budget: int
    dense: int
    sparse: int


Event = StepStarted | DatasetDone | AnnotationDone | TextDone | ProgramDone | AnnealDone | ComparisonDone


@dataclass(frozen=True)
class DemoReport:
    """The report folder, its README.md, summary.json's content and the run's seconds."""

    out: Path
    readme: Path
    summary: dict[str, Any]
    seconds: float


class DemoError(SimpatternsError):
    """The report folder cannot be created: one line naming it."""


def _trial(job: tuple[str, int, int]) -> dict[str, Any]:
    """One annealing trial ``(arm, seed, budget)`` on the bucket scene (run in a worker process)."""
    from simpatterns.envs.scenes import bucket_goal, bucket_program_text, three_buckets
    from simpatterns.optimize import Objective, anneal

    arm, seed, budget = job
    goal = bucket_goal(ANNEAL_GOAL)
    if arm == "dense":
        obj = Objective(three_buckets(), program=bucket_program_text(ANNEAL_GOAL), goal=goal, stop_when_settled=True)
    else:
        obj = Objective(three_buckets(), reward="goal", goal=goal, stop_when_settled=True)
    r = anneal(obj, budget, seed=seed, keep_trace=False)
    return {"arm": arm, "seed": seed, "success": r.best_goal_success, "samples": r.samples,
            "first_success": r.first_success, "best_score": r.best_score}


def _curve_plot(curves: dict[str, np.ndarray], budget: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.6), dpi=110)
    ax = fig.add_subplot()
    styles = [{"linestyle": "-", "linewidth": 2.0}, {"linestyle": "--", "linewidth": 2.2}]
    for k, (name, c) in enumerate(curves.items()):
        ax.step(np.arange(1, len(c) + 1), c, where="post", label=name, zorder=3 + k, clip_on=False,
                **styles[k % len(styles)])
    ax.set_xlim(1, budget)
    ax.set_ylim(-0.05, 1.05)  # a curve at 0 (sparse reward before its first success) stays off the x axis
    ax.set_xlabel("samples (simulated rollouts)")
    ax.set_ylabel("best score so far")
    ax.set_title("Simulated annealing: " + "get the green ball in the second bucket", fontsize=9)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)  # below: it covers no curve
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")



def run_demo(out: str | os.PathLike = "demo-report", *, seed: int = 0, budget: int = 60, trials: int = 6,
             workers: int = 2, backend: Backend | None = None,
             on_event: Callable[[Event], None] = lambda event: None) -> DemoReport:
    """Run the pipeline (see the module docstring) into the folder ``out``: ``budget``
    annealing samples per run, ``trials`` seeds per arm of the dense-vs-sparse comparison
    (0: skip it), ``workers`` processes for rollouts, annotation and trials on ``backend``
    (None: this machine). Raises `DemoError` when ``out`` cannot be created."""
    t_start = time.perf_counter()
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DemoError(f"{folder}: cannot create the report folder ({exc.strerror or exc})") from None
    summary: dict[str, Any] = {"seed": seed}

    def step(title: str) -> None:
        on_event(StepStarted(title, time.perf_counter() - t_start))

    step("1. simulate a small dataset")
    data = _dataset(folder / "dataset", seed, workers, backend)
    on_event(data)
    step("2. annotate with the built-in pattern library")
    library, annotations, done = _annotate(data, workers, backend)
    on_event(done)
    step("3. the annotation text of one rollout (what an LLM reads)")
    shown = next(k for k, r in enumerate(data.rows) if r["kind"] == "solution")
    text = _text(data, annotations, shown, folder)
    on_event(text)
    step("4. evaluate a reward program on the template 00000 rollouts")
    program = _program(data, annotations, library, folder)
    summary["program"] = {"goal": DEMO_GOAL, "rollouts": program.rollouts}
    on_event(program)
    from simpatterns.envs.scenes import bucket_goal_text

    step(f"5. simulated annealing: {bucket_goal_text(ANNEAL_GOAL).lower()}")
    anneal_done, best_ann = _anneal(folder, budget, seed, library)
    summary["anneal"] = _anneal_summary(anneal_done, seed)
    on_event(anneal_done)
    comparison = None
    if trials > 0:
        comparison, runs = _compare(trials, seed, budget, workers, backend)
        summary["comparison"] = {"trials": trials, "budget": budget, "dense_successes": comparison.dense,
                                 "sparse_successes": comparison.sparse, "runs": runs}
        on_event(comparison)
    step("6. write the report")
    best = anneal_done.dense
    from simpatterns.annotate.plots import captioned_gif, timeline_plot

    captioned_gif(best.best_trace, best_ann, folder / "best_rollout.gif", stride=4, fps=15)
    timeline_plot(best_ann, folder / "timeline.png", trace=best.best_trace)
    _curve_plot({"dense program reward": best.curve, "sparse 0/1 reward": anneal_done.sparse.curve}, budget,
                folder / "anneal_curve.png")
    best.best_trace.save(folder / "best_rollout.npz")
    best_ann.save(folder / "best_rollout.jsonl")
    from simpatterns.viewer import dataset_pages, trace_page

    trace_page(folder / "best_rollout.npz", annotation=folder / "best_rollout.jsonl",
               program=folder / "bucket_goal.rwd").write(folder / "best_rollout.html")
    dataset_pages(data.folder, folder / "dataset.html")
    seconds = time.perf_counter() - t_start
    summary["seconds"] = round(seconds, 1)
    atomic_write(folder / "summary.json", json.dumps(summary, indent=1))
    report = DemoReport(folder, folder / "README.md", summary, seconds)
    atomic_write(report.readme, _readme(seconds, seed, budget, data, done, text, program, anneal_done, comparison))
    return report


def _dataset(data_dir: Path, seed: int, workers: int, backend: Backend | None) -> DatasetDone:
    from simpatterns.simulators.dataset import build_dataset, plan_jobs
    from simpatterns.simulators.phyre import TEMPLATES

    templates = [t for t in DEMO_TEMPLATES if t in TEMPLATES and TEMPLATES[t].num_variants]
    variants = 4 if len(templates) == 1 else 2
    jobs = plan_jobs(templates, variants, "solution,random:2", seed=seed)
    rows = build_dataset(jobs, data_dir, workers=workers, backend=backend)
    return DatasetDone([r for r in rows if r.get("file")], templates, data_dir)


def _annotate(data: DatasetDone, workers: int, backend: Backend | None) -> tuple[Any, list[Any], AnnotationDone]:
    from simpatterns.annotate.annotator import annotate_many
    from simpatterns.dsl import builtin_library

    library = builtin_library()
    paths = [data.folder / r["file"] for r in data.rows]
    annotations = annotate_many(paths, library, workers=workers, trace_ids=[p.stem for p in paths], backend=backend)
    rollouts = []
    for p, r, ann in zip(paths, data.rows, annotations):
        ann.save(p.with_suffix(".jsonl"))
        counts: dict[str, int] = {}
        for e in ann.events:
            counts[e.pattern] = counts.get(e.pattern, 0) + 1
        top = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:3])
        rollouts.append((r["file"], ann.num_frames, len(ann.events), top, bool(r["success"])))
    return library, annotations, AnnotationDone(len(library), sum(len(a.events) for a in annotations), rollouts)


def _text(data: DatasetDone, annotations: list[Any], shown: int, folder: Path) -> TextDone:
    from simpatterns.annotate.text import annotation_text
    from simpatterns.trace import Trace

    trace = Trace.load(data.folder / data.rows[shown]["file"])
    text = annotation_text(trace, annotations[shown], budget_chars=3000)
    atomic_write(folder / "annotation.txt", text + "\n")
    return TextDone(data.rows[shown]["file"], text)


def _program(data: DatasetDone, annotations: list[Any], library: Any, folder: Path) -> ProgramDone:
    from simpatterns.dsl import RewardProgram
    from simpatterns.trace import Trace

    atomic_write(folder / "goal.rwd", DEMO_PROGRAM)
    program = RewardProgram.from_text(DEMO_PROGRAM, library)
    evals = []
    for r, ann in zip(data.rows, annotations):
        if r["template"] != "00000":  # the program names 00000's bodies (green and blue balls)
            continue
        res = program.evaluate(ann, Trace.load(data.folder / r["file"]))
        evals.append({"rollout": r["file"], "solved": r["success"], "success": res.success, "score": res.score,
                      "clauses": [c.score for c in res.clauses]})
    return ProgramDone(DEMO_GOAL, DEMO_PROGRAM, len(program.clauses), evals)


def _anneal(folder: Path, budget: int, seed: int, library: Any) -> tuple[AnnealDone, Any]:
    from simpatterns.annotate.annotator import annotate
    from simpatterns.envs.scenes import (
        bucket_goal,
        bucket_goal_text,
        bucket_program_text,
        three_buckets,
    )
    from simpatterns.optimize import Objective, anneal

    scene = three_buckets()
    goal = bucket_goal(ANNEAL_GOAL)
    bucket_text = bucket_program_text(ANNEAL_GOAL)
    atomic_write(folder / "bucket_goal.rwd", bucket_text)
    dense = Objective(scene, program=bucket_text, goal=goal, stop_when_settled=True)
    sparse = Objective(scene, reward="goal", goal=goal, stop_when_settled=True)
    best = anneal(dense, budget, seed=seed)
    base = anneal(sparse, budget, seed=seed, keep_trace=False)
    assert best.best_trace is not None and dense.reward_program is not None
    best_ann = annotate(best.best_trace, library)
    explain = dense.reward_program.evaluate(best_ann, best.best_trace, explain=True)
    return AnnealDone(bucket_goal_text(ANNEAL_GOAL), bucket_text, budget, best, base, goal.distance(best.best_trace),
                      goal.threshold, explain.explain_text()), best_ann


def _anneal_summary(n: AnnealDone, seed: int) -> dict[str, Any]:
    return {"goal": n.goal, "budget": n.budget, "seed": seed, "best_action": n.dense.best_action,
            "best_score": n.dense.best_score, "success": n.dense.best_goal_success, "final_distance_px": n.distance,
            "samples": n.dense.samples, "first_success": n.dense.first_success,
            "sparse_success": n.sparse.best_goal_success, "sparse_samples": n.sparse.samples}


def _compare(trials: int, seed: int, budget: int, workers: int, backend: Backend | None
             ) -> tuple[ComparisonDone, list[dict[str, Any]]]:
    jobs = [(arm, seed + 1 + k, budget) for arm in ("dense", "sparse") for k in range(trials)]
    with make_executor(workers, backend=backend) as executor:
        runs = executor.map(_trial, jobs, chunksize=1)
    rate = {arm: sum(c["success"] for c in runs if c["arm"] == arm) for arm in ("dense", "sparse")}
    return ComparisonDone(trials, budget, rate["dense"], rate["sparse"]), runs


def _readme(seconds: float, seed: int, budget: int, d: DatasetDone, a: AnnotationDone, t: TextDone,
            p: ProgramDone, n: AnnealDone, c: ComparisonDone | None) -> str:
    md = [
        "# simpatterns demo report",
        "",
        f"Made by `simpatterns demo --seed {seed} --rollouts {budget}` in {seconds:.0f} s, with no LLM and no "
        "network.",
        "",
        "## 1. Dataset",
        "",
        f"{len(d.rows)} PHYRE rollouts (templates {', '.join(d.templates)}; verified solutions and random actions) in "
        "`dataset/`, one `.npz` trace each, `index.jsonl` listing them.",
        "",
        "## 2. Annotation",
        "",
        f"The built-in library ({a.patterns} patterns) found {a.events} events; "
        "each trace's annotation is the `.jsonl` beside it.",
        "",
        f"## 3. What an LLM reads: `{t.rollout}`",
        "",
        "```text",
        t.text,
        "```",
        "",
        "## 4. A reward program",
        "",
        f"Goal: *{p.goal}* (`goal.rwd`):",
        "",
        "```",
        p.program.split("\n", 1)[1].rstrip(),
        "```",
        "",
        "| rollout | PHYRE solved | program success | dense score | " + " | ".join(
            f"c{k + 1}" for k in range(p.clauses)) + " |",
        "|---|---|---|---|" + "---|" * p.clauses,
        *[f"| {e['rollout']} | {'yes' if e['solved'] else 'no'} | {'yes' if e['success'] else 'no'} | "
          f"{e['score']:.3f} | " + " | ".join(f"{c:.2f}" for c in e["clauses"]) + " |" for e in p.rollouts],
        "",
        "The dense score gives partial credit: rollouts that get closer to the goal score higher, "
        "which is what an optimiser needs.",
        "",
        f"## 5. Simulated annealing: {n.goal.lower()}",
        "",
        "Scene `buckets` (a ramp, a shelf with the green ball, three jars); reward program `bucket_goal.rwd`:",
        "",
        "```",
        n.program.rstrip(),
        "```",
        "",
        f"Best action {[round(v, 3) for v in n.dense.best_action]} (x, y, radius in [0, 1]) after "
        f"{n.dense.samples} of {budget} samples: the green ball ends {n.distance:.1f} px from the target jar — "
        f"**{'success' if n.dense.best_goal_success else 'failure'}** "
        f"(success: closer than {n.threshold:g} px). With the sparse 0/1 reward, the same seed "
        f"{'also succeeded' if n.sparse.best_goal_success else 'did not succeed'} ({n.sparse.samples} samples).",
        "",
        "Scrub it and click its events in the browser: [best_rollout.html](best_rollout.html) (the reward "
        "program's clauses over time included); every rollout of the dataset: [dataset.html](dataset.html).",
        "",
        "![best rollout with the events of each moment](best_rollout.gif)",
        "",
        "![best score per sample](anneal_curve.png)",
        "",
        "![timeline of the best rollout's events](timeline.png)",
        "",
        "```text",
        n.explain,
        "```",
        "",
    ]
    if c is not None:
        md += [f"Over {c.trials} more seeds at budget {budget}: dense program reward "
               f"**{c.dense}/{c.trials}**, sparse reward **{c.sparse}/{c.trials}**. "
               "`benchmarks/anneal_dense_vs_sparse.py` runs the full experiment "
               "(docs/design/anneal_dense_vs_sparse.md).", ""]
    return "\n".join(md)
