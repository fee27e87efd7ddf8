"""Offline discovery from deliberately mis-tuned seeds: which fitness leads back to the built-ins?

    python benchmarks/fitness_recovery.py [--traces 80] [--seed 3] [--budget 48] [--factors 3 0.333]
                                          [--labels LABEL ...] [--cache DIR]

For each built-in pattern of the discrimination benchmark that has named
threshold constants, the seed is the built-in detector with every named
module-level numeric constant multiplied by a factor (3 and 1/3 by default:
`discrimination.mistune`). An offline discovery job (`DiscoveryJob` with the
`OfflineProposer`, base library = the built-ins but the label and its
dependents, time penalty off so runs are deterministic) evolves it under
each fitness kind. The best program of each run is run on the traces and its
events are compared with the built-in detector's (event F1: same trace, same
bodies, within 2 frames). Prints the F1 of the seed and of each kind's best
program, per label and factor, and the means.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from fitness_discrimination import load_data

from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve import discrimination as D
from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.fitness import FITNESS_KINDS, FitnessConfig
from simpatterns.evolve.mutation import find_sites
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.proposers import OfflineProposer


def best_source(job: DiscoveryJob) -> str | None:
    for _, rec in job.log.records():
        if rec["type"] == "label_done" and rec.get("program"):
            return rec["program"]["source"]
    return None


def constants(source: str) -> str:
    return " ".join(f"{s.name}={s.text}" for s in find_sites(source) if s.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=80)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--budget", type=int, default=48, help="samples per label")
    ap.add_argument("--factors", type=float, nargs="+", default=[3.0, 1 / 3])
    ap.add_argument("--labels", nargs="*", default=None)
    ap.add_argument("--fitness", nargs="+", default=list(FITNESS_KINDS), choices=FITNESS_KINDS)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--verbose", action="store_true", help="print the constants each run ended with")
    args = ap.parse_args()
    traces, anns, _ = load_data(args.traces, args.seed, args.cache, cases=False)
    library = PatternLibrary.builtin()
    names = [t.names for t in traces]
    every = {p: D.events_of(anns, p) for p in library.order()}
    labels = args.labels or [p for p in library.order() if p not in D.RAW_PATTERNS
                             and sum(1 for e in every[p] if e) >= 5
                             and any(s.name for s in find_sites(library.get(p).source))]
    print(f"{len(traces)} traces; labels: {', '.join(labels)}; budget {args.budget} samples; "
          f"load average {os.getloadavg()[0]:.1f}")
    kinds = args.fitness
    print("\n| label | seed factor | seed F1 | " + " | ".join(f"{k} F1" for k in kinds) + " |")
    print("|---|---|---|" + "---|" * len(kinds))
    tmp = Path(tempfile.mkdtemp(prefix="fitness-recovery-"))
    f1s: dict[str, list[float]] = {k: [] for k in kinds}
    seeds: list[float] = []
    t0 = time.perf_counter()
    try:
        for label in labels:
            det = library.get(label)
            base = library.copy()
            base.remove(label)  # cascades to its dependents
            for factor in args.factors:
                src = D.mistune(det.source, factor)
                seed_path = tmp / f"{label.replace(' ', '_')}_{factor:g}.py"
                seed_path.write_text(src)
                seed_events = D.run_detector(src, traces, every)
                seed_f1 = D.event_f1(seed_events, every[label], names) if seed_events is not None else 0.0
                seeds.append(seed_f1)
                row = [label, f"x{factor:.3g}", f"{seed_f1:.2f}"]
                notes = []
                for kind in kinds:
                    spec = LabelSpec(label, det.description, depends=list(det.depends), params=list(det.params),
                                     seed=str(seed_path))
                    cfg = EvolveConfig(samples_per_label=args.budget, batch_size=8, workers=2, seed=0,
                                       fitness=FitnessConfig(kind=kind, w_time=0.0))
                    run_dir = tmp / f"run_{label.replace(' ', '_')}_{factor:g}_{kind}"
                    job = DiscoveryJob(traces, [spec], base, run_dir, run_dir / "lib", OfflineProposer(), cfg)
                    job.run()
                    best = best_source(job) or src
                    events = D.run_detector(best, traces, every)
                    f1 = D.event_f1(events, every[label], names) if events is not None else 0.0
                    f1s[kind].append(f1)
                    row.append(f"{f1:.2f}")
                    notes.append(f"{kind}: {constants(best)}")
                print("| " + " | ".join(row) + " |", flush=True)
                if args.verbose:
                    print("    built-in: " + constants(det.source) + "; " + "; ".join(notes))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| mean | | " + f"{np.mean(seeds):.2f} | " + " | ".join(f"{np.mean(f1s[k]):.2f}" for k in kinds) + " |")
    if len(kinds) == 2:
        a, b = (np.array(f1s[k]) for k in kinds)
        print(f"\n{kinds[0]} closer than {kinds[1]} in {int((a > b + 1e-9).sum())} of {a.size} runs, "
              f"farther in {int((a < b - 1e-9).sum())}, tied in {int((np.abs(a - b) <= 1e-9).sum())}")
    print(f"({time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
