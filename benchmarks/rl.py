#!/usr/bin/env python
"""A learning benchmark: Stable-Baselines3 agents on PHYRE's one-ball tasks, sparse and program rewards.

    python benchmarks/rl.py                                   # full size (PPO 10k, SAC 5k steps, 3 seeds)
    python benchmarks/rl.py --algos PPO --templates 00000 00002 --seeds 1 --steps 2000   # a reduced run
    python benchmarks/rl.py --report-only                     # table + plot from the saved runs
    for k in 0 1 2 3; do python benchmarks/rl.py --shard $k/4 & done; wait   # four processes

Each run trains one algorithm on one template's train variants (default 0-49)
of ``simpatterns/PhyreOneBall-v1`` (objects observation, one-step episodes)
with one reward kind, and is evaluated on the held-out variants (default
50-99): the deterministic policy's action on each held-out variant, scored by
PHYRE's own success (``info["task_success"]``). The held-out success rate is
measured every ``--eval-every`` steps (the learning curve) and at the end.

Reward kinds:

- ``sparse``: the environment's own reward, 1 on PHYRE's success, else 0;
- ``dense``: the dense score of the template's task program
  (`simpatterns.envs.scenes.task_program_text`: TOUCHING(goal pair, hold=0.18));
- ``tiebreak`` (only when named in ``--rewards``): success first, the dense score as a tie-breaker among
  failures: 1 on the program's success, else `TIEBREAK_WEIGHT` x the
  ``dense`` score (PPO normalises advantages per batch, so in a batch without
  a success the dense score alone orders the actions, and in one with a
  success the success dominates);
- ``gain``: 1 on the program's success, else how far the
  ``dense`` score rose above the same program's score on the task's rollout
  left alone, and 0 where it did not (`RewardProgramWrapper(reward="gain")`):
  most valid actions leave the goal pair as it was and score what doing
  nothing scores, which differs by variant;
- ``words``: a program for the goal in words. With ``--words-dir D`` the file
  ``D/<template>.rwd`` (e.g. compiled by ``simpatterns reward compile``) is
  used; otherwise, since compiling needs an LLM, the shipped example
  ``examples/goals/phyre_touch_for_3s.rwd`` ("make the green ball touch the
  blue ball for 3 seconds") with the template's goal pair substituted for its
  two body names: a fixed template substitution, not a compiled program. That
  program is the task program's clause inside ``AND``, so it pays the same
  reward as ``dense``.

A reference row, ``random actions``, is the held-out success of uniform
random actions (``--random-draws`` per variant).

Written under ``--out`` (default ``rl-benchmark``): ``runs/<algo>-<template>-<reward>-s<seed>.json``
per finished run (its configuration, curve, final figures; atomic), ``random-<template>.json``,
``results.csv`` (one row per run), ``curves.csv`` (one row per run and evaluation),
``table.md`` (mean ± sample std over seeds) and ``curves.png``. A run whose file exists is
skipped (resume); one saved with another configuration is refused in one line. Ctrl-C stops
within a rollout or a gradient step, keeps the finished runs and says how to resume; the
unfinished run restarts.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # machine.py, when imported from elsewhere
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine_line

import simpatterns
import simpatterns.envs  # registers the ids
from simpatterns.dsl.synthesize import load_goal_examples
from simpatterns.envs import PHYRE_ONE_BALL_V1, RewardProgramWrapper
from simpatterns.envs.scenes import task_program_text
from simpatterns.files import atomic_write, atomic_write_json
from simpatterns.simulators.phyre import MAX_STEPS, SOLVE_STEPS, TEMPLATES, load_scene

ALGOS = ("PPO", "SAC")
REWARDS = ("sparse", "dense", "tiebreak", "gain", "words")
DEFAULT_REWARDS = ("sparse", "dense", "gain", "words")  # tiebreak: a second try, asked for by name
TIEBREAK_WEIGHT = 0.1
TIEBREAK_HEADER = "# tiebreak: 1 on success, else {} x the score"  # saved with each run's program
GAIN_HEADER = "# gain: 1 on success, else the score's rise above the score of the world left alone, or 0"
DEFAULT_STEPS = {"PPO": 10_000, "SAC": 5_000}  # the measurement
# random actions solve 2-2.7% of these templates' variants (150 draws each), so the
# sparse reward is seen at all within a few thousand steps
DEFAULT_TEMPLATES = ("00000", "00001", "00002", "00004")
WORDS_EXAMPLE = Path(simpatterns.__file__).parent / "examples" / "goals" / "phyre_touch_for_3s.rwd"
WORDS_PAIR = ("green ball", "blue ball")  # the example's goal pair, replaced by the template's
FORMAT = 1


class BenchmarkError(Exception):
    """Bad input or a saved run that does not match: one line for stderr."""


def variant_list(text: str) -> tuple[int, ...]:
    """``"0-49"``, ``"0,3,7-9"`` -> variant numbers."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"variants must look like 0-49 or 0,3,7-9, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"no variants in {text!r}")
    return tuple(out)


