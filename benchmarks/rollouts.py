#!/usr/bin/env python
"""Rollout throughput and memory: full-trace recording vs bare pymunk stepping.

    python benchmarks/rollouts.py [--reps 3] [--phyre /path/to/py39-with-phyre/bin/python]
                                  [--baseline-physics FILE]

Over the 25-template mix (one scene and one random valid action each), every
run is 1000 steps (no early stop), measured in the same process and run:

- ``recorded``: `simulate` — the full Trace (state every step, contact rows,
  raw events), i.e. what users get;
- ``bare``: the same world stepped with pymunk's public ``Space.step`` loop and
  nothing recorded (what a user writing plain pymunk would run);
- ``raw``: the same world stepped through chipmunk's C step with no Python
  wrapper (the floor).

- ``before``: the recorder as it was before issue 32's speed-up, frozen under
  ``tests/simulators/phyre_recorder_reference.py`` (skipped where tests/ is absent);
- ``baseline`` (with ``--baseline-physics FILE``): the recorder of another commit, its
  ``physics.py`` loaded on its own beside this tree's other modules, e.g.
  ``git show dcd9a7e:simpatterns/simulators/phyre/physics.py > /tmp/physics_before.py``.

They are interleaved rollout by rollout, so they see the same machine
load; the load average and core count are printed. Reports rollouts/s on one core, the ratio
recorded/bare (target <= 1.25, issue 32), the same for the recorder before, and
peak memory per trace (tracemalloc peak during one rollout, and the trace's
array bytes). With ``--phyre`` it also times the reference PHYRE (Box2D)
simulating random actions with every step recorded, on its own tasks of the
same templates, in a subprocess.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from typing import Sequence

import numpy as np
from pymunk._chipmunk_cffi import lib as _lib

from simpatterns.simulators.phyre import TEMPLATES, Scene, check_action, get_template, simulate
from machine import machine_line
from simpatterns.simulators.phyre.physics import DAMP_EVERY, DT, MAX_STEPS, _World, damper, scene_specs


# Baselines: the simulator's own world, stepped without recording (they live here, not in
# the simulator, because only this benchmark needs them).
def step_bare(scene: Scene, action: Sequence[float], steps: int = MAX_STEPS) -> None:
    """Bare pymunk stepping of the same world (benchmark baseline): no recording."""
    specs = scene_specs(scene, action)
    world = _World(specs)
    damp = damper([world.bodies[i] for i in world.dynamic_index])
    step = world.space.step
    for k in range(1, steps + 1):
        step(DT)
        if k % DAMP_EVERY == 0:
            damp()


def step_raw(scene: Scene, action: Sequence[float], steps: int = MAX_STEPS) -> None:
    """The floor: the same world stepped by chipmunk's C step with no Python wrapper."""
    specs = scene_specs(scene, action)
    world = _World(specs)
    damp = damper([world.bodies[i] for i in world.dynamic_index])
    world.space.step(0.0)
    cp_step, sp = _lib.cpSpaceStep, world.space._space
    for k in range(1, steps + 1):
        cp_step(sp, DT)
        if k % DAMP_EVERY == 0:
            damp()


def reference_simulate():
    """The recorder before issue 32's speed-up (its frozen copy in tests/), or None."""
    tests = Path(__file__).resolve().parents[1] / "tests" / "simulators"
    if not (tests / "phyre_recorder_reference.py").exists():
        return None
    sys.path.insert(0, str(tests))
    import phyre_recorder_reference

    return phyre_recorder_reference.simulate


def baseline_simulate(path: str):
    """``simulate`` of the recorder in ``path`` (a physics.py), imported as a module of its own."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("physics_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.simulate


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 1e6


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


def timed(fns, cases, reps: int) -> list[float]:
    """Seconds per rollout over the whole mix for each of ``fns``, interleaved case by case
    (every function sees the same machine load), summing each case's best of ``reps``."""
    best = np.full((len(fns), len(cases)), np.inf)
    for _ in range(reps):
        for c, (scene, a) in enumerate(cases):
            for f, fn in enumerate(fns):
                t0 = time.perf_counter()
                fn(scene, a)
                best[f, c] = min(best[f, c], time.perf_counter() - t0)
    return (best.sum(axis=1) / len(cases)).tolist()


