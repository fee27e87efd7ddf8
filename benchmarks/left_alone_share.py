#!/usr/bin/env python
"""How often does an action change what the task program scores? Random actions against the
score of the world left alone.

    python benchmarks/left_alone_share.py [--templates 00000 00001 ...] [--draws 8] [--variants 0-49]

Per template, ``--draws`` uniformly random actions on each of ``--variants`` of
``simpatterns/PhyreOneBall-v1`` (1000 steps), scored by the template's task program
(`task_program_text`) through `RewardProgramWrapper(reward="gain")`, which reports the program's
score (``info["program_score"]``) and its score on the rollout left alone
(``info["left_alone_score"]``). Prints the range of the left-alone score over the variants and,
among valid failures, the share whose score equals it (the action left the goal pair as doing
nothing leaves it), is above it and is below it (the gain pays those 0); then the invalid actions
and the successes. Deterministic (numpy seed 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine_line
from rl import variant_list

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.envs import PHYRE_ONE_BALL_V1, RewardProgramWrapper
from simpatterns.envs.scenes import task_program_text
from simpatterns.simulators.phyre import load_scene

TOLERANCE = 1e-9  # a change this small is none (the two scores come from the same arithmetic)


def shares(template: str, variants: list[int], draws: int) -> dict[str, float]:
    env = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL_V1, tasks=[(template, v) for v in variants]),
                               task_program_text(load_scene(template, variants[0])), reward="gain")
    rng = np.random.default_rng(0)
    alone, changes, invalid, solved = [], [], 0, 0
    for v in variants:
        for _ in range(draws):
            env.reset(options={"template": template, "variant": v})
            *_, info = env.step(rng.uniform(-1, 1, 3).astype(np.float32))
            alone.append(info["left_alone_score"])
            if info["invalid_reason"]:
                invalid += 1
            elif info["is_success"]:
                solved += 1
            else:
                changes.append(info["program_score"] - info["left_alone_score"])
    env.close()
    g = np.array(changes)
    return {"alone_min": min(alone), "alone_max": max(alone), "failures": g.size,
            "same": float(np.mean(np.abs(g) <= TOLERANCE)), "above": float(np.mean(g > TOLERANCE)),
            "below": float(np.mean(g < -TOLERANCE)), "invalid": invalid, "solved": solved,
            "draws": draws * len(variants)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--templates", nargs="+", default=["00000", "00001", "00002", "00003", "00004", "00005"])
    p.add_argument("--draws", type=int, default=8, help="random actions per variant (default 8)")
    p.add_argument("--variants", type=variant_list, default=variant_list("0-49"))
    args = p.parse_args()
    print(machine_line())
    print("| template | left alone scores | valid failures | as left alone | above | below | invalid | solved |")
    print("|---|---|---|---|---|---|---|---|")
    for t in args.templates:
        s = shares(t, list(args.variants), args.draws)
        print(f"| {t} | {s['alone_min']:.2f}-{s['alone_max']:.2f} | {s['failures']} | {s['same']:.0%} | "
              f"{s['above']:.0%} | {s['below']:.0%} | {s['invalid']} of {s['draws']} | {s['solved']} |", flush=True)


if __name__ == "__main__":
    main()
