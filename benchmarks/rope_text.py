#!/usr/bin/env python
"""The rope environment's annotation text along an episode, against another `text.py`.

    python benchmarks/rope_text.py [--baseline FILE] [--reps 7]

One 50-step ``KnotRopeEnv(annotate=True)`` episode (state observations, fixed
random pushes) is played once; its traces and annotations after every step are
kept. Then `timeline_text` is timed on them in order, with the lines kept from
step to step (`TimelineLines`, as the environment makes its text): CPU ms per
step at steps 1-5 and 46-50, and the whole episode, best of ``--reps``. With
``--baseline FILE`` (another version of ``simpatterns/annotate/text.py``, e.g.
``git show HEAD~1:simpatterns/annotate/text.py > /tmp/text_before.py``) that
module is timed alternately on the same steps, its texts are checked equal, and
the ratios are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from machine import machine_line  # noqa: E402

import simpatterns.annotate.text as this_text  # noqa: E402
from simpatterns.envs.rope_env import KnotRopeEnv  # noqa: E402

EPISODE = 50  # KnotRope-v0's time limit


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("text_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def episode_steps() -> tuple[list[tuple[object, object]], int]:
    """(trace, annotation) after every step of one episode, and the env's text budget."""
    actions = np.random.default_rng(0).uniform(-1, 1, (EPISODE, 6)).astype(np.float32)
    env = KnotRopeEnv(task="unknot", crossings=3, obs_mode="state", annotate=True)
    env.reset(seed=0)
    steps = []
    for a in actions:
        *_, info = env.step(a)
        steps.append((env.last_trace, info["annotation"]))
    budget = int(env.render_options.text_budget)
    env.close()
    return steps, budget


def timed(module: ModuleType, steps: list, budget: int) -> tuple[np.ndarray, list[str]]:
    kept, cost, texts = module.TimelineLines(), np.empty(len(steps)), []
    for k, (trace, annotation) in enumerate(steps):
        t0 = time.process_time()
        texts.append(module.timeline_text(trace, annotation, budget, timeline=kept))
        cost[k] = time.process_time() - t0
    return cost, texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another text.py, timed alternately on the same steps")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    print(machine_line())
    steps, budget = episode_steps()
    modules = {"this checkout": this_text}
    if args.baseline is not None:
        modules = {"baseline": load(args.baseline), **modules}
    best = {name: np.full(len(steps), np.inf) for name in modules}
    for _ in range(args.reps):
        texts = {}
        for name, module in modules.items():
            cost, texts[name] = timed(module, steps, budget)
            best[name] = np.minimum(best[name], cost)
        if len(set(map(tuple, texts.values()))) != 1:
            print("the texts differ from the baseline's", file=sys.stderr)
            return 1
    print(f"timeline_text with kept lines, {EPISODE}-step rope episode (annotate=True), CPU ms, best of {args.reps}:")
    for name, b in best.items():
        ms = 1000 * b
        print(f"  {name:14s} steps 1-5 {ms[:5].mean():.2f}, steps 46-50 {ms[-5:].mean():.2f}, "
              f"episode {ms.sum():.1f}")
    if args.baseline is not None:
        a, b = 1000 * best["baseline"], 1000 * best["this checkout"]
        print(f"  this checkout / baseline: steps 46-50 {b[-5:].mean() / a[-5:].mean():.2f}, "
              f"episode {b.sum() / a.sum():.2f} (texts equal at every step)")
    print(machine_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
