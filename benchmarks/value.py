#!/usr/bin/env python
"""Value models on a CPU (paper §5.3): the learned agent's AUCCESS, and the Fig. 12 analogue.

    python benchmarks/value.py auccess                 # reduced: see --help for sizes
    python benchmarks/value.py fig12
    # the full within-template run (all 25 templates, 30 minutes of training on 2 cores):
    python benchmarks/value.py auccess --per-template 4 --train-per-template 16 --actions 256 \\
        --train-minutes 30 --steps 100000 --resolution 64 --width 8 --out runs/value_full

``auccess``: fold 0 of ``ball_within_template`` (``--setup``: or
``ball_cross_template``) on our 25 templates. The
training rows are the full-scan menus of the training tasks (every valid cell
of the ``--bins``³ grid, labelled by PHYRE's success, already simulated for the
memory agent) plus ``--actions`` uniformly sampled valid actions per training
task (`simpatterns.value.data`, through `parallel`). A FiLM network trains for
``--steps`` or ``--train-minutes`` (whichever ends first; the cosine schedule
is set by ``--steps``), then the harness
evaluates random, memory and ``value:MODEL`` on the same test tasks (AUCCESS
by the harness's own code). Writes ``OUT/summary.json`` and the harness
report.

``fig12``: for Appendix G goals A1, A4 and A6 on the scenes that hold their
colours (templates 00000, 00004, 00006, 00018, 00022, 00023), two value models
per goal: one on labels from the shipped synthesised program
(``simpatterns/examples/goals``), one on labels from the hand-written Python
reward (`simpatterns.value.handwritten`). Every ``--eval-every`` steps each
model ranks ``--candidates`` sampled valid actions of each held-out scene; the
top one is simulated and scored with the hand-written reward. Writes
``OUT/fig12.json`` and ``OUT/fig12.png`` (mean reward against training steps).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402 (after the path insert: runs from a checkout)
import torch  # noqa: E402

from simpatterns.cli_support import ProgressBar  # noqa: E402
from simpatterns.files import atomic_write_json  # noqa: E402
from simpatterns.simulators.phyre import simulate  # noqa: E402
from simpatterns.value.data import build_dataset, sample_valid_actions, task_scene  # noqa: E402
from simpatterns.value.handwritten import HANDWRITTEN  # noqa: E402
from simpatterns.value.model import NetConfig  # noqa: E402
from simpatterns.value.scene import scene_image  # noqa: E402
from simpatterns.value.train import Examples, TrainConfig, save_model, train  # noqa: E402

GOALS = {
    "a01": "a01_touch_at_end_red_never_green.rwd",
    "a04": "a04_green_touches_both.rwd",
    "a06": "a06_near_miss.rwd",
}
GOAL_TEMPLATES = ("00000", "00004", "00006", "00018", "00022", "00023")


def _net(args: argparse.Namespace) -> NetConfig:
    return NetConfig(args.resolution, args.width, args.stages, args.fusion)


# ------------------------------------------------------------------ AUCCESS
def auccess(args: argparse.Namespace) -> None:
    from simpatterns.agents.folds import get_fold
    from simpatterns.agents.menu import MenuStore
    from simpatterns.agents.report import summarize, write_report
    from simpatterns.agents.runner import (
        EvalConfig,
        _per_template,
        evaluate,
        make_conditions,
        read_run,
    )

    out = Path(args.out)
    config = EvalConfig(setup=args.setup, seeds=(0,), per_template=args.per_template,
                        train_per_template=args.train_per_template, bins=args.bins)
    fold = get_fold(args.setup, 0)
    train_ids = _per_template(fold.train_all, args.train_per_template)
    t0 = time.perf_counter()
    menus = MenuStore(args.cache, args.bins).get_many(train_ids, workers=args.workers, progress="train menus")
    cols: dict[str, list] = {c: [] for c in ("task", "x", "y", "r", "label")}
    for tid in train_ids:
        m = menus[tid]
        for k, c in enumerate(m.choices):
            cols["task"].append(tid)
            for name, v in zip("xyr", c.action):
                cols[name].append(v)
            cols["label"].append(float(m.status(k) == 1))
    if args.actions:
        with ProgressBar("sampled actions", len(train_ids)) as bar:
            extra = build_dataset(train_ids, args.actions, "success", seed=1, workers=args.workers, progress=bar)
        for c in cols:
            cols[c].extend(extra[c])
    data_s = time.perf_counter() - t0
    print(f"{len(cols['task'])} training rows from {len(train_ids)} tasks, "
          f"{int(np.sum(cols['label']))} positive ({data_s:.0f} s)")
    ex = Examples.from_columns(cols, args.resolution)
    t1 = time.perf_counter()
    limit = None if args.train_minutes is None else 60 * args.train_minutes
    res = train(ex, out / "model", TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, checkpoint_every=200,
                                                log_every=args.log_every, net=_net(args)), log=print,
                time_limit_s=limit)
    if res.stopped:  # the time limit: the weights reached are the model
        save_model(out / "model" / "model.pt", res.net)
    train_s = time.perf_counter() - t1
    step_s = train_s / max(res.step, 1)
    print(f"{step_s:.2f} s/step at {args.resolution}px width {args.width}, {res.step} steps")
    model = out / "model" / "model.pt"
    conds = make_conditions(["random", "memory", f"value:{model}"])
    # inline: forked workers of a process that ran torch's OpenMP pool can hang; ranking is cheap
    evaluate(out / "eval", config, conds, workers=1, cache_dir=args.cache, log=print)
    write_report(out / "eval")  # report.md and the success-vs-attempts pictures, beside the other agents
    run, episodes = read_run(out / "eval")
    rows = {s.condition: s for s in summarize(run, episodes)}
    table = {name: {"auccess": 100 * s.auccess, "se": 100 * s.auccess_se, "tasks": s.tasks}
             for name, s in rows.items()}
    summary = {"steps": res.step, "train_seconds": train_s, "seconds_per_step": step_s, "data_seconds": data_s,
               "rows": len(cols["task"]), "net": _net(args).to_json(), "args": vars(args), "agents": table,
               "load_average": os.getloadavg()}
    atomic_write_json(out / "summary.json", summary)
    for name, v in table.items():
        print(f"{name:40s} AUCCESS {v['auccess']:5.1f} ± {v['se']:.1f}  ({v['tasks']} tasks)")
    print(f"training {train_s / 60:.1f} min, {res.step} steps; wrote {out / 'summary.json'}")


# ------------------------------------------------------------------ Fig. 12
def _heldout_reward(net, scenes: list, candidates: list[np.ndarray], reward) -> float:
    vals = []
    for scene, acts in zip(scenes, candidates):
        img = torch.from_numpy(scene_image(scene, net.config.resolution))
        best = acts[int(torch.argmax(net.rank_scores(img, torch.as_tensor(acts, dtype=torch.float32))))]
        vals.append(reward(simulate(scene, best, stop_on_success=False).trace))
    return float(np.mean(vals))


def fig12(args: argparse.Namespace) -> None:
    out = Path(args.out)
    train_ids = [f"{t}:{v:03d}" for t in GOAL_TEMPLATES for v in range(args.train_per_template)]
    test_ids = [f"{t}:{v:03d}" for t in GOAL_TEMPLATES
                for v in range(args.train_per_template, args.train_per_template + args.per_template)]
    scenes = [task_scene(t) for t in test_ids]
    rng = np.random.default_rng(7)
    candidates = [sample_valid_actions(s, args.candidates, rng) for s in scenes]
    images: dict[str, np.ndarray] = {}
    results: dict[str, dict] = {}
    for goal in args.goals.split(","):
        reward = HANDWRITTEN[goal]
        kinds = {"program": str(ROOT / "simpatterns" / "examples" / "goals" / GOALS[goal]),
                 "handwritten": f"simpatterns.value.handwritten:{goal}"}
        results[goal] = {}
        for kind, label in kinds.items():
            with ProgressBar(f"{goal} {kind}", len(train_ids)) as bar:
                cols = build_dataset(train_ids, args.actions, label, seed=0, workers=args.workers, progress=bar)
            ex = Examples.from_columns(cols, args.resolution, images)
            curve: list[tuple[int, float]] = []

            def evaluate_at(step: int, net, curve=curve, reward=reward) -> None:
                curve.append((step, _heldout_reward(net, scenes, candidates, reward)))

            t = time.perf_counter()
            train(ex, out / f"{goal}-{kind}", TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr,
                                                          checkpoint_every=10**9, log_every=args.eval_every,
                                                          net=_net(args)), on_log=evaluate_at)
            results[goal][kind] = {"positives": float(np.sum(cols["label"])), "rows": len(cols["label"]),
                                   "curve": curve, "seconds": time.perf_counter() - t}
            print(f"{goal} {kind:11s} positives {int(np.sum(cols['label'])):4d}/{len(cols['label'])}  "
                  + "  ".join(f"{s}:{v:.2f}" for s, v in curve))
        rand = np.mean([np.mean([reward(simulate(s, a, stop_on_success=False).trace) for a in acts[:8]])
                        for s, acts in zip(scenes, candidates)])
        results[goal]["random"] = float(rand)
    atomic_write_json(out / "fig12.json", {"args": vars(args), "test_tasks": test_ids, "results": results})
    _plot(results, out / "fig12.png")
    print(f"wrote {out / 'fig12.json'} and {out / 'fig12.png'}")


def _plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.2), squeeze=False)
    for ax, (goal, r) in zip(axes[0], results.items()):
        for kind, style in (("program", "-o"), ("handwritten", "--s")):
            steps, vals = zip(*r[kind]["curve"]) if r[kind]["curve"] else ((), ())
            ax.plot(steps, vals, style, label=f"{kind} labels")
        ax.axhline(r["random"], color="gray", lw=0.8, label="random action")
        ax.set_title(goal.upper())
        ax.set_xlabel("training steps")
        ax.set_ylabel("hand-written reward (held out)")
        ax.set_ylim(-0.05, 1.05)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("auccess", "fig12"))
    ap.add_argument("--setup", default="ball_within_template", help="auccess: the fold (or ball_cross_template)")
    ap.add_argument("--per-template", type=int, default=2, help="test tasks per template")
    ap.add_argument("--train-per-template", type=int, default=4)
    ap.add_argument("--actions", type=int, default=32, help="sampled actions per training task")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--train-minutes", type=float, default=None, help="auccess: stop training after this long")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--resolution", type=int, default=32)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--fusion", default="last")
    ap.add_argument("--bins", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", default=None, help="menu cache (default ~/.cache/simpatterns/menus)")
    ap.add_argument("--goals", default="a01,a04,a06")
    ap.add_argument("--candidates", type=int, default=256, help="fig12: sampled actions ranked per held-out scene")
    ap.add_argument("--eval-every", type=int, default=50, help="fig12: steps between held-out evaluations")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out = args.out or str(ROOT / "runs" / f"value_{args.part}")
    auccess(args) if args.part == "auccess" else fig12(args)


if __name__ == "__main__":
    main()
