#!/usr/bin/env python
"""Annotation cost of the built-in pattern library against the simulation that made the trace.

    python benchmarks/builtin_library.py [--reps 3] [--steps 1000] [--lengths] [--reference [DIR]]

Over the 25-template mix (one scene and one random valid action each, every
run `--steps` steps with no early stop), measured in the same process:

- ``simulate``: `simulate` producing the full trace;
- ``annotate``: `annotate(trace, PatternLibrary.builtin())`, all patterns.

The two are interleaved trace by trace and timed in CPU seconds, so a busy
machine slows both alike. Prints the best-of-reps time per trace for both,
their ratio (the issue's target: at most 0.2), then each pattern's CPU time
inside the annotation (detector, event checks and dependency copies; shared
per-trace caches such as `Trace.touching_matrix` are paid by the first
pattern that asks), slowest first.

``--lengths`` repeats the ratio for runs of 125 to 4000 steps and fits
``annotate = fixed + per_frame * T``: a library of numpy detectors has a
per-call floor (each numpy call costs microseconds whatever its size) that
short traces cannot amortise.

``--reference DIR`` (default ``tests/data/reference_detectors``, the frozen copies of
detectors as they were before a speed-up) also times each reference detector beside the
library's detector of the same pattern, with the same dependency events, interleaved,
checks that both emit the same events, and prints two speed-ups (reference CPU / library
CPU, best of reps per trace, summed over the traces): warm, the trace's shared caches
already filled, and cold, a fresh view per call.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from simpatterns.annotate.annotator import annotate, run_detector
from simpatterns.annotate.phases import guarded_view
from simpatterns.detectors.contract import Detector, load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate
from machine import machine_line

CLOCK = time.process_time  # CPU seconds: steadier than wall time on a shared machine
REFERENCE_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "reference_detectors"
CALLS = 5  # calls per timing: one detector call is tens of microseconds, near the clock's resolution


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


def pattern_cpu(trace, lib: PatternLibrary) -> dict[str, float]:
    """CPU seconds of each pattern, run as `annotate` runs it (dependency order, one guarded trace)."""
    guarded, events, out = guarded_view(trace), {}, {}
    for label in lib.order():
        t0 = CLOCK()
        events[label] = run_detector(lib.get(label), guarded, events)
        out[label] = CLOCK() - t0
    return out


def measure(lib: PatternLibrary, cases, steps: int, reps: int):
    """Best-of-reps CPU seconds per case: simulate, annotate, and per pattern; plus the traces."""
    sim = np.full((reps, len(cases)), np.inf)
    ann = np.full((reps, len(cases)), np.inf)
    per = {label: np.full((reps, len(cases)), np.inf) for label in lib.order()}
    traces = []
    for r in range(reps):  # simulate and annotate interleaved, so both see the same machine load
        for k, (scene, a) in enumerate(cases):
            t0 = CLOCK()
            trace = simulate(scene, a, max_steps=steps, stop_on_success=False).trace
            sim[r, k] = CLOCK() - t0
            t0 = CLOCK()
            annotation = annotate(trace, lib)
            ann[r, k] = CLOCK() - t0
            assert not annotation.errors, annotation.errors
            for label, sec in pattern_cpu(trace, lib).items():
                per[label][r, k] = sec
            if r == 0:
                traces.append((trace, len(annotation.events)))
    return sim.min(axis=0), ann.min(axis=0), {label: v.min(axis=0) for label, v in per.items()}, traces


def references(folder: Path, lib: PatternLibrary) -> list[Detector]:
    """The frozen detectors in ``folder`` whose pattern the library has."""
    dets = [load_detector(p.read_text(), p.name) for p in sorted(folder.glob("*.py"))]
    return [d for d in dets if d.pattern in lib.order()]


def compare(lib: PatternLibrary, refs: list[Detector], traces, reps: int) -> dict[str, np.ndarray]:
    """CPU seconds per trace of each reference and the library's detector of its pattern, as
    ``[reference, library] x [warm, cold]``: best of ``reps`` per trace, each timing ``CALLS``
    calls, the two alternating; their events must agree. Warm: the trace's shared caches (speeds,
    touching runs, contact keys) were filled by an earlier call, as when another detector asked
    first; cold: a fresh view per call, so the detector pays for every cache it reads."""
    best = {d.pattern: np.full((2, 2, len(traces)), np.inf) for d in refs}
    for k, trace in enumerate(traces):
        annotation = annotate(trace, lib)
        for ref in refs:
            new = lib.get(ref.pattern)
            deps = {label: [(e.frame, dict(e.params)) for e in annotation.by_pattern(label)] for label in new.depends}
            want = run_detector(ref, guarded_view(trace), deps)
            assert json.dumps(run_detector(new, guarded_view(trace), deps)) == json.dumps(want), (ref.pattern, k)
            for _ in range(reps):
                for side, det in enumerate((ref, new)):
                    warm = guarded_view(trace)
                    run_detector(det, warm, deps)
                    for mode, views in enumerate(([warm] * CALLS, [guarded_view(trace) for _ in range(CALLS)])):
                        t0 = CLOCK()
                        for view in views:
                            run_detector(det, view, deps)
                        best[ref.pattern][side, mode, k] = min(best[ref.pattern][side, mode, k],
                                                               (CLOCK() - t0) / CALLS)
    return {label: b.mean(axis=2) for label, b in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lengths", action="store_true", help="also measure runs of 125 to 4000 steps")
    parser.add_argument("--reference", nargs="?", const=REFERENCE_DIR, type=Path, default=None, metavar="DIR",
                        help=f"also time the frozen detectors in DIR against the library's (default {REFERENCE_DIR})")
    args = parser.parse_args()
    print(machine_line())
    lib = PatternLibrary.builtin()
    cases = mix()
    annotate(simulate(*cases[0], max_steps=50).trace, lib)  # warm imports and caches
    sim_t, ann_t, per, traces = measure(lib, cases, args.steps, args.reps)
    frames = np.mean([t.num_frames for t, _ in traces])
    bodies = np.mean([t.num_bodies for t, _ in traces])
    dynamic = np.mean([t.dynamic_mask.sum() for t, _ in traces])
    print(f"{len(cases)} traces, {frames:.0f} frames, {bodies:.1f} bodies ({dynamic:.1f} dynamic), "
          f"{np.mean([e for _, e in traces]):.0f} events per trace, {len(lib)} patterns")
    print(f"simulate  {sim_t.mean() * 1e3:7.2f} ms/trace (CPU)")
    print(f"annotate  {ann_t.mean() * 1e3:7.2f} ms/trace (CPU), {ann_t.mean() / len(lib) * 1e3:.3f} ms/pattern")
    ratio = ann_t.sum() / sim_t.sum()
    print(f"ratio annotate/simulate: mean {ratio:.3f}, median per trace {np.median(ann_t / sim_t):.3f}  "
          f"(target <= 0.4: {'met' if ratio <= 0.4 else 'NOT met'})")
    patterns = sum(v.mean() for v in per.values())
    print(f"CPU ms per pattern per trace (sum {patterns * 1e3:.2f}, measured in a second pass over the same "
          f"trace; benchmarks/annotate.py measures the annotator's own cost):")
    for label, sec in sorted(per.items(), key=lambda kv: -kv[1].mean()):
        print(f"  {sec.mean() * 1e3:7.3f}  {sec.mean() / sim_t.mean():6.3f} x sim  {label}")
    if args.reference:
        refs = references(args.reference, lib)
        print(f"\nspeed-up against the frozen references in {args.reference} (CPU ms per trace, best of "
              f"{args.reps}, {CALLS} calls each, interleaved; events checked equal on every trace):")
        print("  warm: the trace's shared caches already filled (another detector asked first); cold: this")
        print("  detector pays for every cache it reads")
        print(f"  {'reference':>9}  {'library':>9}  {'warm':>6}  {'cold':>6}  pattern")
        for label, t in sorted(compare(lib, refs, [t for t, _ in traces], args.reps).items(),
                               key=lambda kv: -kv[1][0, 0]):
            print(f"  {t[0, 0] * 1e3:9.3f}  {t[1, 0] * 1e3:9.3f}  {t[0, 0] / t[1, 0]:5.2f}x  {t[0, 1] / t[1, 1]:5.2f}x  "
                  f"{label}")
    if args.lengths:
        print("\nratio against trace length (fit: annotate = fixed + per_frame * T):")
        rows = []
        for steps in (125, 250, 500, 1000, 2000, 4000):
            s, a, _, tr = measure(lib, cases, steps, args.reps)
            T = np.mean([t.num_frames for t, _ in tr])
            rows.append((T, s.mean(), a.mean()))
            print(f"  {T:5.0f} frames: simulate {s.mean() * 1e3:7.2f} ms, annotate {a.mean() * 1e3:6.2f} ms, "
                  f"ratio {a.sum() / s.sum():.3f}")
        T, s, a = np.array(rows).T
        per_frame, fixed = np.polyfit(T, a, 1)
        print(f"  annotate ~ {fixed * 1e3:.2f} ms + {per_frame * 1e6:.2f} us/frame; "
              f"simulate ~ {np.polyfit(T, s, 1)[0] * 1e6:.2f} us/frame")


if __name__ == "__main__":
    main()
