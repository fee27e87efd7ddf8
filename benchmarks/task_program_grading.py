#!/usr/bin/env python
"""Does the default task program (`task_program_text`) say PHYRE's goal, and does its score
order failed rollouts by how close the goal pair came?

    python benchmarks/task_program_grading.py                  # 25 templates x 40 random + 10 near-miss actions
    python benchmarks/task_program_grading.py --random 10 --near 4 --templates 00000,00002

Per template (shipped variant 0): the stored solution, ``--near`` near-misses (the solution
moved by N(0, 0.03) per coordinate) and ``--random`` uniformly random valid actions, each run
to PHYRE's end (stop at success). For every rollout: does the program's success equal the
simulator's (``trace.meta["success"]``)? Among the failures: Spearman's rho between the score
and minus the goal pair's closest outline distance over the rollout (0 once they touch), so a
positive rho means "closer scores higher". The program this change replaced (NEARBY_AT with the
sum of the bounding radii + TOUCHING at the end) is measured alongside as ``old``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simpatterns.dsl import RewardProgram, builtin_library  # noqa: E402
from simpatterns.dsl.predicates import outline_gaps  # noqa: E402
from simpatterns.dsl.runtime import TraceView  # noqa: E402
from simpatterns.envs.scenes import task_program_text  # noqa: E402
from simpatterns.simulators.phyre import TEMPLATES, get_template, simulate  # noqa: E402


def old_program_text(scene) -> str:
    """The default program before this change, for comparison."""
    bodies = scene.trace_bodies()
    a, b = (bodies[i] for i in scene.goal)
    return (f'AND(NEARBY_AT("{a.name}", target="{b.name}", window=(0, 1), '
            f'radius={a.bounding_radius + b.bounding_radius:.1f}), TOUCHING("{a.name}", "{b.name}", t=1.0))')


def closest_gap(trace, pair) -> float:
    view = TraceView(trace)
    return float(outline_gaps(view, (pair[0],), (pair[1],), np.arange(trace.num_frames)).min())


def rho(scores: list[float], gaps: list[float]) -> float:
    if len(scores) < 3 or len(set(scores)) < 2 or len(set(gaps)) < 2:
        return float("nan")
    return float(spearmanr(scores, -np.asarray(gaps)).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", type=int, default=40, help="random valid actions per template")
    ap.add_argument("--near", type=int, default=10, help="near-misses of the solution per template")
    ap.add_argument("--templates", default="", help="comma-separated ids (default: all 25)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    lib = builtin_library()
    rng = np.random.default_rng(args.seed)
    ids = args.templates.split(",") if args.templates else sorted(TEMPLATES)
    pooled: dict[str, list] = {"new": [], "old": [], "gap": []}
    disagree = {"new": 0, "old": 0}
    n_all = 0
    eval_s = 0.0
    print(f"{'template':8} {'runs':>4} {'fails':>5} {'new rho':>8} {'old rho':>8} {'new fail mean':>13} "
          f"{'old fail mean':>13} {'old wrong':>9}")
    for tid in ids:
        tpl = get_template(tid)
        scene = tpl.variant_scene(0)
        sol = np.asarray(tpl.solution(0))
        new = RewardProgram.from_text(task_program_text(scene), lib)
        old = RewardProgram.from_text(old_program_text(scene), lib)
        actions = [sol] + [np.clip(sol + rng.normal(0, 0.03, 3), 0, 1) for _ in range(args.near)]
        runs = []
        while len(runs) < 1 + args.near + args.random:
            a = actions[len(runs)] if len(runs) < len(actions) else rng.random(3)
            r = simulate(scene, a)
            if r.valid:
                runs.append(r.trace)
            elif len(runs) < len(actions):
                actions.pop(len(runs))
        fails = {"new": [], "old": [], "gap": []}
        wrong_old = 0
        for tr in runs:
            t0 = time.perf_counter()
            rn = new.evaluate(None, tr)
            eval_s += time.perf_counter() - t0
            ro = old.evaluate(None, tr)
            truth = bool(tr.meta["success"])
            disagree["new"] += rn.success != truth
            disagree["old"] += ro.success != truth
            wrong_old += ro.success != truth
            n_all += 1
            if not truth:
                fails["new"].append(rn.score)
                fails["old"].append(ro.score)
                fails["gap"].append(closest_gap(tr, scene.goal))
        for k in pooled:
            pooled[k] += fails[k]
        print(f"{tid:8} {len(runs):4d} {len(fails['gap']):5d} {rho(fails['new'], fails['gap']):8.3f} "
              f"{rho(fails['old'], fails['gap']):8.3f} {np.mean(fails['new']):13.3f} {np.mean(fails['old']):13.3f} "
              f"{wrong_old:9d}")
    print(f"pooled failures {len(pooled['gap'])}: rho new {rho(pooled['new'], pooled['gap']):.3f}, "
          f"old {rho(pooled['old'], pooled['gap']):.3f}")
    print(f"success != PHYRE's on {disagree['new']} of {n_all} rollouts (new), {disagree['old']} (old); "
          f"new program evaluation {1e3 * eval_s / n_all:.2f} ms per rollout")


if __name__ == "__main__":
    main()
