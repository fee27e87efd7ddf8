"""PHYRE 0.2.2's own metrics and folds, for tests that compare ours with them.

Two steps, two interpreters (PHYRE needs Python 3.9, simpatterns 3.10+)::

    # 1. attempt logs from our code: synthetic edge cases and a small run of our agents
    PYTHONPATH=. .venv/bin/python scripts/phyre_auccess_reference.py make-logs tests/data/phyre_auccess/logs.json
    # 2. PHYRE's Evaluator on those logs, and PHYRE's folds
    /tmp/phyre39/bin/python scripts/phyre_auccess_reference.py evaluate tests/data/phyre_auccess/logs.json \
        tests/data/phyre_auccess/phyre_metrics.json

(``python3.9 -m venv /tmp/phyre39 && /tmp/phyre39/bin/pip install phyre==0.2.2``.)

``logs.json``: ``{"logs": [{"name", "task_ids", "attempts": [[task_index, status], ...],
"episodes": [{"task", "solved_at", "used"}, ...] (runs of our agents only)}]}``; statuses are PHYRE's codes
(-1 not solved, 0 invalid, 1 solved, 2/3 unstably/stably solved), sometimes
as strings, as PHYRE accepts them.

``phyre_metrics.json``: per log, PHYRE's ``Evaluator.compute_all_metrics()``,
``get_auccess(k)`` for k in 1, 5, 10, 100 and ``maybe_log_attempt``'s return
values. Folds, for each main ball setup and seed 0-9 (each split as its size
and the SHA-256 of its newline-joined sorted ids):

- ``folds_phyre``: ``phyre.get_fold`` on PHYRE's own tasks, with
  ``phyre_task_ids`` (PHYRE's ball-tier ids: its variant numbers index each
  template's parameter grid, so they are not 000-099);
- ``folds_ours``: PHYRE's own fold code run on *our* task ids (read from
  ``simpatterns/simulators/phyre/data/variants.json``).
"""

import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AUCCESS_CAPS = (1, 5, 10, 100)


def split_digest(ids):
    return {"n": len(ids), "sha256": hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()}


