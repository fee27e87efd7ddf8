#!/usr/bin/env python
"""Does a batch path pay? One detector over many traces per call, against one call per trace.

    python benchmarks/batch_path.py [--per-template 8] [--reps 3]

Issue 18 proposed running a detector over many traces in one call, so that numpy's fixed
cost per call is paid once per batch. Before building that into the annotator, this
measures it on two built-in detectors, each rewritten here over a batch (their arrays
concatenated with per-trace offsets, the same algorithm): ``airborne`` (a free-run scan
over a [bodies, frames] grid) and ``touch start`` (a sort of every contact row). Both
batch versions must return exactly the per-trace events. Prints microseconds per trace
for batches of 1, 8, 32 and all traces, against the built-in detector called per trace,
interleaved, best of ``--reps``.

It also annotates the same scenes and actions simulated for 100, 300 and 1000 steps
with the whole built-in library: how much of annotation is a fixed cost per trace
(what a batch could share) and how much grows with the trace.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Callable

import numpy as np

from annotate import cases
from machine import machine_line
from simpatterns.annotate.annotator import annotate
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import simulate
from simpatterns.trace import Trace

# the built-in detectors' own thresholds, read from their modules (not copied here)
_BUILTIN = PatternLibrary.builtin()
AIRBORNE_SECONDS = _BUILTIN.get("airborne").detect.__globals__["MIN_SECONDS"]
MERGE_GAP = _BUILTIN.get("touch start").detect.__globals__["MERGE_GAP"]


def airborne_many(traces: list[Trace]) -> list[list]:
    dyns = [np.flatnonzero(t.dynamic_mask) for t in traces]
    counts = np.array([d.size for d in dyns])
    frames = np.array([t.num_frames for t in traces])
    rows, width = int(counts.sum()), int(frames.max()) + 2
    first_row = np.concatenate(([0], np.cumsum(counts)))
    free = np.zeros((rows + 1) * width, dtype=bool)  # a spare last row takes fixed bodies' contacts
    free[:rows * width].reshape(rows, width)[:, 1:] = np.arange(1, width) <= np.repeat(frames, counts)[:, None]
    at = []
    for k, t in enumerate(traces):
        slot = np.full(t.num_bodies, rows)
        slot[dyns[k]] = first_row[k] + np.arange(counts[k])
        at += [slot[t.contact_a] * width + t.contact_frame + 1, slot[t.contact_b] * width + t.contact_frame + 1]
    free[np.concatenate(at)] = False
    free = free[:rows * width]
    edge = np.flatnonzero(free[1:] != free[:-1])
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    owner = np.repeat(np.arange(len(traces)), counts)[row]
    shortest = np.array([max(1, round(AIRBORNE_SECONDS / t.dt)) for t in traces])
    long = np.flatnonzero(stop - start >= shortest[owner])
    body = np.concatenate(dyns)[row[long]]
    out: list[list] = [[] for _ in traces]
    for k, b, s, e in zip(owner[long].tolist(), body.tolist(), start[long].tolist(), stop[long].tolist()):
        out[k].append((s, {"object": traces[k].names[b], "frames": e - s}))
    return [sorted(o, key=lambda ev: ev[0]) for o in out]


def touch_start_many(traces: list[Trace]) -> list[list]:
    sizes = np.array([t.num_bodies ** 2 for t in traces])
    base = np.concatenate(([0], np.cumsum(sizes)))
    key = np.concatenate([base[k] + t.contact_a.astype(np.int64) * t.num_bodies + t.contact_b
                          for k, t in enumerate(traces)])
    frame = np.concatenate([t.contact_frame.astype(np.int64) for t in traces])
    out: list[list] = [[] for _ in traces]
    if not key.size:
        return out
    order = np.lexsort((frame, key))
    key, frame = key[order], frame[order]
    new = np.ones(key.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]) | (frame[1:] - frame[:-1] > MERGE_GAP + 1)
    first = np.flatnonzero(new)
    owner = np.searchsorted(base, key[first], side="right") - 1
    local = key[first] - base[owner]
    n = np.array([t.num_bodies for t in traces])[owner]
    for k, f, a, b in zip(owner.tolist(), frame[first].tolist(), (local // n).tolist(), (local % n).tolist()):
        names = traces[k].names
        out[k].append((f, {"object_a": names[a], "object_b": names[b]}))
    return [sorted(o, key=lambda ev: ev[0]) for o in out]


def per_call(fn: Callable, traces: list[Trace], size: int, reps: int) -> float:
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for k in range(0, len(traces), size):
            fn(traces[k:k + size])
        best = min(best, time.perf_counter() - t0)
    return best / len(traces) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-template", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    lib = _BUILTIN
    mix = cases(args.per_template, 0)
    traces = [simulate(scene, a).trace for _, scene, a in mix]
    print(f"{len(traces)} traces (mean {np.mean([t.num_frames for t in traces]):.0f} frames); {machine_line()}")
    for label, many in (("airborne", airborne_many), ("touch start", touch_start_many)):
        det = lib.get(label)
        single = [det.detect(t, {}) for t in traces]
        assert many(traces) == single, f"{label}: the batch version's events differ"
        print(f"\n{label} (batch events identical to per-trace on all {len(traces)} traces), us per trace:")
        for size in (1, 8, 32, len(traces)):
            batch = per_call(many, traces, size, args.reps)
            alone = per_call(lambda chunk: [det.detect(t, {}) for t in chunk], traces, size, args.reps)
            print(f"  batches of {size:3d}: batch {batch:6.1f}, per trace {alone:6.1f}, ratio {alone / batch:.2f}x")

    print("\nwhole library by trace length (same scenes and actions, no stop at success), ms per trace:")
    by_steps = {steps: [simulate(scene, a, max_steps=steps, stop_on_success=False).trace for _, scene, a in mix]
                for steps in (100, 300, 1000)}
    gc.freeze()  # the traces held here are not what annotation should pay collections for
    best = dict.fromkeys(by_steps, np.inf)
    for _ in range(args.reps):
        for steps, batch in by_steps.items():
            t0 = time.process_time()
            for t in batch:
                annotate(t, lib)
            best[steps] = min(best[steps], (time.process_time() - t0) / len(batch) * 1e3)
    print("  " + ", ".join(f"{steps} frames: {ms:.2f}" for steps, ms in best.items()))


if __name__ == "__main__":
    main()
