#!/usr/bin/env python
"""Rebuild the shipped variant table (simpatterns/simulators/phyre/data/variants.json).

    python scripts/build_variants.py --templates all --workers 2

Each template's result is checkpointed to build/variants/<id>.json as soon as
it is done; a re-run skips finished templates (use --force to redo them) and
then merges every checkpoint into the package data file. Deterministic for a
given --seed. See simpatterns/simulators/phyre/variants.py for the rule.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from simpatterns.files import atomic_write_json
from simpatterns.simulators.phyre import TEMPLATES
from simpatterns.simulators.phyre.variants import (
    BUILD_SEED,
    ESTIMATE_ACTIONS,
    MAX_SOLVE_RATE,
    SEARCH_ACTIONS,
    TARGET_VARIANTS,
    build_template,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "simpatterns" / "simulators" / "phyre" / "data" / "variants.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--templates", default="all", help="'all' or comma-separated ids (e.g. 0,7,12)")
    ap.add_argument("--target", type=int, default=TARGET_VARIANTS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=BUILD_SEED)
    ap.add_argument("--checkpoints", type=Path, default=ROOT / "build" / "variants")
    ap.add_argument("--force", action="store_true", help="recompute templates that have a checkpoint")
    ap.add_argument("--strategy", choices=("reuse", "random"), default="reuse",
                    help="solution search (see variants.py); each checkpoint records its own")
    ap.add_argument("--no-merge", action="store_true")
    args = ap.parse_args()

    ids = list(TEMPLATES) if args.templates == "all" else [f"{int(t):05d}" for t in args.templates.split(",")]
    for tid in ids:
        ckpt = args.checkpoints / f"{tid}.json"
        if ckpt.exists() and not args.force:
            prev = json.loads(ckpt.read_text())
            if prev.get("seed") == args.seed and len(prev["rows"]) >= args.target:
                # finished with whatever strategy it records; --force rebuilds with --strategy
                print(f"{tid}: checkpoint has {len(prev['rows'])} rows, skipping", flush=True)
                continue
        t0 = time.time()
        seen = [0]

        def progress(res, tid=tid, seen=seen):
            seen[0] += 1
            if seen[0] % 25 == 0:
                print(f"  {tid}: {seen[0]} candidates, last: {res.reason}", flush=True)

        result = build_template(tid, target=args.target, workers=args.workers, seed=args.seed, progress=progress,
                                strategy=args.strategy)
        result["seed"] = args.seed
        result["seconds"] = round(time.time() - t0, 1)
        atomic_write_json(ckpt, result)
        print(f"{tid}: {len(result['rows'])} variants in {result['seconds']} s; {result['stats']}", flush=True)

    if not args.no_merge:
        merged: dict[str, list] = {}
        build: dict[str, dict] = {}
        for ckpt in sorted(args.checkpoints.glob("*.json")):
            res = json.loads(ckpt.read_text())
            merged[res["template"]] = res["rows"]
            build[res["template"]] = {k: res.get(k, "random") if k == "strategy" else res[k]
                                      for k in ("stats", "candidates_total", "seconds", "seed", "strategy")}
        atomic_write_json(DATA, merged)
        atomic_write_json(DATA.with_name("variants_build.json"), {
            "rule": {
                "estimate_actions": ESTIMATE_ACTIONS, "max_solve_rate": MAX_SOLVE_RATE,
                "search_actions": SEARCH_ACTIONS, "target": args.target,
            },
            "templates": build,
        })
        short = {t: len(r) for t, r in merged.items() if len(r) < args.target}
        print(f"wrote {DATA} ({sum(len(r) for r in merged.values())} variants); short: {short or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
