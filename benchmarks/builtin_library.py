#!/usr/bin/env python
"""Annotation cost of the built-in pattern library against the simulation that made the trace.

    python benchmarks/builtin_library.py [--reps 3] [--steps 1000]

Over the 25-template mix (one scene and one random valid action each, every
run `--steps` steps with no early stop), measured in the same process:

- ``simulate``: `simulate` producing the full trace;
- ``annotate``: `annotate(trace, PatternLibrary.builtin())`, all patterns.

Prints the best-of-reps seconds per trace for both, their ratio (target: well
under 0.2), and the mean per-pattern time over the mix, slowest first.
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
    traces = [simulate(s, a, max_steps=args.steps, stop_on_success=False).trace for s, a in cases]
    best_sim = best_ann = float("inf")
    per_pattern: dict[str, list[float]] = {label: [] for label in lib.order()}
    events = 0
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for scene, a in cases:
            simulate(scene, a, max_steps=args.steps, stop_on_success=False)
        best_sim = min(best_sim, (time.perf_counter() - t0) / len(cases))
        t0 = time.perf_counter()
        anns = [annotate(tr, lib) for tr in traces]
        best_ann = min(best_ann, (time.perf_counter() - t0) / len(cases))
        for ann in anns:
            assert not ann.errors, ann.errors
            for label, sec in ann.timings.items():
                per_pattern[label].append(sec)
        events = sum(len(ann.events) for ann in anns) / len(anns)
    frames = np.mean([tr.num_frames for tr in traces])
    print(f"{len(cases)} traces, {frames:.0f} frames, {np.mean([tr.num_bodies for tr in traces]):.1f} bodies, "
          f"{events:.0f} events per trace, {len(lib)} patterns")
    print(f"simulate  {best_sim * 1e3:7.2f} ms/trace")
    print(f"annotate  {best_ann * 1e3:7.2f} ms/trace  ({best_ann / len(lib) * 1e3:.3f} ms/pattern)")
    print(f"ratio annotate/simulate = {best_ann / best_sim:.3f}  (target well under 0.2)")
    print("mean ms per pattern per trace:")
    for label, secs in sorted(per_pattern.items(), key=lambda kv: -np.mean(kv[1])):
        print(f"  {np.mean(secs) * 1e3:7.3f}  {label}")


if __name__ == "__main__":
    main()
