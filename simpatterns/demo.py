"""``simpatterns demo``: the whole pipeline on a fresh install, no LLM and no network.

1. simulate a small dataset of PHYRE rollouts (verified solutions and random actions);
2. annotate it with the built-in pattern library;
3. show the annotation text of one rollout (what an LLM reads);
4. evaluate a reward program on the template 00000 rollouts (success and dense score);
5. simulated annealing on the goal "get the green ball in the second bucket"
   (paper §5.2), and a small dense-vs-sparse comparison;
6. write a report folder: README.md (the summary), the best rollout as a
   captioned GIF, its timeline plot, the annealing curve, the annotation
   text, the dataset with its annotations, and summary.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simpatterns.cli_support import fail, print_table

from simpatterns.files import atomic_open, atomic_write
from simpatterns.parallel import executor_options, make_executor

# "The red ball hits something, then the green ball collides with the blue ball, and the
# two touch at the end" for template 00000's scenes (green and blue balls).
DEMO_GOAL = "the red ball hits something, then the green ball hits the blue ball, and they touch at the end"
DEMO_PROGRAM = """# {goal}
AND(
    EVENT("collision start", {{"object_a": "red ball"}}),
    AFTER("collision start", "collision start",
          first_params={{"object_a": "red ball"}},
          second_params={{"object_a": "green ball", "object_b": "blue ball"}}),
    TOUCHING("green ball", "blue ball", t=1.0),
)
""".format(goal=DEMO_GOAL)
DEMO_TEMPLATES = ("00000", "00002", "00007", "00012")
ANNEAL_GOAL = 2  # the second bucket


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

    fig = Figure(figsize=(6, 3.2), dpi=110)
    ax = fig.add_subplot()
    for name, c in curves.items():
        ax.step(np.arange(1, len(c) + 1), c, where="post", label=name)
    ax.set_xlim(1, budget)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("samples (simulated rollouts)")
    ax.set_ylabel("best score so far")
    ax.set_title("Simulated annealing: " + "get the green ball in the second bucket", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")


def demo(
    out: Path = typer.Option(Path("demo-report"), "--out", help="report folder"),
    seed: int = typer.Option(0, "--seed", help="seed of the data set and the search"),
    budget: int = typer.Option(60, "--rollouts", help="simulated rollouts per annealing run"),
    trials: int = typer.Option(6, "--trials", help="seeds per arm in the dense-vs-sparse comparison (0: skip)"),
    workers: int = typer.Option(2, "--workers", "-j", help="processes for rollouts, annotation and trials"),
) -> None:
    """The end-to-end pipeline on a fresh install: dataset, annotation, reward program, annealing, report."""
    from simpatterns.annotate.annotator import annotate, annotate_many
    from simpatterns.annotate.plots import captioned_gif, timeline_plot
    from simpatterns.annotate.text import annotation_text
    from simpatterns.dsl import RewardProgram, builtin_library
    from simpatterns.envs.scenes import (
        bucket_goal,
        bucket_goal_text,
        bucket_program_text,
        three_buckets,
    )
    from simpatterns.optimize import Objective, anneal
    from simpatterns.simulators.dataset import build_dataset, plan_jobs
    from simpatterns.simulators.phyre import TEMPLATES
    from simpatterns.trace import Trace

    console = Console()
    t_start = time.perf_counter()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{out}: cannot create the report folder ({exc.strerror or exc})")
    data_dir = out / "dataset"
    summary: dict[str, Any] = {"seed": seed}

    def step(title: str) -> None:
        console.rule(f"[bold]{title}[/bold]  ({time.perf_counter() - t_start:.1f} s)")

    # 1. dataset ------------------------------------------------------------------------
    step("1. simulate a small dataset")
    templates = [t for t in DEMO_TEMPLATES if t in TEMPLATES and TEMPLATES[t].num_variants]
    variants = 4 if len(templates) == 1 else 2
    jobs = plan_jobs(templates, variants, "solution,random:2", seed=seed)
    rows = build_dataset(jobs, data_dir, workers=workers)
    rows = [r for r in rows if r.get("file")]
    console.print(f"{len(rows)} rollouts of templates {', '.join(templates)} -> {escape(str(data_dir))}/")

    # 2. annotate -----------------------------------------------------------------------
    step("2. annotate with the built-in pattern library")
    library = builtin_library()
    paths = [data_dir / r["file"] for r in rows]
    annotations = annotate_many(paths, library, workers=workers, trace_ids=[p.stem for p in paths])
    for p, ann in zip(paths, annotations):
        ann.save(p.with_suffix(".jsonl"))
    table = Table(title=f"{len(library)} patterns, {sum(len(a.events) for a in annotations)} events")
    for col in ("rollout", "frames", "events", "most frequent patterns", "solved"):
        table.add_column(col)
    for r, ann in zip(rows, annotations):
        counts: dict[str, int] = {}
        for e in ann.events:
            counts[e.pattern] = counts.get(e.pattern, 0) + 1
        top = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:3])
        table.add_row(r["file"], str(ann.num_frames), str(len(ann.events)), top, "yes" if r["success"] else "no")
    print_table(table, console)  # the rollout column is never cut

    # 3. annotation text ------------------------------------------------------------------
    step("3. the annotation text of one rollout (what an LLM reads)")
    shown = next(k for k, r in enumerate(rows) if r["kind"] == "solution")
    trace = Trace.load(paths[shown])
    text = annotation_text(trace, annotations[shown], budget_chars=3000)
    atomic_write(out / "annotation.txt", text + "\n")
    lines = text.splitlines()
    console.print(escape("\n".join(lines[:28] + ([f"... ({len(lines) - 28} more lines in annotation.txt)"]
                                                  if len(lines) > 28 else []))))

    # 4. reward program -----------------------------------------------------------------
    step("4. evaluate a reward program on the template 00000 rollouts")
    atomic_write(out / "goal.rwd", DEMO_PROGRAM)
    program = RewardProgram.from_text(DEMO_PROGRAM, library)
    console.print(f"goal: {DEMO_GOAL}\n" + escape(DEMO_PROGRAM.split("\n", 1)[1]))
    table = Table(title="reward program on the dataset")
    for col in ("rollout", "PHYRE solved", "program success", "dense score",
                *[f"c{k + 1}" for k in range(len(program.clauses))]):
        table.add_column(col)
    evals = []
    for p, r, ann in zip(paths, rows, annotations):
        if r["template"] != "00000":  # the program names 00000's bodies (green and blue balls)
            continue
        res = program.evaluate(ann, Trace.load(p))
        evals.append({"rollout": r["file"], "solved": r["success"], "success": res.success, "score": res.score,
                      "clauses": [c.score for c in res.clauses]})
        table.add_row(r["file"], "yes" if r["success"] else "no", "yes" if res.success else "no",
                      f"{res.score:.3f}", *[f"{c.score:.2f}" for c in res.clauses])
    print_table(table, console)  # the rollout column is never cut
    summary["program"] = {"goal": DEMO_GOAL, "rollouts": evals}

    # 5. annealing ------------------------------------------------------------------------
    step(f"5. simulated annealing: {bucket_goal_text(ANNEAL_GOAL).lower()}")
    scene = three_buckets()
    goal = bucket_goal(ANNEAL_GOAL)
    bucket_text = bucket_program_text(ANNEAL_GOAL)
    atomic_write(out / "bucket_goal.rwd", bucket_text)
    dense = Objective(scene, program=bucket_text, goal=goal, stop_when_settled=True)
    sparse = Objective(scene, reward="goal", goal=goal, stop_when_settled=True)
    best = anneal(dense, budget, seed=seed)
    base = anneal(sparse, budget, seed=seed, keep_trace=False)
    assert best.best_trace is not None
    dist = goal.distance(best.best_trace)
    console.print(
        f"dense program reward: best action {[round(v, 3) for v in best.best_action]}, score {best.best_score:.3f}, "
        f"found after {best.first_success or best.samples} of {budget} samples; green ball ends {dist:.1f} px "
        f"from black jar {ANNEAL_GOAL}: [bold]{'SUCCESS' if best.best_goal_success else 'failure'}[/bold]")
    console.print(f"sparse 0/1 reward, same seed: {'success' if base.best_goal_success else 'failure'} "
                  f"after {base.samples} samples")
    best_ann = annotate(best.best_trace, library)
    explain = dense.reward_program.evaluate(best_ann, best.best_trace, explain=True)
    console.print(escape(explain.explain_text()))
    summary["anneal"] = {"goal": bucket_goal_text(ANNEAL_GOAL), "budget": budget, "seed": seed,
                         "best_action": best.best_action, "best_score": best.best_score,
                         "success": best.best_goal_success, "final_distance_px": dist,
                         "samples": best.samples, "first_success": best.first_success,
                         "sparse_success": base.best_goal_success, "sparse_samples": base.samples}
    comparison: list[dict[str, Any]] = []
    if trials > 0:
        jobs = [(arm, seed + 1 + k, budget) for arm in ("dense", "sparse") for k in range(trials)]
        with make_executor(workers) as executor:
            comparison = executor.map(_trial, jobs, chunksize=1)
        rate = {arm: sum(c["success"] for c in comparison if c["arm"] == arm) for arm in ("dense", "sparse")}
        console.print(f"{trials} more seeds at budget {budget}: dense program {rate['dense']}/{trials} successes, "
                      f"sparse reward {rate['sparse']}/{trials} (benchmarks/anneal_dense_vs_sparse.py runs the "
                      "full experiment)")
        summary["comparison"] = {"trials": trials, "budget": budget, "dense_successes": rate["dense"],
                                 "sparse_successes": rate["sparse"], "runs": comparison}

    # 6. report ---------------------------------------------------------------------------
    step("6. write the report")
    captioned_gif(best.best_trace, best_ann, out / "best_rollout.gif", stride=4, fps=15)
    timeline_plot(best_ann, out / "timeline.png", trace=best.best_trace)
    _curve_plot({"dense program reward": best.curve, "sparse 0/1 reward": base.curve}, budget, out / "anneal_curve.png")
    best.best_trace.save(out / "best_rollout.npz")
    best_ann.save(out / "best_rollout.jsonl")
    seconds = time.perf_counter() - t_start
    summary["seconds"] = round(seconds, 1)
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    md = [
        "# simpatterns demo report",
        "",
        f"Made by `simpatterns demo --seed {seed} --rollouts {budget}` in {seconds:.0f} s, with no LLM and no network.",
        "",
        "## 1. Dataset",
        "",
        f"{len(rows)} PHYRE rollouts (templates {', '.join(templates)}; verified solutions and random actions) in "
        "`dataset/`, one `.npz` trace each, `index.jsonl` listing them.",
        "",
        "## 2. Annotation",
        "",
        f"The built-in library ({len(library)} patterns) found {sum(len(a.events) for a in annotations)} events; "
        "each trace's annotation is the `.jsonl` beside it.",
        "",
        f"## 3. What an LLM reads: `{rows[shown]['file']}`",
        "",
        "```text",
        text,
        "```",
        "",
        "## 4. A reward program",
        "",
        f"Goal: *{DEMO_GOAL}* (`goal.rwd`):",
        "",
        "```",
        DEMO_PROGRAM.split("\n", 1)[1].rstrip(),
        "```",
        "",
        "| rollout | PHYRE solved | program success | dense score | " + " | ".join(
            f"c{k + 1}" for k in range(len(program.clauses))) + " |",
        "|---|---|---|---|" + "---|" * len(program.clauses),
        *[f"| {e['rollout']} | {'yes' if e['solved'] else 'no'} | {'yes' if e['success'] else 'no'} | "
          f"{e['score']:.3f} | " + " | ".join(f"{c:.2f}" for c in e["clauses"]) + " |" for e in evals],
        "",
        "The dense score gives partial credit: rollouts that get closer to the goal score higher, "
        "which is what an optimiser needs.",
        "",
        f"## 5. Simulated annealing: {bucket_goal_text(ANNEAL_GOAL).lower()}",
        "",
        "Scene `buckets` (a ramp, a shelf with the green ball, three jars); reward program `bucket_goal.rwd`:",
        "",
        "```",
        bucket_text.rstrip(),
        "```",
        "",
        f"Best action {[round(v, 3) for v in best.best_action]} (x, y, radius in [0, 1]) after "
        f"{best.samples} of {budget} samples: the green ball ends {dist:.1f} px from the target jar — "
        f"**{'success' if best.best_goal_success else 'failure'}** "
        f"(success: closer than {goal.threshold:g} px). With the sparse 0/1 reward, the same seed "
        f"{'also succeeded' if base.best_goal_success else 'did not succeed'} ({base.samples} samples).",
        "",
        "![best rollout with the events of each moment](best_rollout.gif)",
        "",
        "![best score per sample](anneal_curve.png)",
        "",
        "![timeline of the best rollout's events](timeline.png)",
        "",
        "```text",
        explain.explain_text(),
        "```",
        "",
    ]
    if comparison:
        s = summary["comparison"]
        md += [f"Over {trials} more seeds at budget {budget}: dense program reward "
               f"**{s['dense_successes']}/{trials}**, sparse reward **{s['sparse_successes']}/{trials}**. "
               "`benchmarks/anneal_dense_vs_sparse.py` runs the full experiment "
               "(docs/anneal_dense_vs_sparse.md).", ""]
    atomic_write(out / "README.md", "\n".join(md))
    console.print(f"report -> {escape(str(out / 'README.md'))} ({seconds:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("demo")(executor_options(demo))
