"""Does the fitness tell a correct detector from a wrong one? (issue 19)

    python benchmarks/fitness_discrimination.py [--traces 80] [--seed 3] [--fitness evidence paper]
                                                [--per-pattern] [--cache DIR]

For every built-in pattern that fires on at least 5 of the traces (PHYRE
template 00000, 300 steps, `make_traces(80, seed=3)` of the test fixtures),
the correct events are scored against families of wrong detectors (random,
random times, shifted, wrong bodies, mis-tuned by the offline proposer's
threshold operator, copies of library patterns) with base libraries of three
sizes (raw events only, half, all but the pattern and its dependents); see
`simpatterns.evolve.discrimination`. Prints, per fitness kind, the markdown
table of docs/design/evolve.md: AUC per family and size (worst pattern's AUC in
brackets), the correct detector's median rank, and acceptance rates at the
kind's default theta. ``--cache DIR`` keeps the simulated traces, their
annotations and the wrong detectors between runs (never commit it).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

from simpatterns.annotate import distances as dist
from simpatterns.annotate.annotator import annotate_many
from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve import discrimination as D
from simpatterns.evolve.evidence import TraceSalience
from simpatterns.evolve.fitness import FITNESS_KINDS, FitnessConfig, FitnessContext
from simpatterns.files import atomic_open
from simpatterns.simulators.phyre import get_template, simulate


def make_traces(n: int, seed: int, steps: int = 300) -> list:
    """The test fixtures' traces (tests/evolve/evolve_fixtures.py): template 00000, random actions."""
    template = get_template("00000")
    params = list(template.valid_param_sets())
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        p = params[int(rng.integers(len(params)))]
        rollout = simulate(template.scene(p), tuple(float(x) for x in rng.uniform(0, 1, 3)), max_steps=steps)
        if rollout.trace is not None:
            out.append(rollout.trace)
    return out


def load_data(n: int, seed: int, cache: str | None, cases: bool = True):
    """(traces, annotations by the built-in library, discrimination cases), cached as a pickle."""
    path = Path(cache) / f"discrimination_{n}_{seed}.pkl" if cache else None
    if path is not None and path.is_file():
        with open(path, "rb") as fh:
            return pickle.load(fh)
    library = PatternLibrary.builtin()
    traces = make_traces(n, seed)
    anns = annotate_many(traces, library)
    data = (traces, anns, D.build_cases(traces, anns, library) if cases else None)
    if path is not None:
        with atomic_open(path, "wb", encoding=None) as fh:
            pickle.dump(data, fh)
    return data


def run(kind: str, traces: list, anns: list, cases: list, library: PatternLibrary, shared: dict) -> list:
    cfg = FitnessConfig(kind=kind)
    return D.evaluate(cases, anns, library, lambda ev, tm: FitnessContext(
        traces, ev, tm, cfg, trace_distances=shared.get("D_T"), salience=shared.get("salience")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=80)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--fitness", nargs="+", default=list(FITNESS_KINDS), choices=FITNESS_KINDS)
    ap.add_argument("--per-pattern", action="store_true", help="also print per-pattern AUCs per size")
    ap.add_argument("--cache", default=None, help="directory for traces, annotations and wrong detectors")
    args = ap.parse_args()
    t0 = time.perf_counter()
    traces, anns, cases = load_data(args.traces, args.seed, args.cache)
    library = PatternLibrary.builtin()
    print(f"{len(traces)} traces, {len(cases)} patterns firing on >= 5 traces; data in {time.perf_counter() - t0:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    families = {}
    for c in cases:
        for d in c.wrong:
            families[d.family] = families.get(d.family, 0) + 1
    print("wrong detectors (library-independent families): " + ", ".join(f"{k} {v}" for k, v in families.items()))
    shared = {}
    for kind in args.fitness:
        t0 = time.perf_counter()
        if kind == "paper" and "D_T" not in shared:
            shared["D_T"] = dist.trace_distance_matrix(traces, args.cache)
        if kind == "evidence" and "salience" not in shared:
            shared["salience"] = TraceSalience(traces)
        results = run(kind, traces, anns, cases, library, shared)
        theta = FitnessConfig(kind=kind).resolved().theta
        print(f"\n{D.markdown_table(results, f'--fitness {kind} (theta {theta:g})')}")
        print(f"\naccepted at theta {theta:g}:\n{D.acceptance_table(results)}")
        print(f"({time.perf_counter() - t0:.1f} s)")
        if args.per_pattern:
            for size in D.SIZES:
                print(f"\n{kind}, base library {size}:\n{D.per_pattern_table(results, size)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
