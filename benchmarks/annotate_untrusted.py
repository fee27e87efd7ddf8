"""Cost of running untrusted (evolved) detectors in the sandbox during annotation.

    python benchmarks/annotate_untrusted.py [--traces 200] [--evolved 4]

The library: the built-in one plus ``--evolved`` built-in detectors copied under new
labels with provenance "evolved" (the same code, so only where it runs differs).
Timed on the same traces in the same run:

1. baseline: the library loaded with ``trust_evolved=True`` (everything in-process);
2. batched: the default (untrusted patterns in the sandbox, one job per pattern and
   batch of traces), via `annotate_many`;
3. per trace: `annotate` called trace by trace (one sandbox job per trace and
   untrusted pattern, the shared sandbox reused), what an env pays per episode;

and prints each as a ratio to the baseline, plus the sandbox's extra milliseconds
per (trace, untrusted pattern). Checks that all three produce the same events.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from simpatterns.annotate.annotator import annotate, annotate_many
from simpatterns.annotate.sandboxed import close_shared_sandbox
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import get_template, simulate
from machine import machine_line

COPIED = ("bounce", "airborne", "brief tap", "high energy impact", "stack formed", "global rest")


def make_traces(n: int, seed: int = 0) -> list:
    template = get_template("00000")
    params = list(template.valid_param_sets())
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        p = params[int(rng.integers(len(params)))]
        r = simulate(template.scene(p), tuple(float(x) for x in rng.uniform(0, 1, 3)), max_steps=300)
        if r.trace is not None:
            out.append(r.trace)
    return out


def evolved_library(k: int, where: Path) -> Path:
    lib = PatternLibrary.builtin()
    for label in COPIED[:k]:
        src = re.sub(r'^PATTERN = .*$', f'PATTERN = "{label} evolved"', lib.get(label).source, count=1, flags=re.M)
        lib.add(src, provenance="evolved")
    return lib.save(where)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--evolved", type=int, default=4)
    args = ap.parse_args()
    print(machine_line())
    traces = make_traces(args.traces)
    with tempfile.TemporaryDirectory() as tmp:
        path = evolved_library(min(args.evolved, len(COPIED)), Path(tmp) / "lib")
        trusted = PatternLibrary.load(path, trust_evolved=True)
        untrusted = PatternLibrary.load(path)
    n_u = len(untrusted.untrusted_labels())
    print(f"{len(traces)} traces, {len(untrusted)} patterns of which {n_u} untrusted")

    annotate_many(traces[:2], untrusted)  # start the shared sandbox outside the timings
    t = time.perf_counter()
    base = annotate_many(traces, trusted)
    t_base = time.perf_counter() - t
    t = time.perf_counter()
    batched = annotate_many(traces, untrusted)
    t_batched = time.perf_counter() - t
    t = time.perf_counter()
    single = [annotate(tr, untrusted, trace_id=f"#{i}") for i, tr in enumerate(traces)]
    t_single = time.perf_counter() - t
    close_shared_sandbox()

    for a, b, c in zip(base, batched, single):
        assert not a.errors and not b.errors and not c.errors, (a.errors, b.errors, c.errors)
        assert a.events == b.events == c.events
    pairs = len(traces) * n_u
    print(f"in-process (trust_evolved) : {t_base:7.2f} s   1.00x")
    print(f"sandbox, batched           : {t_batched:7.2f} s   {t_batched / t_base:.2f}x   "
          f"+{1000 * (t_batched - t_base) / pairs:.2f} ms per (trace, untrusted pattern)")
    print(f"sandbox, trace by trace    : {t_single:7.2f} s   {t_single / t_base:.2f}x   "
          f"+{1000 * (t_single - t_base) / pairs:.2f} ms per (trace, untrusted pattern)")
    print("events identical in all three: yes")


if __name__ == "__main__":
    main()
