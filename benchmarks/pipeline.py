#!/usr/bin/env python
"""The pipeline a user runs, end to end: simulate -> annotate -> Q&A questions -> program labels.

    python benchmarks/pipeline.py [--variants 100] [--reps 1] [--no-ray] [--tasks 400]

25 templates x ``--variants`` shipped variants (2,500 rollouts at 100; even variants
take the stored solution, odd ones a random valid action), each simulated, annotated
with the built-in library, listed with every Q&A question it can be asked (ten a
rollout are then picked, balanced over all rollouts) and labelled by three shipped
goal programs (`simpatterns.qa.pipeline.run_pipeline`). Nothing is written to disk.

Three ways, each checked to give the same labels, questions and answers:
inline (one process), the local pool with 2 workers, and Ray with 2 workers on a
local cluster (``ray.init(num_cpus=2)``). Printed: throughput per core-second
(rollouts / (wall x cores used)), the speed-up against inline, the CPU seconds
where they can be counted (this process and its pool workers), where the time goes
per stage (CPU seconds of each stage, summed over the rollouts, in the worker that
ran it), the peak memory (``ru_maxrss``) of this process and of the workers, and
the cost of one task and of starting 2 workers, on the pool and on Ray (``--tasks``
no-op tasks one at a time), and what a rollout ships each way. Runs are interleaved rep by
rep, best wall time kept; the pool is timed before Ray starts (Ray's threads would make the pool start its workers through a
fork server), then inline again beside Ray as its baseline.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import resource
import sys
import time
from typing import Any, Callable

from machine import cpu_s, machine_line

from simpatterns.parallel import Backend, make_executor
from simpatterns.qa.pipeline import SHIPPED_GOALS, STAGES, PipelineReport, pipeline_items, run_pipeline
from simpatterns.simulators.phyre import TEMPLATES


def timed(configs: dict[str, Callable[[], Any]], reps: int) -> dict[str, tuple[float, float, Any]]:
    """Best (wall, CPU, result) of each config, interleaved rep by rep."""
    best: dict[str, tuple[float, float, Any]] = {}
    for _ in range(reps):
        for name, fn in configs.items():
            gc.collect()
            c0, t0 = cpu_s(), time.perf_counter()
            result = fn()
            wall, cpu = time.perf_counter() - t0, cpu_s() - c0
            if name not in best or wall < best[name][0]:
                best[name] = (wall, cpu, result)
    return best


def same(a: PipelineReport, b: PipelineReport) -> bool:
    return a.questions == b.questions and all(
        (x.item, x.frames, x.events, x.labels, x.candidates) == (y.item, y.frames, y.events, y.labels, y.candidates)
        for x, y in zip(a.outcomes, b.outcomes, strict=True))


def noop(item: int) -> int:
    return item


def task_cost(tasks: int, backend: Backend | None = None) -> tuple[float, float]:
    """(seconds to start 2 workers and get a first result, wall seconds per task x 2 workers)
    of no-op tasks sent one at a time."""
    t0 = time.perf_counter()
    with make_executor(2, backend=backend) as ex:
        ex.map(noop, [0, 1], chunksize=1)
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        ex.map(noop, list(range(tasks)), chunksize=1)
        per_task = (time.perf_counter() - t1) * 2 / tasks
    return started, per_task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=100, help="variants per template (100: 2,500 rollouts)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=400, help="no-op tasks timed for the cost of one task (pool and Ray)")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()

    ray_ok = not args.no_ray
    if ray_ok:
        try:
            import ray
        except ImportError:
            ray_ok = False
    items = pipeline_items(sorted(TEMPLATES), args.variants)
    n = len(items)
    print(f"{sys.executable}; {machine_line()}; Ray: {'yes' if ray_ok else 'no'}")
    print(f"{n} rollouts ({len(TEMPLATES)} templates x up to {args.variants} variants); programs: "
          f"{', '.join(SHIPPED_GOALS)}")

    run_pipeline(items[:2])  # imports and caches warm, as in a worker that has started
    best = timed({"inline": lambda: run_pipeline(items), "pool -j 2": lambda: run_pipeline(items, workers=2)},
                 args.reps)
    ray_best: dict[str, tuple[float, float, Any]] = {}
    pool_cost = task_cost(args.tasks)  # before Ray's threads (see above)
    ray_cost = None
    try:
        if ray_ok:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            ray_best = timed({"inline (beside Ray)": lambda: run_pipeline(items),
                              "ray -j 2": lambda: run_pipeline(items, workers=2, backend=Backend("ray"))}, args.reps)
            ray_cost = task_cost(args.tasks, Backend("ray"))
    finally:
        if ray_ok:
            ray.shutdown()
    parent_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    base = best["inline"][2]
    for name, (_, _, report) in {**best, **ray_best}.items():
        assert same(base, report), f"{name}: labels, questions or answers differ from inline"
    questions = len(base.questions)
    failed = sum(1 for o in base.outcomes if o.error)

    print(f"\n== throughput, {n} rollouts -> {questions} questions, {n * len(SHIPPED_GOALS)} labels"
          f"{f' ({failed} without an action)' if failed else ''}  ({machine_line()})")
    print(f"  {'':22s} {'wall s':>8s} {'rollouts/s':>11s} {'/core-s':>8s} {'speed-up':>9s} {'CPU s':>7s} "
          f"{'worker peak':>12s}")
    for group, ref in ((best, "inline"), (ray_best, "inline (beside Ray)")):
        for name, (wall, cpu, report) in group.items():
            cores = 1 if name.startswith("inline") else 2
            cpu_txt = f"{cpu:7.1f}" if not name.startswith("ray") else f"{'-':>7s}"
            peak = max(o.maxrss_kb for o in report.outcomes) / 1024
            print(f"  {name:22s} {wall:8.2f} {n / wall:11.1f} {n / (wall * cores):8.1f} "
                  f"{group[ref][0] / wall:8.2f}x {cpu_txt} {peak:9.0f} MB")
    print(f"  peak memory of this process (all runs, every result kept): {parent_rss_mb:.0f} MB; "
          "inline's 'worker' is this process")
    sent = sum(len(pickle.dumps(it)) for it in items) / n
    back = sum(len(pickle.dumps(o)) for o in base.outcomes) / n
    print(f"  pickled per rollout: {sent:.0f} bytes sent to a worker, {back / 1024:.1f} kB back "
          "(most of it the candidate questions)")

    print(f"\n== where the time goes (CPU seconds in the process that ran each stage)  ({machine_line()})")
    others = {"pool -j 2": best["pool -j 2"][2].stage_seconds(),
              **({"ray -j 2": ray_best["ray -j 2"][2].stage_seconds()} if ray_best else {})}
    print(f"  {'stage':18s} {'inline s':>9s} {'ms/rollout':>11s} {'share':>6s}"
          + "".join(f" {name + ' s':>12s}" for name in others))
    stages_inline = base.stage_seconds()
    total = sum(stages_inline.values())
    for stage in (*STAGES, "select questions"):
        s = stages_inline[stage]
        print(f"  {stage:18s} {s:9.2f} {1e3 * s / n:11.2f} {100 * s / total:5.1f}%"
              + "".join(f" {st[stage]:12.2f}" for st in others.values()))
    print(f"  {'sum of stages':18s} {total:9.2f} {1e3 * total / n:11.2f} {'':6s}"
          + "".join(f" {sum(st.values()):12.2f}" for st in others.values()))
    stages_pool = others["pool -j 2"]
    wall1, cpu1, _ = best["inline"]
    wall2, cpu2, _ = best["pool -j 2"]
    print(f"  outside the stages (start-up, shipping results, the pool): inline {cpu1 - total:.2f} s CPU, "
          f"pool -j 2 {cpu2 - sum(stages_pool.values()):.2f} s CPU (parent + workers)")
    print(f"  CPU seconds, pool -j 2 / inline: {cpu2 / cpu1:.2f} (1.00 = no extra work)")
    print(f"\n== cost of a task (no-op tasks one at a time on 2 workers; per task x 2 workers)  ({machine_line()})")
    for name, cost in (("local pool", pool_cost), ("Ray actors", ray_cost)):
        if cost:
            print(f"  {name:10s}: started and answering in {cost[0]:.2f} s; {1e3 * cost[1]:.2f} ms per task")


if __name__ == "__main__":
    main()
