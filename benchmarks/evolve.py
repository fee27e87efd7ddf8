"""Evolver overheads: sandbox per candidate, fitness per candidate, candidates per minute.

    python benchmarks/evolve.py [--traces 200] [--repeats 30] [--samples 48]

1. Sandbox overhead per candidate (target <= 20 ms): wall time of `Sandbox.evaluate`
   minus the time ``detect`` itself took (measured in the child), for a trivial
   detector and for the built-in ``bounce``, against running the same detector
   in-process (the baseline, measured in the same run). Between candidates the
   parent waits as long as scoring takes, so the pre-forked spare is ready, as in
   a job; the back-to-back figure (no pause) is printed too.
2. Fitness overhead on N traces (target <= 10 ms): `FitnessContext.score` for the
   built-in ``bounce`` events against a library of every other built-in pattern, for
   each fitness kind (evidence, the default, and paper); and the evidence kind's
   acceptance checks, which run once per label.
3. Throughput: an offline discovery job (mutations of ``bounce``) on N traces with
   2 sandbox workers: candidates evaluated per minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from simpatterns.annotate.annotator import annotate_many
from simpatterns.detectors.contract import Candidate, count_lines, load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.fitness import FitnessConfig, FitnessContext, events_hash
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.proposers import OfflineProposer
from simpatterns.sandbox.pool import Sandbox
from simpatterns.simulators.phyre import get_template, simulate

TRIVIAL = '''import numpy as np
PATTERN = "first frame"
DESCRIPTION = "the first frame of every trace"
DEPENDS = []
PARAMS = ["object"]

def detect(trace, events):
    return [(0, {"object": trace.names[0]})]
'''


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


def in_process_seconds(source: str, traces: list, deps: dict) -> float:
    det = load_detector(source)
    t0 = time.perf_counter()
    for i, t in enumerate(traces):
        det.detect(t, {d: list(deps[d][i]) for d in det.depends})
    return time.perf_counter() - t0


def sandbox_overhead(sb: Sandbox, candidate: Candidate, repeats: int, pause_s: float) -> tuple[float, float]:
    """(median wall ms, median overhead ms = wall - detect time in the child)."""
    walls, overheads = [], []
    for _ in range(repeats):
        if pause_s:
            time.sleep(pause_s)
        t0 = time.perf_counter()
        res = sb.evaluate(candidate)
        wall = time.perf_counter() - t0
        assert res.ok, res.reason
        walls.append(wall)
        overheads.append(wall - float(res.times.sum()))
    return 1000 * statistics.median(walls), 1000 * statistics.median(overheads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--samples", type=int, default=48, help="samples of the throughput job")
    args = ap.parse_args()

    t0 = time.perf_counter()
    traces = make_traces(args.traces)
    try:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (timings scale with it)")
    except OSError:
        pass
    print(f"{len(traces)} PHYRE traces (template 00000, 300 steps) simulated in {time.perf_counter() - t0:.1f} s")
    builtin = PatternLibrary.builtin()
    anns = annotate_many(traces, builtin)
    events = {k: [[(e.frame, e.params) for e in a.by_pattern(k)] for a in anns] for k in builtin.order()}
    times = {k: float(np.mean([a.timings[k] for a in anns])) for k in builtin.order()}
    bounce = builtin.get("bounce")

    print("\n1. sandbox overhead per candidate (target <= 20 ms)")
    with Sandbox(traces, workers=1) as sb:
        sb.set_dependency_events(events)
        print(f"   isolation: {sb.info}")
        for name, src in (("trivial", TRIVIAL), ("bounce", bounce.source)):
            base = statistics.median(in_process_seconds(src, traces, events) for _ in range(5)) * 1000
            candidate = Candidate.parse(src)
            wall, over = sandbox_overhead(sb, candidate, args.repeats, pause_s=0.03)
            wall_b2b, over_b2b = sandbox_overhead(sb, candidate, args.repeats, pause_s=0.0)
            print(f"   {name:8s} in-process {base:7.2f} ms | sandbox {wall:7.2f} ms, overhead {over:6.2f} ms "
                  f"(x{wall / max(base, 1e-9):.1f} of in-process) | back-to-back overhead {over_b2b:6.2f} ms")

    print(f"\n2. fitness overhead on {len(traces)} traces (target <= 10 ms), per fitness kind")
    lib_events = {k: v for k, v in events.items() if k != "bounce"}
    cand_steps = np.full(len(traces), 40)  # the time penalty reads Python steps (the sandbox counts them)
    lines = count_lines(bounce.source)
    digest = events_hash(events["bounce"])  # in a job the sandbox hands this over with the events
    detect_ms = 1000 * times["bounce"] * len(traces)
    for kind in ("evidence", "paper"):
        t0 = time.perf_counter()
        ctx = FitnessContext(traces, lib_events, None, FitnessConfig(kind=kind))
        setup = time.perf_counter() - t0
        ms = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ctx.score(events["bounce"], cand_steps, lines, digest)
            ms.append(1000 * (time.perf_counter() - t0))
        print(f"   {kind:8s} context (once per label: trace side and library) {setup:.2f} s; score: median "
              f"{statistics.median(ms):.2f} ms (bounce's own run time on these traces: {detect_ms:.1f} ms; "
              f"ratio {statistics.median(ms) / detect_ms:.2f})")
        if kind == "evidence":
            t0 = time.perf_counter()
            problems = ctx.acceptance_problems(events["bounce"])
            print(f"            acceptance checks (once per label): {1000 * (time.perf_counter() - t0):.0f} ms "
                  f"({'; '.join(problems) or 'none'})")
    hash_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        events_hash(events["bounce"])
        hash_ms.append(1000 * (time.perf_counter() - t0))
    print(f"   hashing the events in the parent instead of taking the sandbox's digest would add "
          f"{statistics.median(hash_ms):.2f} ms")

    print(f"\n3. throughput: offline job, {args.samples} samples of bounce mutations, 2 workers")
    tmp = Path(tempfile.mkdtemp(prefix="bench-evolve-"))
    try:
        seed = tmp / "bounce.py"
        seed.write_text(bounce.source)
        base = builtin.copy()
        base.remove("bounce")
        spec = LabelSpec("bounce", bounce.description, depends=["collision start"], params=bounce.params,
                         seed=str(seed))
        cfg = EvolveConfig(samples_per_label=args.samples, batch_size=8, workers=2, seed=0)
        job = DiscoveryJob(traces, [spec], base, tmp / "run", tmp / "lib", OfflineProposer(), cfg)
        t0 = time.perf_counter()
        job.run()
        total = time.perf_counter() - t0
        samples = [r for _, r in job.log.records() if r["type"] == "sample"]
        # the log holds no time (same seed, same log); the sandbox's CPU times are in timings.jsonl
        cpu = [json.loads(line)["cpu_s"] for line in job.log.timings_path.read_text().splitlines()]
        print(f"   job wall {total:.1f} s including setup (library annotation, trace distances, sandbox start)")
        print(f"   {len(samples)} candidates; their detect CPU time in the sandbox: median "
              f"{1000 * statistics.median(cpu):.0f} ms")
        print(f"   candidates per minute on 2 workers (whole job): {60 * len(samples) / total:.0f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
