#!/usr/bin/env python
"""Rope world throughput: environment steps per second, and the cost of recording a trace.

    python benchmarks/rope.py [--steps 200] [--reps 3] [--image 128] [--per-step]

1. ``simpatterns/KnotRope-v0`` with RGB observations (the rope and the goal,
   rendered headless by MuJoCo) and the knot oracle on every step, on one
   core: the process is pinned to one CPU and Mesa's software renderer to one
   thread (``LP_NUM_THREADS=1``). KnotGym reports about 20 steps per second
   with rendering and its Gauss code; the target here is >= 60. Reported per
   CPU-second of this process (best of ``--reps``; CPU time, so other load on
   the shared machine distorts less) and per wall-second, with the split of a
   step into physics, rendering, knot oracle and recording.
2. Trace recording over bare ``mj_step`` on the same model and the same
   random pushes, assembly of the `Trace` included: every step recorded
   (stride 1), the environment's stride 8, and KnotGym's frame skip 24; target
   ratio <= 1.2. Each repetition times bare stepping next to each stride
   (CPU time); the median ratio over ``--reps`` is reported.
3. Per-step cost along a 50-step episode with a program reward
   (`RewardProgramWrapper`, state observations, so the annotation is a
   visible part of a step): CPU ms per step at steps 1-5 and 46-50 and their
   ratio (target <= 1.3), with the incremental annotation the wrapper uses
   and, interleaved in the same run, with the trace re-annotated whole every
   step; the same for the environment's own annotation of the whole 3D
   library (``annotate=True``, which also renders the annotation text an LLM
   reads: its timeline grows with the episode's events). Each step's figure is its best over
   ``--reps`` episodes of the same actions. ``--per-step`` runs only this part.

Prints the load average and the speed probe: the machine is shared, so
absolute numbers move.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "1")  # Mesa's llvmpipe: render on this core only

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import simpatterns.envs  # noqa: E402,F401
from machine import machine_line  # noqa: E402
from simpatterns.envs import RewardProgramWrapper  # noqa: E402
from simpatterns.envs.rope_env import KnotRopeEnv  # noqa: E402
from simpatterns.simulators.mujoco import RopeWorld, TraceRecorder, diagram, load_configurations  # noqa: E402


def pin_one_core() -> str:
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def env_rate(steps: int, reps: int, image: int) -> dict[str, float]:
    env = gym.make("simpatterns/KnotRope-v0", obs_mode="rgb", image_size=image, task="unknot", crossings=3)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    best_cpu, best_wall = float("inf"), float("inf")
    for _ in range(reps):
        env.reset(seed=0)
        c0, w0 = time.process_time(), time.perf_counter()
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return {"cpu": steps / best_cpu, "wall": steps / best_wall}


def step_split(steps: int, image: int) -> dict[str, float]:
    """Milliseconds of CPU per environment step in each part."""
    from simpatterns.simulators.mujoco import RopeRenderer

    world = RopeWorld()
    renderer = RopeRenderer(world, image, image)
    configs = load_configurations("train")
    world.set_positions(configs.positions[int(configs.with_crossings([3])[0])])
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (steps, 6))
    parts = {"physics": 0.0, "recording": 0.0, "render": 0.0, "knot oracle": 0.0}
    t = time.process_time()
    for a in acts:
        world.act(a)
    parts["physics"] = time.process_time() - t
    world.start_recording(8)
    t = time.process_time()
    for a in acts:
        world.act(a)
    parts["recording"] = time.process_time() - t - parts["physics"]
    t = time.process_time()
    for _ in range(steps):
        renderer.render()
    parts["render"] = time.process_time() - t
    t = time.process_time()
    for _ in range(steps):
        diagram(world.positions())
    parts["knot oracle"] = time.process_time() - t
    return {k: 1000 * v / steps for k, v in parts.items()}


def recording_ratio(steps: int, reps: int, strides: tuple[int, ...]) -> dict[int, float]:
    world = RopeWorld()
    m, d = world.model, world.data
    configs = load_configurations("train")
    start = configs.positions[int(configs.with_crossings([3])[0])]
    rng = np.random.default_rng(1)
    pushes = [(int(rng.integers(100)), rng.uniform(-0.2, 0.2, 3)) for _ in range(steps // 24 + 1)]

    def run(stride: int | None) -> float:
        world.set_positions(start)
        rec = None if stride is None else TraceRecorder(m, stride=stride, body_map=body_map)
        t0 = time.process_time()
        for k in range(steps):
            if k % 24 == 0:
                bead, force = pushes[k // 24]
                d.xfrc_applied[:] = 0.0
                d.xfrc_applied[world.bead_bodies[bead], :3] = force
            mujoco.mj_step(m, d)
            if rec is not None:
                rec.step(d)
        if rec is not None:
            rec.trace()
        return time.process_time() - t0

    from simpatterns.simulators.mujoco.model import describe_bodies

    body_map = describe_bodies(m)  # built once, as an environment does
    ratios: dict[int, list[float]] = {s: [] for s in strides}
    bare = []
    for _ in range(reps):  # paired: each repetition times bare stepping next to every stride
        t0 = run(None)
        bare.append(t0)
        for s in strides:
            ratios[s].append(run(s) / t0)
    return {s: float(np.median(r)) for s, r in ratios.items()} | {0: float(np.median(bare))}


PROGRAM = 'AND(COUNT("crossing removed") >= 2, NEVER("crossing formed"))'  # the guide's rope reward
EPISODE = 50  # KnotRope-v0's time limit
EARLY, LATE = slice(0, 5), slice(EPISODE - 5, EPISODE)


class WholeAnnotation:
    """Stands in for an `IncrementalAnnotator`: annotates the whole trace afresh (the baseline)."""

    def __init__(self, annotator):
        self.library = annotator.library

    def annotate(self, trace):
        from simpatterns.annotate import annotate

        return annotate(trace, self.library)

    def reset(self) -> None:
        pass


def episode_costs(kind: str, whole: bool, actions: np.ndarray) -> np.ndarray:
    """CPU seconds of each step of one episode (no time limit: all ``EPISODE`` steps)."""
    env = KnotRopeEnv(task="unknot", crossings=3, obs_mode="state", annotate=kind == "library")
    if kind == "program":
        env = RewardProgramWrapper(env, PROGRAM)
        if whole:
            env._annotator_made = WholeAnnotation(env._annotator)
    elif whole:
        env._annotator = WholeAnnotation(env.annotator)
    env.reset(seed=0)
    out = np.empty(len(actions))
    for k, a in enumerate(actions):
        t0 = time.process_time()
        env.step(a)
        out[k] = time.process_time() - t0
    return out


def per_step(reps: int) -> None:
    actions = np.random.default_rng(0).uniform(-1, 1, (EPISODE, 6)).astype(np.float32)
    kinds = (("program", f"program reward {PROGRAM}"),
             ("library", "annotate=True (whole 3D library, and the annotation text)"))
    for kind, what in kinds:
        best = {w: np.full(EPISODE, np.inf) for w in (False, True)}
        for _ in range(reps):  # interleaved: both see the same machine
            for w in best:
                best[w] = np.minimum(best[w], episode_costs(kind, w, actions))
        print(f"per step, {what}:")
        for w, name in ((False, "incremental"), (True, "re-annotated whole")):
            early, late = 1000 * best[w][EARLY].mean(), 1000 * best[w][LATE].mean()
            print(f"  {name:>18}: steps 1-5 {early:.1f} ms, steps 46-50 {late:.1f} ms, "
                  f"ratio {late / early:.2f}" + (" (target <= 1.3)" if kind == "program" and not w else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="environment steps per repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--image", type=int, default=128, help="image side (KnotGym: 128)")
    ap.add_argument("--per-step", action="store_true",
                    help="only the per-step cost at steps 1-5 and 46-50 with a program reward")
    args = ap.parse_args()
    where = pin_one_core()
    print(f"{machine_line()}; {where}; "
          f"MUJOCO_GL={os.environ['MUJOCO_GL']}, LP_NUM_THREADS={os.environ['LP_NUM_THREADS']}")
    per_step(max(args.reps, 5))
    if args.per_step:
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return
    rate = env_rate(args.steps, args.reps, args.image)
    print(f"KnotRope-v0, rgb {args.image}x{2 * args.image} + knot oracle: {rate['cpu']:.0f} steps per CPU-second, "
          f"{rate['wall']:.0f} per wall-second (KnotGym: about 20; target >= 60)")
    split = step_split(min(args.steps, 100), args.image)
    print("per step (CPU ms): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    ratios = recording_ratio(24 * 100, max(args.reps, 5), (1, 8, 24))
    bare = ratios.pop(0)
    print(f"bare mj_step: {24 * 100 / bare:.0f} physics steps per CPU-second")
    print("trace recording / bare mj_step: " + ", ".join(f"stride {s}: {r:.3f}" for s, r in ratios.items())
          + " (target <= 1.2)")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
