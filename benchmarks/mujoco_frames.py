#!/usr/bin/env python
"""The cost of the forward pass an RK4 frame needs, against a step, per integrator.

    python benchmarks/mujoco_frames.py [--steps 1000] [--reps 5]

On gymnasium's ant, hopper and humanoid (their own seeded random controls, as the
frame tests use), for Euler and RK4, times in the same process: ``mj_step`` (a step's
cost) and ``mj_forward`` on the same states, timed call by call in one loop (the forward is
what an RK4 frame adds), then `TraceRecorder.advance` at stride 1 (steps plus recording,
assembly not included). Prints microseconds per step, best of ``--reps``: the extra forward is paid
only by RK4 and only once per recorded frame, so at stride s it adds forward / (s x step).
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium
import mujoco
import numpy as np

from machine import machine_line
from simpatterns.simulators.mujoco import TraceRecorder

MODELS = ("ant", "hopper", "humanoid")
ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def timings(m: mujoco.MjModel, controls: np.ndarray) -> tuple[float, float, float]:
    """Seconds per step of: mj_step, mj_forward on the same states, TraceRecorder.advance (stride 1)."""
    n = controls.shape[0]
    d = mujoco.MjData(m)
    clock = time.perf_counter
    step = forward = 0.0
    for k in range(n):
        d.ctrl[:] = controls[k]
        t0 = clock()
        mujoco.mj_forward(m, d)
        t1 = clock()
        mujoco.mj_step(m, d)
        t2 = clock()
        forward += t1 - t0
        step += t2 - t1
    d = mujoco.MjData(m)
    rec = TraceRecorder(m)
    t = clock()
    for k in range(n):
        d.ctrl[:] = controls[k]
        rec.advance(d)
    recorded = (clock() - t) / n
    return step / n, forward / n, recorded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(machine_line())
    print(f"{'model':10} {'integrator':10} {'mj_step':>9} {'mj_forward':>11} {'advance':>9} {'forward/step':>13}")
    for name in MODELS:
        for integrator in ("mjINT_EULER", "mjINT_RK4"):
            m = mujoco.MjModel.from_xml_path(os.path.join(ASSETS, f"{name}.xml"))
            m.opt.integrator = getattr(mujoco.mjtIntegrator, integrator)
            rng = np.random.default_rng(0)
            controls = rng.uniform(-1, 1, (args.steps, m.nu))
            best = np.min([timings(m, controls) for _ in range(args.reps)], axis=0) * 1e6
            print(f"{name:10} {integrator[6:]:10} {best[0]:8.1f}u {best[1]:10.1f}u {best[2]:8.1f}u "
                  f"{best[1] / best[0]:12.2f}x")


if __name__ == "__main__":
    main()