def shard(text: str) -> tuple[int, int]:
    """``"2/8"`` -> (2, 8)."""
    k, _, n = text.partition("/")
    try:
        pair = int(k), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard must look like K/N, e.g. 0/4, got {text!r}") from None
    if not 0 <= pair[0] < pair[1]:
        raise argparse.ArgumentTypeError(f"--shard {text}: K must be in 0..N-1")
    return pair


@dataclass(frozen=True)
class RunSpec:
    algo: str
    template: str
    reward: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.algo}-{self.template}-{self.reward}-s{self.seed}"


@dataclass(frozen=True)
class RunConfig:
    """Everything a saved run's figures depend on (a resumed run must match it)."""
    steps: int
    train: tuple[int, ...]
    held_out: tuple[int, ...]
    n_envs: int
    eval_every: int
    max_steps: int
    settle: bool
    hyper: dict[str, Any]
    program: str | None
    invalid: str | None = None  # how the program scores an invalid action (None: no program)


def reward_program(template: str, reward: str, max_steps: int, words_dir: Path | None,
                   variant: int) -> tuple[str | None, str]:
    """(program text or None for the env's own reward, where it came from)."""
    if reward == "sparse":
        return None, "environment reward: PHYRE success (0/1)"
    scene = load_scene(template, variant)
    if reward == "dense":
        return task_program_text(scene, max_steps), "simpatterns.envs.scenes.task_program_text"
    if reward == "tiebreak":  # the header line is saved with the run, so it names the weight
        return (f"{TIEBREAK_HEADER.format(TIEBREAK_WEIGHT)}\n{task_program_text(scene, max_steps)}",
                f"1 on success, else {TIEBREAK_WEIGHT} x simpatterns.envs.scenes.task_program_text")
    if reward == "gain":
        return (f"{GAIN_HEADER}\n{task_program_text(scene, max_steps)}",
                "1 on success, else the rise of simpatterns.envs.scenes.task_program_text's score above "
                "its score left alone, at least 0")
    if words_dir is not None:
        path = words_dir / f"{template}.rwd"
        if not path.is_file():
            raise BenchmarkError(f"--words-dir {words_dir}: no {path.name} for template {template}")
        return path.read_text(encoding="utf-8"), f"compiled from words: {path}"
    example = next((e for e in load_goal_examples(WORDS_EXAMPLE.parent) if Path(e.source).name == WORDS_EXAMPLE.name),
                   None)
    if example is None:
        raise BenchmarkError(f"{WORDS_EXAMPLE}: the goal-in-words example is missing or does not check")
    a, b = scene.goal_names
    goal = example.goal.replace(WORDS_PAIR[0], a).replace(WORDS_PAIR[1], b)
    program = (example.program.replace(f'"{WORDS_PAIR[0]}"', f'"{a}"').replace(f'"{WORDS_PAIR[1]}"', f'"{b}"')
               .replace("hold=0.18", f"hold={SOLVE_STEPS / max_steps:.6g}"))
    header = f"# {goal!r}: {WORDS_EXAMPLE.name} with the goal pair substituted (fixed template, no LLM)\n"
    return header + program + "\n", f"template substitution of {WORDS_EXAMPLE.name} (no LLM)"


