#!/usr/bin/env python
"""PHYRE's within-template protocol on our tasks: random, memory, oracle and annealing agents.

    python benchmarks/agents_within_template.py                       # fold 0, 4 test tasks per template
    python benchmarks/agents_within_template.py --seeds 0-9 --per-template 20   # the whole protocol (hours here)
    python benchmarks/agents_within_template.py --docs                # also copy the figure into docs/guide

For each fold seed: the test tasks of ``ball_within_template`` (the first
``--per-template`` of each template, in id order), menus of the ``--bins``³
grid with every valid cell simulated once, and the memory agent trained on
``--train-per-template`` training tasks of each template. Agents: random
(sampled, and its exact expectation), memory (PHYRE's MEM, per template),
oracle, simulated annealing of the task's dense goal program on the menu's
grid, and (``--continuous``) the same annealing in the continuous action cube.
Budget: 100 attempts per task (PHYRE's). The run directory resumes after a
stop; the report (``report.md``, ``summary.json``, two pictures) is written
into it. Prints the AUCCESS table, the wall time and the load average (the
machine is shared, so timings are only indicative).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simpatterns.agents.folds import parse_seeds  # noqa: E402
from simpatterns.agents.report import markdown_table, write_report  # noqa: E402
from simpatterns.agents.runner import EvalConfig, evaluate, make_conditions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--per-template", type=int, default=4)
    ap.add_argument("--train-per-template", type=int, default=8)
    ap.add_argument("--bins", type=int, default=6)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--continuous", action="store_true", help="also anneal in the continuous action cube")
    ap.add_argument("--out", default=str(ROOT / "runs" / "agents_within_template"))
    ap.add_argument("--cache", default=None, help="menu cache (default ~/.cache/simpatterns/menus)")
    ap.add_argument("--docs", action="store_true", help="copy the ellipse figure to docs/guide")
    args = ap.parse_args()

    config = EvalConfig(setup="ball_within_template", seeds=tuple(parse_seeds(args.seeds)),
                        per_template=args.per_template, train_per_template=args.train_per_template,
                        budget=args.budget, bins=args.bins)
    agents = ["random", "memory", "oracle", "anneal"] + (["anneal-continuous"] if args.continuous else [])
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    out = evaluate(args.out, config, make_conditions(agents), workers=args.workers, cache_dir=args.cache,
                   progress=True, log=print)
    seconds = time.perf_counter() - t0
    report = write_report(args.out)
    print(markdown_table(report["head"], report["rows"]))
    print(f"{out.done} episodes run ({out.already} resumed) in {seconds:.0f} s with {args.workers} workers; "
          f"load average {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at the end (shared machine)")
    print(f"report -> {Path(args.out) / 'report.md'}")
    if args.docs:
        dest = ROOT / "docs" / "guide" / "agents_success_vs_attempts.png"
        shutil.copyfile(Path(args.out) / "success_vs_attempts.png", dest)
        print(f"figure -> {dest}")


if __name__ == "__main__":
    main()
