#!/usr/bin/env python
"""Annotation cost of the built-in pattern library against the simulation that made the trace.

    python benchmarks/builtin_library.py [--reps 3] [--steps 1000]

Over the 25-template mix (one scene and one random valid action each, every
run `--steps` steps with no early stop), measured in the same process:

- ``simulate``: `simulate` producing the full trace;
- ``annotate``: `annotate(trace, PatternLibrary.builtin())`, all patterns.

The two are interleaved trace by trace and timed in CPU seconds, so a busy
machine slows both alike. Prints the best-of-reps time per trace for both,
their ratio (target: well under 0.2), and the mean per-pattern time over the
mix, slowest first.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simpatterns.annotate.annotator import annotate
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate


def mix() -> list[tuple[object, np.ndarray]]:
    out = []
    for tid in TEMPLATES:
        t = get_template(tid)
        scene = t.variant_scene(0) if t.num_variants else t.scene(next(iter(t.valid_param_sets())))
        rng = np.random.default_rng(int(tid))
        while True:
            a = rng.random(3)
            if check_action(scene, a) is None:
                break
        out.append((scene, a))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    lib = PatternLibrary.builtin()
    cases = mix()
    clock = time.process_time  # CPU seconds: steadier than wall time on a shared machine
    sim = np.full((args.reps, len(cases)), np.inf)
    ann = np.full((args.reps, len(cases)), np.inf)
    per_pattern: dict[str, list[float]] = {label: [] for label in lib.order()}
    traces = []
    for r in range(args.reps):  # simulate and annotate interleaved, so both see the same machine load
        for k, (scene, a) in enumerate(cases):
            t0 = clock()
            trace = simulate(scene, a, max_steps=args.steps, stop_on_success=False).trace
            sim[r, k] = clock() - t0
            t0 = clock()
            annotation = annotate(trace, lib)
            ann[r, k] = clock() - t0
            assert not annotation.errors, annotation.errors
            for label, sec in annotation.timings.items():
                per_pattern[label].append(sec)
            if r == 0:
                traces.append((trace, len(annotation.events)))
    sim_t, ann_t = sim.min(axis=0), ann.min(axis=0)  # best of reps per case
    frames = np.mean([t.num_frames for t, _ in traces])
    bodies = np.mean([t.num_bodies for t, _ in traces])
    dynamic = np.mean([t.dynamic_mask.sum() for t, _ in traces])
    print(f"{len(cases)} traces, {frames:.0f} frames, {bodies:.1f} bodies ({dynamic:.1f} dynamic), "
          f"{np.mean([e for _, e in traces]):.0f} events per trace, {len(lib)} patterns")
    print(f"simulate  {sim_t.mean() * 1e3:7.2f} ms/trace (CPU)")
    print(f"annotate  {ann_t.mean() * 1e3:7.2f} ms/trace (CPU), {ann_t.mean() / len(lib) * 1e3:.3f} ms/pattern")
    print(f"ratio annotate/simulate: mean {ann_t.sum() / sim_t.sum():.3f}, median per trace "
          f"{np.median(ann_t / sim_t):.3f}  (target well under 0.2)")
    print("mean ms per pattern per trace (wall, from Annotation.timings):")
    for label, secs in sorted(per_pattern.items(), key=lambda kv: -np.mean(kv[1])):
        print(f"  {np.mean(secs) * 1e3:7.3f}  {label}")


if __name__ == "__main__":
    main()