PHYRE_SCRIPT = r"""
import json, sys, time, numpy as np, phyre
train, dev, test = phyre.get_fold("ball_within_template", 0)
first = {}
for task in sorted(train + dev + test):
    first.setdefault(task.split(":")[0], task)
tasks = [first[k] for k in sorted(first)]
sim = phyre.initialize_simulator(tasks, "ball")
rng = np.random.default_rng(0)
actions = sim.build_discrete_action_space(max_actions=2000)
n = 0; t0 = time.perf_counter(); steps = 0
for i in range(len(tasks)):
    for k in range(4):
        while True:
            a = actions[rng.integers(len(actions))]
            res = sim.simulate_action(i, a, need_images=False, need_featurized_objects=True, stride=1)
            if res.status != phyre.SimulationStatus.INVALID_INPUT:
                break
        n += 1; steps += len(res.featurized_objects.features)
dt = time.perf_counter() - t0
print(json.dumps({"rollouts_per_s": n / dt, "mean_steps": steps / n}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--phyre", default=None, help="python of a venv with phyre==0.2.2 installed")
    ap.add_argument("--baseline-physics", default=None, help="physics.py of an earlier commit, timed beside this one")
    args = ap.parse_args()
    cases = mix()
    simulate(*cases[0])  # warm-up
    before_simulate = reference_simulate()
    fns = [lambda s, a: simulate(s, a, stop_on_success=False), lambda s, a: step_bare(s, a, MAX_STEPS),
           lambda s, a: step_raw(s, a, MAX_STEPS), lambda s, a: simulate(s, a)]
    if before_simulate is not None:
        fns.append(lambda s, a: before_simulate(s, a, stop_on_success=False))
    if args.baseline_physics:
        base_simulate = baseline_simulate(args.baseline_physics)
        fns.append(lambda s, a: base_simulate(s, a, stop_on_success=False))
    rec, bare, raw, early, *others = timed(fns, cases, args.reps)
    before = others[:1] if before_simulate is not None else []
    baseline = others[-1:] if args.baseline_physics else []

    peaks, nbytes = [], []
    for scene, a in cases:
        tracemalloc.start()
        tr = simulate(scene, a, stop_on_success=False).trace
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        nbytes.append(sum(getattr(tr, f).nbytes for f in (
            "time", "position", "angle", "velocity", "angular_velocity", "contact_frame", "contact_a",
            "contact_b", "contact_point", "contact_normal", "contact_impulse")))

    print(f"templates in mix: {len(cases)}  (1000 steps per rollout, best of {args.reps} per rollout, "
          f"interleaved); {machine_line()}")
    print(f"recorded (full Trace)  : {1 / rec:7.1f} rollouts/s  ({rec * 1e3:.2f} ms)")
    print(f"bare pymunk Space.step : {1 / bare:7.1f} rollouts/s  ({bare * 1e3:.2f} ms)")
    print(f"raw chipmunk C step    : {1 / raw:7.1f} rollouts/s  ({raw * 1e3:.2f} ms)")
    print(f"recorded / bare        : {rec / bare:.3f}   (target <= 1.25)")
    print(f"recorded / raw         : {rec / raw:.3f}")
    if before:
        print(f"before issue 32 / bare : {before[0] / bare:.3f}   (the frozen reference recorder, same run)")
        print(f"recorded / before      : {rec / before[0]:.3f}")
    if baseline:
        print(f"baseline / bare        : {baseline[0] / bare:.3f}   ({args.baseline_physics}, same run)")
        print(f"recorded / baseline    : {rec / baseline[0]:.3f}")
    print(f"recorded, stop at success (PHYRE default): {1 / early:.1f} rollouts/s")
    print(f"peak memory per trace  : {np.mean(peaks) / 1e6:.2f} MB mean, {np.max(peaks) / 1e6:.2f} MB max "
          f"(Python heap, tracemalloc; trace arrays {np.mean(nbytes) / 1e6:.2f} MB mean)")
    rss0 = rss_mb()
    for _ in range(4):
        for scene, a in cases:
            simulate(scene, a, stop_on_success=False)
    print(f"resident memory growth over {4 * len(cases)} more rollouts: {rss_mb() - rss0:+.1f} MB "
          "(C buffers included; ~0 means nothing leaks)")
    if args.phyre:
        out = subprocess.run([args.phyre, "-c", PHYRE_SCRIPT], capture_output=True, text=True, timeout=600)
        if out.returncode == 0:
            res = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"PHYRE 0.2.2 (Box2D), featurized every step: {res['rollouts_per_s']:.1f} rollouts/s "
                  f"(mean {res['mean_steps']:.0f} steps, stops at success)")
            print(f"simpatterns / PHYRE (stop at success both): {(1 / early) / res['rollouts_per_s']:.2f}x")
        else:
            print("PHYRE run failed:", out.stderr.strip().splitlines()[-1:] or out.returncode)


if __name__ == "__main__":
    main()
