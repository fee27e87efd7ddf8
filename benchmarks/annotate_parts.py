#!/usr/bin/env python
"""Where whole-library annotation spends its time, and annotation / simulation against other code.

    python benchmarks/annotate_parts.py [--reps 5] [--baseline SRC] [--rounds 3]

On the 25-template mix of ``builtin_library.py`` (one scene and one random valid action
each, 1000 steps with no early stop), in CPU seconds, best of ``--reps``:

1. ``annotate`` per trace, split into the detectors' own ``detect`` calls and the
   annotator around them; the annotator's parts timed alone on the same traces and
   events: the guarded view, the dependency copies, the event checks and sort, the
   `Annotation` built at the end, and the loop with its timers.
2. With ``--baseline SRC`` (a source tree of other code, e.g. ``git archive`` of an
   earlier commit unpacked), annotation / simulation of SRC and of this checkout, each in
   a fresh process, alternating ``--rounds`` times, so both see the same machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from machine import machine_line  # noqa: E402

CLOCK = time.process_time
HERE = Path(__file__).resolve().parent


def traces_and_ratio(reps: int) -> tuple[list, float, float]:
    """The mix's traces, and the best-of-reps CPU seconds per trace of simulating and annotating them
    (interleaved trace by trace)."""
    from builtin_library import mix

    from simpatterns.annotate.annotator import annotate
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.simulators.phyre import simulate

    lib = PatternLibrary.builtin()
    cases = mix()
    annotate(simulate(*cases[0], max_steps=50).trace, lib)  # imports and first calls
    sim = np.full((reps, len(cases)), np.inf)
    ann = np.full((reps, len(cases)), np.inf)
    traces = []
    for r in range(reps):
        for k, (scene, a) in enumerate(cases):
            t0 = CLOCK()
            trace = simulate(scene, a, max_steps=1000, stop_on_success=False).trace
            sim[r, k] = CLOCK() - t0
            t0 = CLOCK()
            annotate(trace, lib)
            ann[r, k] = CLOCK() - t0
            if r == 0:
                traces.append(trace)
    return traces, sim.min(axis=0).mean(), ann.min(axis=0).mean()


def best_of(fn, reps: int) -> float:
    best = np.inf
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        best = min(best, CLOCK() - t0)
    return best


def parts(traces: list, reps: int) -> None:
    from simpatterns.annotate.annotator import annotate, run_detector
    from simpatterns.annotate.phases import TraceState, guarded_view
    from simpatterns.detectors.contract import validate_events
    from simpatterns.detectors.library import PatternLibrary

    lib = PatternLibrary.builtin()
    dets = [lib.get(label) for label in lib.order()]
    n = len(traces)
    # each detector's own return value and the events it read, per trace
    raws, anns = [], []
    for trace in traces:
        guarded, events, raw = guarded_view(trace), {}, {}
        for det in dets:
            raw[det.pattern] = det.detect(guarded, {k: [(f, p.copy()) for f, p in events[k]] for k in det.depends})
            events[det.pattern] = run_detector(det, guarded, events)
        raws.append(raw)
        anns.append(annotate(trace, lib))
    gc.freeze()  # the traces and events kept here are not what a collection should scan

    detect_s = {"s": 0.0}
    originals = [d.detect for d in dets]

    def timed(fn):
        def detect(trace, events):
            t0 = CLOCK()
            out = fn(trace, events)
            detect_s["s"] += CLOCK() - t0
            return out
        return detect

    whole, inside = np.inf, np.inf
    try:
        for d, fn in zip(dets, originals):
            d.detect = timed(fn)
        for _ in range(reps):
            detect_s["s"] = 0.0
            t = best_of(lambda: [annotate(tr, lib) for tr in traces], 1)
            if whole == np.inf or t - detect_s["s"] < whole - inside:
                whole, inside = t, detect_s["s"]
    finally:
        for d, fn in zip(dets, originals):
            d.detect = fn

    def deps() -> None:
        for ann in anns:
            for d in dets:
                for label in d.depends:
                    [(f, p.copy()) for f, p in ann.pattern_events[label]]

    def checks() -> None:
        for trace, raw in zip(traces, raws):
            for d in dets:
                validate_events(raw[d.pattern], d.pattern, trace.num_frames,
                                interval=d.duration == "interval").sort(key=lambda e: e[0])

    def build() -> None:
        for trace, ann in zip(traces, anns):
            TraceState(trace, "", dict(ann.pattern_events), dict(ann.timings)).annotation(lib.order())

    def loop() -> None:
        for _ in traces:
            for d in dets:
                t0 = time.perf_counter()
                lib.get(d.pattern)
                _ = d.depends, time.perf_counter() - t0

    reads = best_of(lambda: [CLOCK() for _ in range(2 * len(dets) * n)], reps)  # what timing the calls adds
    around = whole - inside - reads
    print(f"annotate, whole library, {len(dets)} patterns: {(whole - reads) / n * 1e3:.3f} ms per trace (CPU); "
          f"detectors' own detect calls {inside / n * 1e3:.3f} ms ({inside / (whole - reads):.0%}), the annotator "
          f"around them {around / n * 1e3:.3f} ms ({around / (whole - reads):.0%}; this split's own clock reads, "
          f"{reads / n * 1e3:.3f} ms, taken off)")
    print("the annotator's parts, each timed alone (us per trace):")
    for name, fn in (("guarded view of the trace", lambda: [guarded_view(t) for t in traces]),
                     ("dependency events copied", deps), ("events checked and sorted", checks),
                     ("Annotation built", build), ("loop and timers", loop)):
        print(f"  {best_of(fn, reps) / n * 1e6:8.1f}  {name}")


CHILD = "--ratio-only"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a source tree timed beside this checkout, alternating")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(CHILD, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ratio_only:
        _, sim, ann = traces_and_ratio(args.reps)
        print(json.dumps({"simulate": sim, "annotate": ann}))
        return
    print(machine_line())
    traces, sim, ann = traces_and_ratio(args.reps)
    print(f"{len(traces)} traces x {traces[0].num_frames} frames: simulate {sim * 1e3:.2f} ms, annotate "
          f"{ann * 1e3:.2f} ms per trace (CPU); annotate / simulate {ann / sim:.3f}")
    parts(traces, args.reps)
    if args.baseline is None:
        return
    repo = HERE.parent
    runs: dict[str, list[float]] = {"baseline": [], "this checkout": []}
    for _ in range(args.rounds):
        for name, src in (("baseline", args.baseline.resolve()), ("this checkout", repo)):
            env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{HERE}")
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), CHILD, "--reps", "3"], env=env,
                                 capture_output=True, text=True, check=True, cwd=src)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(r["annotate"] / r["simulate"])
    print(f"\nannotate / simulate, fresh processes alternating, {args.rounds} rounds ({machine_line()}):")
    for name, ratios in runs.items():
        print(f"  {name:14s} " + ", ".join(f"{r:.3f}" for r in ratios) + f"  (mean {np.mean(ratios):.3f})")
    print(f"  this checkout / baseline: {np.mean(runs['this checkout']) / np.mean(runs['baseline']):.3f}")


if __name__ == "__main__":
    main()