# ------------------------------------------------------------------ step 2 (Python 3.9, phyre)
def evaluate(logs_path, out_path):
    import logging

    import phyre

    logging.disable(logging.WARNING)  # PHYRE warns on every log with under 100 attempts per task

    with open(logs_path) as fh:
        logs = json.load(fh)["logs"]
    results = []
    for item in logs:
        evaluator = phyre.Evaluator(tuple(item["task_ids"]))
        logged = [bool(evaluator.maybe_log_attempt(int(i), status)) for i, status in item["attempts"]]
        metrics = evaluator.compute_all_metrics()
        metrics["global_solved_by"] = {str(k): v for k, v in metrics["global_solved_by"].items()}
        results.append({
            "name": item["name"],
            "logged": logged,
            "metrics": metrics,
            "auccess": {str(k): evaluator.get_auccess(k) for k in AUCCESS_CAPS},
        })
    import phyre.metrics

    def all_folds():
        folds = {}
        for setup in ("ball_within_template", "ball_cross_template"):
            for seed in range(10):
                train, dev, test = phyre.get_fold(setup, seed)
                folds[f"{setup}:{seed}"] = {"train": split_digest(train), "dev": split_digest(dev),
                                            "test": split_digest(test)}
        return folds

    phyre_ids = list(phyre.metrics.get_task_ids_in_tier("ball"))
    folds_phyre = all_folds()
    with open(os.path.join(ROOT, "simpatterns", "simulators", "phyre", "data", "variants.json")) as fh:
        variants = json.load(fh)
    ours = sorted(f"{t}:{v:03d}" for t in variants for v in range(len(variants[t])))
    original = phyre.metrics.get_task_ids_in_tier
    phyre.metrics.get_task_ids_in_tier = lambda tier: list(ours)  # PHYRE's fold code, our task list
    try:
        folds_ours = all_folds()
    finally:
        phyre.metrics.get_task_ids_in_tier = original
    out = {"phyre_version": getattr(phyre, "__version__", "0.2.2"), "results": results,
           "phyre_task_ids": phyre_ids, "folds_phyre": folds_phyre, "folds_ours": folds_ours}
    with open(out_path, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


# ------------------------------------------------------------------ step 1 (simpatterns)
def synthetic_logs():
    import numpy as np

    rng = np.random.default_rng(20260101)
    logs = []
    # interleaved attempts on 40 tasks: invalid ones, solves at any attempt, tasks never tried,
    # attempts logged after a solve, status codes as ints and strings, unstable/stable solves
    ids = [f"{t:05d}:{v:03d}" for t in range(4) for v in range(10)]
    attempts = []
    counts = [0] * len(ids)
    for _ in range(2500):
        i = int(rng.integers(len(ids) - 3))  # the last three tasks are never tried
        if counts[i] >= 100:
            continue
        st = int(rng.choice([-1, -1, -1, -1, -1, -1, -1, 0, 0, 1, 2, 3]))
        if st != 0:
            counts[i] += 1
        attempts.append([i, str(st) if rng.random() < 0.1 else st])
    logs.append({"name": "synthetic-interleaved", "task_ids": ids, "attempts": attempts})
    # task by task, first success drawn geometric, exactly 100 attempts on some
    ids = [f"{t:05d}:{v:03d}" for t in range(25) for v in range(4)]
    attempts = []
    for i in range(len(ids)):
        first = int(min(rng.geometric(0.03), 101))
        for k in range(1, 101):
            if rng.random() < 0.2:
                attempts.append([i, 0])
            attempts.append([i, 1 if k == first else -1])
            if k == first:
                break
    logs.append({"name": "synthetic-sequential", "task_ids": ids, "attempts": attempts})
    logs.append({"name": "one-task-solved-first", "task_ids": ["00000:000"], "attempts": [[0, 1]]})
    logs.append({"name": "one-task-solved-at-100", "task_ids": ["00000:000"],
                 "attempts": [[0, -1]] * 99 + [[0, 1]]})
    logs.append({"name": "only-invalid", "task_ids": ["00000:000", "00000:001"], "attempts": [[0, 0], [1, 0]]})
    return logs


def agent_logs():
    """A small run of our agents (3^3 menus, the first test task of each template in fold 0)."""
    import tempfile

    from simpatterns.agents.runner import EvalConfig, evaluate as run_eval, make_conditions

    cfg = EvalConfig(setup="ball_within_template", seeds=(0,), per_template=1, train_per_template=3, bins=3,
                     budget=100)
    with tempfile.TemporaryDirectory() as tmp:
        out = run_eval(f"{tmp}/run", cfg, make_conditions(["random", "memory", "oracle", "anneal"]), workers=2,
                       cache_dir=f"{tmp}/menus")
    logs = []
    tasks = sorted({e.task for e in out.episodes})
    index = {t: k for k, t in enumerate(tasks)}
    for cond in ("random", "memory", "oracle", "anneal"):
        eps = [e for e in out.episodes if e.condition == cond]
        attempts = [[index[e.task], int(a.phyre_status)] for e in eps for a in e.attempts]
        logs.append({"name": f"agents-{cond}", "task_ids": tasks, "attempts": attempts,
                     "episodes": [{"task": e.task, "solved_at": e.solved_at, "used": e.used} for e in eps]})
    return logs


def make_logs(out_path):
    from simpatterns.files import atomic_write_json

    atomic_write_json(out_path, {"logs": synthetic_logs() + agent_logs()}, indent=None)


def main(argv):
    if len(argv) == 3 and argv[1] == "make-logs":
        make_logs(argv[2])
    elif len(argv) == 4 and argv[1] == "evaluate":
        evaluate(argv[2], argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