class SuccessFirst(gym.Wrapper):
    """One-step episodes: 1 on the program's success, else ``weight`` x the program's reward."""

    def __init__(self, env: gym.Env, weight: float):
        super().__init__(env)
        self.weight = weight

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, 1.0 if info["is_success"] else self.weight * float(reward), terminated, truncated, info


def make_env(template: str, variants: Sequence[int], max_objects: int, max_steps: int, settle: bool,
             program: str | None = None, invalid: str = "left-alone", tiebreak: float | None = None,
             gain: bool = False) -> gym.Env:
    """The env, paying ``program``'s reward if given; with ``tiebreak``, 1 on success, else that x
    it; with ``gain``, 1 on success, else its rise above the world left alone, at least 0."""
    env = gym.make(PHYRE_ONE_BALL_V1, tasks=[(template, v) for v in variants], obs_mode="objects",
                   max_objects=max_objects, max_steps=max_steps, stop_when_settled=settle)
    if program is None:
        return env
    env = RewardProgramWrapper(env, program, reward="gain" if gain else "score", invalid=invalid)
    return env if tiebreak is None else SuccessFirst(env, tiebreak)


def rows_needed(template: str, variants: Sequence[int]) -> int:
    """Observation rows for train and held-out variants alike (one policy sees both)."""
    env = gym.make(PHYRE_ONE_BALL_V1, tasks=[(template, v) for v in variants], obs_mode="objects")
    rows = int(env.observation_space.shape[0])
    env.close()
    return rows


def held_out_success(policy: Callable[[np.ndarray], np.ndarray], env: gym.Env, template: str,
                     variants: Sequence[int]) -> tuple[float, float]:
    """(PHYRE success rate, invalid-action rate) of one action per held-out variant."""
    solved = invalid = 0
    for v in variants:
        obs, _ = env.reset(options={"template": template, "variant": int(v)})
        *_, info = env.step(policy(obs))
        solved += bool(info["task_success"])
        invalid += bool(info["invalid_reason"])
    return solved / len(variants), invalid / len(variants)


def build_model(algo: str, venv: Any, seed: int, hyper: dict[str, Any]) -> Any:
    from stable_baselines3 import PPO, SAC
    cls = {"PPO": PPO, "SAC": SAC}[algo]
    return cls("MlpPolicy", venv, seed=seed, device="cpu", verbose=0, **hyper)


def hyperparameters(algo: str, steps: int, n_envs: int, ppo_n_steps: int) -> dict[str, Any]:
    """SB3 defaults, except a PPO rollout short enough for several updates in a few thousand
    one-step episodes, and SAC starting to learn within the first tenth of a short run."""
    if algo == "PPO":
        n_steps = max(2, min(ppo_n_steps, steps // n_envs))
        return {"n_steps": n_steps, "batch_size": min(64, n_steps * n_envs)}
    return {"learning_starts": min(100, steps // 10)}


def train_run(spec: RunSpec, config: RunConfig, max_objects: int, progress: Callable[[str], None]) -> dict[str, Any]:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    # Monitor goes outside the reward wrapper (make_vec_env wraps what make_env returns),
    # so the episode returns it logs are the reward the agent learns from
    tiebreak = TIEBREAK_WEIGHT if spec.reward == "tiebreak" else None
    venv = make_vec_env(lambda: make_env(spec.template, config.train, max_objects, config.max_steps, config.settle,
                                         config.program, config.invalid or "left-alone", tiebreak,
                                         gain=spec.reward == "gain"),
                        n_envs=config.n_envs, seed=spec.seed)
    eval_env = make_env(spec.template, config.held_out, max_objects, config.max_steps, settle=False)
    model = build_model(spec.algo, venv, spec.seed, config.hyper)
    curve: list[dict[str, float]] = []
    t0 = time.perf_counter()

    def point(step: int) -> None:
        success, invalid = held_out_success(lambda o: model.predict(o, deterministic=True)[0], eval_env,
                                            spec.template, config.held_out)
        curve.append({"step": step, "held_out_success": success, "invalid": invalid})
        progress(f"step {step}/{config.steps}: held-out success {success:.2f}, invalid {invalid:.2f} "
                 f"({time.perf_counter() - t0:.0f} s)")

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = config.eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                point(self.num_timesteps)
                # several envs step together: the next point is the next multiple past this step
                self.next = (self.num_timesteps // config.eval_every + 1) * config.eval_every
            return True

    try:
        point(0)
        model.learn(total_timesteps=config.steps, callback=Curve())
        if curve[-1]["step"] < model.num_timesteps:
            point(model.num_timesteps)
    finally:
        venv.close()
        eval_env.close()
    return {"format": FORMAT, "run": asdict(spec), "config": asdict(config), "curve": curve,
            "final_success": curve[-1]["held_out_success"], "final_invalid": curve[-1]["invalid"],
            "steps_done": int(model.num_timesteps), "seconds": round(time.perf_counter() - t0, 1),
            "machine": machine_line()}


def random_baseline(template: str, held_out: Sequence[int], max_objects: int, max_steps: int, draws: int,
                    seed: int = 0) -> dict[str, Any]:
    env = make_env(template, held_out, max_objects, max_steps, settle=False)
    rng = np.random.default_rng(seed)
    rates = [held_out_success(lambda o: rng.uniform(-1, 1, 3).astype(np.float32), env, template, held_out)[0]
             for _ in range(draws)]
    env.close()
    return {"format": FORMAT, "template": template, "held_out": list(held_out), "max_steps": max_steps,
            "draws": draws, "seed": seed, "success": float(np.mean(rates)), "per_draw": rates}


def load_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"{path}: unreadable saved run ({exc}); delete it to run again") from None


def check_saved(path: Path, saved: dict[str, Any], config: RunConfig) -> None:
    want = json.loads(json.dumps(asdict(config)))  # tuples as lists, as saved
    have = saved.get("config", {})
    diff = [k for k in want if have.get(k) != want[k]]
    if saved.get("format") != FORMAT or diff:
        field = diff[0] if diff else "format"
        raise BenchmarkError(f"{path}: saved with another configuration (field {field!r}: "
                             f"{str(have.get(field))[:60]} vs {str(want.get(field))[:60]}); "
                             "use another --out or delete the file")


# ---------------------------------------------------------------------------- report


def mean_std(values: Sequence[float]) -> str:
    if not values:
        return "–"
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.3f} ± {std:.3f} (n={len(values)})"


def summary(runs: dict[RunSpec, dict[str, Any]], baselines: dict[str, dict[str, Any]], algos: Sequence[str],
            templates: Sequence[str], rewards: Sequence[str]) -> str:
    head = "| template | algorithm | " + " | ".join(rewards) + " |"
    lines = [("Held-out PHYRE success of the deterministic policy at the end of training, "
              "mean ± sample std over seeds:"), "", head, "|" + "---|" * (len(rewards) + 2)]
    for t in templates:
        for a in algos:
            cells = [mean_std([r["final_success"] for s, r in runs.items()
                               if (s.algo, s.template, s.reward) == (a, t, k)]) for k in rewards]
            lines.append(f"| {t} | {a} | " + " | ".join(cells) + " |")
        if t in baselines:
            b = baselines[t]
            lines.append(f"| {t} | random actions | " + " | ".join([f"{b['success']:.3f} ({b['draws']} draws)"]
                                                                   * len(rewards)) + " |")
    return "\n".join(lines) + "\n"


def results_csv(runs: dict[RunSpec, dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["algo", "template", "reward", "seed", "steps", "final_success", "best_success", "final_invalid",
                "seconds"])
    for s, r in sorted(runs.items(), key=lambda kv: kv[0].key):
        w.writerow([s.algo, s.template, s.reward, s.seed, r["steps_done"], r["final_success"],
                    max(p["held_out_success"] for p in r["curve"]), r["final_invalid"], r["seconds"]])
    return buf.getvalue()


def curves_csv(runs: dict[RunSpec, dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["algo", "template", "reward", "seed", "step", "held_out_success", "invalid"])
    for s, r in sorted(runs.items(), key=lambda kv: kv[0].key):
        w.writerows([s.algo, s.template, s.reward, s.seed, p["step"], p["held_out_success"], p["invalid"]]
                    for p in r["curve"])
    return buf.getvalue()


def plot(runs: dict[RunSpec, dict[str, Any]], baselines: dict[str, dict[str, Any]], algos: Sequence[str],
         templates: Sequence[str], rewards: Sequence[str], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(templates), len(algos), figsize=(4.5 * len(algos), 3 * len(templates)),
                             squeeze=False, sharey=True)
    for i, t in enumerate(templates):
        for j, a in enumerate(algos):
            ax = axes[i][j]
            for k in rewards:
                curves = [r["curve"] for s, r in runs.items() if (s.algo, s.template, s.reward) == (a, t, k)]
                if not curves:
                    continue
                n = min(len(c) for c in curves)  # seeds share the schedule; guard a shorter one
                x = np.array([p["step"] for p in curves[0][:n]])
                y = np.array([[p["held_out_success"] for p in c[:n]] for c in curves])
                m, sd = y.mean(axis=0), y.std(axis=0)
                ax.plot(x, m, marker="o", ms=3, label=f"{k} ({len(curves)} seeds)")
                ax.fill_between(x, m - sd, m + sd, alpha=0.2)
            if t in baselines:
                ax.axhline(baselines[t]["success"], color="gray", ls="--", lw=1, label="random actions")
            ax.set_title(f"{t} · {a}")
            ax.set_xlabel("training steps")
            if j == 0:
                ax.set_ylabel("held-out success")
            ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(path, buf.getvalue())


# ---------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    p.add_argument("--templates", nargs="+", default=list(DEFAULT_TEMPLATES))
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"environment steps per run (default {DEFAULT_STEPS['PPO']} PPO, {DEFAULT_STEPS['SAC']} SAC)")
    p.add_argument("--rewards", nargs="+", choices=REWARDS, default=list(DEFAULT_REWARDS))
    p.add_argument("--train-variants", type=variant_list, default=variant_list("0-49"))
    p.add_argument("--held-out-variants", type=variant_list, default=variant_list("50-99"))
    p.add_argument("--n-envs", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=None, help="steps between held-out evaluations "
                   "(default a tenth of the run)")
    p.add_argument("--max-steps", type=int, default=MAX_STEPS, help="physics steps per rollout")
    p.add_argument("--settle", action="store_true",
                   help="training rollouts stop once every body rests (faster; a heuristic, evaluation never uses it)")
    p.add_argument("--ppo-n-steps", type=int, default=256, help="PPO rollout length per env (SB3's default 2048)")
    p.add_argument("--words-dir", type=Path, default=None,
                   help="folder of <template>.rwd programs compiled from the goal in words")
    p.add_argument("--invalid", choices=("left-alone", "zero"), default="left-alone",
                   help="a program's score for an invalid action: the world left alone (default) or 0")
    p.add_argument("--random-draws", type=int, default=3, help="random actions per held-out variant (reference)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the machine may be shared)")
    p.add_argument("--shard", type=shard, default=(0, 1), metavar="K/N",
                   help="run only every N-th run starting at K (0-based): N processes or machines share one --out; "
                        "then --report-only gathers them")
    p.add_argument("--out", type=Path, default=Path("rl-benchmark"))
    p.add_argument("--report-only", action="store_true", help="only the table and plot from saved runs")
    args = p.parse_args(argv)
    for name in ("seeds", "n_envs", "random_draws", "threads", "max_steps", "ppo_n_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    for t in args.templates:
        if t not in TEMPLATES or not TEMPLATES[t].num_variants:
            p.error(f"--templates: unknown template {t!r}")
        bad = [v for v in args.train_variants + args.held_out_variants if v >= TEMPLATES[t].num_variants]
        if bad:
            p.error(f"--train-variants/--held-out-variants: template {t} has {TEMPLATES[t].num_variants} "
                    f"variants, not {bad[0]}")
    if set(args.train_variants) & set(args.held_out_variants):
        p.error("--held-out-variants overlap --train-variants")
    if args.max_steps < SOLVE_STEPS:
        p.error(f"--max-steps {args.max_steps} is shorter than PHYRE's {SOLVE_STEPS}-step hold")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        if not args.report_only:
            print("benchmarks/rl.py: needs stable-baselines3 (pip install stable-baselines3)", file=sys.stderr)
            return 2
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    say(machine_line())
    specs = [RunSpec(a, t, k, s) for a in args.algos for t in args.templates for k in args.rewards
             for s in range(args.seeds)]
    if not args.report_only:
        specs = specs[args.shard[0]::args.shard[1]]
    runs: dict[RunSpec, dict[str, Any]] = {}
    baselines: dict[str, dict[str, Any]] = {}
    try:
        rows = {t: rows_needed(t, args.train_variants + args.held_out_variants) for t in args.templates}
        for t in args.templates:
            path = args.out / f"random-{t}.json"
            saved = load_json(path)
            if saved and (saved["held_out"], saved["draws"], saved["max_steps"]) == (
                    list(args.held_out_variants), args.random_draws, args.max_steps):
                baselines[t] = saved
            elif not args.report_only:
                baselines[t] = random_baseline(t, args.held_out_variants, rows[t], args.max_steps, args.random_draws)
                atomic_write_json(path, baselines[t])
            if t in baselines:
                say(f"{t}: random actions solve {baselines[t]['success']:.3f} of the held-out variants")
        for i, spec in enumerate(specs, 1):
            steps = args.steps or DEFAULT_STEPS[spec.algo]
            program, source = reward_program(spec.template, spec.reward, args.max_steps, args.words_dir,
                                             args.train_variants[0])
            config = RunConfig(steps=steps, train=args.train_variants, held_out=args.held_out_variants,
                               n_envs=args.n_envs, eval_every=args.eval_every or max(1, steps // 10),
                               max_steps=args.max_steps, settle=args.settle,
                               hyper=hyperparameters(spec.algo, steps, args.n_envs, args.ppo_n_steps),
                               program=program, invalid=None if program is None else args.invalid)
            path = args.out / "runs" / f"{spec.key}.json"
            saved = load_json(path)
            tag = f"[{i}/{len(specs)}] {spec.algo} {spec.template} {spec.reward} seed {spec.seed}"
            if saved is not None:
                check_saved(path, saved, config)
                runs[spec] = saved
                say(f"{tag}: done before, held-out success {saved['final_success']:.2f} (skipped)")
                continue
            if args.report_only:
                continue
            say(f"{tag}: {steps} steps, reward {source}")
            result = train_run(spec, config, rows[spec.template], lambda text, tag=tag: say(f"{tag}: {text}"))
            result["reward_source"] = source
            atomic_write_json(path, result)
            runs[spec] = result
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(runs)} finished runs kept in {args.out}; run the same command to resume "
              "(the unfinished run starts again)", file=sys.stderr)
        return 130
    except BenchmarkError as exc:
        print(f"benchmarks/rl.py: {exc}", file=sys.stderr)
        return 2
    table = summary(runs, baselines, args.algos, args.templates, args.rewards)
    atomic_write(args.out / "table.md", f"{machine_line()}\n\n{table}")
    atomic_write(args.out / "results.csv", results_csv(runs))
    atomic_write(args.out / "curves.csv", curves_csv(runs))
    if runs:
        plot(runs, baselines, args.algos, args.templates, args.rewards, args.out / "curves.png")
    say("\n" + table)
    say(f"{len(runs)}/{len(specs)} runs; wrote {args.out}/table.md, results.csv, curves.csv"
        + (", curves.png" if runs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
