"""PHYRE's folds and AUCCESS: ours equal PHYRE 0.2.2's own output (stored by
scripts/phyre_auccess_reference.py), and behave as the protocol says."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from simpatterns.agents import phyre_compat
from simpatterns.agents.folds import EVAL_SETUPS, get_fold, parse_fold, parse_seeds, stable_shuffle
from simpatterns.agents.metrics import (
    auccess,
    auccess_weights,
    compute_metrics,
    expected_random_attempts,
    expected_random_curve,
    score,
)
from simpatterns.agents.tasks import all_task_ids

DATA = Path(__file__).resolve().parents[1] / "data" / "phyre_auccess"
LOGS = json.loads((DATA / "logs.json").read_text())["logs"]
PHYRE = json.loads((DATA / "phyre_metrics.json").read_text())


def digest(ids):
    return {"n": len(ids), "sha256": hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()}


# ------------------------------------------------------------------ folds
@pytest.mark.parametrize("setup", EVAL_SETUPS)
def test_our_folds_are_phyres_folds(setup):
    phyre_ids = PHYRE["phyre_task_ids"]
    assert len(phyre_ids) == 2500 and len(all_task_ids()) == 2500
    for seed in range(10):
        key = f"{setup}:{seed}"
        # on PHYRE's own task list, our get_fold returns phyre.get_fold's folds
        fold = get_fold(setup, seed, phyre_ids)
        assert {k: digest(getattr(fold, k)) for k in ("train", "dev", "test")} == PHYRE["folds_phyre"][key]
        # on our tasks, the folds PHYRE's own code makes of them
        fold = get_fold(setup, seed)
        assert {k: digest(getattr(fold, k)) for k in ("train", "dev", "test")} == PHYRE["folds_ours"][key]


def test_fold_structure():
    every = set(all_task_ids())
    for seed in (0, 7):
        w = get_fold("ball_within_template", seed)
        assert not (set(w.train) & set(w.dev)) and not (set(w.train_all) & set(w.test))
        assert set(w.train_all) | set(w.test) == every
        per = {t: sum(x.startswith(t) for x in w.test) for t in {x[:5] for x in every}}
        assert set(per.values()) == {20}  # 20% of each template's 100 tasks
        c = get_fold("ball_cross_template", seed)
        test_t, train_t = {x[:5] for x in c.test}, {x[:5] for x in c.train_all}
        assert len(test_t) == 5 and len(train_t) == 20 and not test_t & train_t
        assert len({x[:5] for x in c.dev}) == 4  # dev splits the training templates again
    assert get_fold("ball_within_template", 0).test != get_fold("ball_within_template", 1).test
    train, dev, test = phyre_compat.get_fold("ball_within_template", 3)
    assert (train, dev, test) == tuple(get_fold("ball_within_template", 3))


def test_folds_on_any_task_list():
    # 3 templates with 10, 5 and 1 tasks: round(0.8 n) train per template; a single task trains
    ids = [f"00001:{v:03d}" for v in range(10)] + [f"00004:{v:03d}" for v in range(5)] + ["00009:000"]
    f = get_fold("ball_within_template", 2, ids)
    assert len(f.test) == 2 + 1 + 0 and len(f.train_all) == 8 + 4 + 1
    assert set(f.test) | set(f.train_all) == set(ids)


def test_stable_shuffle_is_md5_order_and_seeded():
    items = [f"00000:{v:03d}" for v in range(20)]
    out = stable_shuffle(items, "salt")
    assert out == sorted(items, key=lambda s: hashlib.md5((s + "salt").encode()).hexdigest())
    assert out != stable_shuffle(items, "other") and sorted(out) == items


def test_setup_and_seed_parsing():
    assert parse_seeds("0-2,5") == [0, 1, 2, 5] and parse_fold("ball_cross_template:3") == ("ball_cross_template", [3])
    with pytest.raises(ValueError, match="unknown eval setup 'two_balls_within_template'"):
        get_fold("two_balls_within_template", 0)
    with pytest.raises(ValueError, match="runs backwards"):
        parse_seeds("5-2")


# ------------------------------------------------------------------ AUCCESS
@pytest.mark.parametrize("item", LOGS, ids=[x["name"] for x in LOGS])
def test_metrics_equal_phyres_evaluator(item):
    ref = next(r for r in PHYRE["results"] if r["name"] == item["name"])
    ids = item["task_ids"]
    ev = phyre_compat.Evaluator(ids)
    logged = [ev.maybe_log_attempt(i, st) for i, st in item["attempts"]]
    assert logged == ref["logged"]
    ours = ev.compute_all_metrics()
    ours["global_solved_by"] = {str(k): v for k, v in ours["global_solved_by"].items()}
    assert ours == ref["metrics"]  # every float bit for bit, all 101 entries of each curve
    assert {str(k): ev.get_auccess(k) for k in (1, 5, 10, 100)} == ref["auccess"]
    log = [(ids[i], st) for i, st in item["attempts"]]
    assert compute_metrics(log, len(ids)) == ev.compute_all_metrics()
    if "episodes" in item:  # our agents' runs: the report's path (episodes -> score) gives PHYRE's number
        eps = item["episodes"]
        sc = score({e["task"]: e["solved_at"] for e in eps}, {e["task"]: e["used"] for e in eps}, 100)
        assert sc.auccess == ref["auccess"]["100"] and sc.auccess_at[10] == ref["auccess"]["10"]


def test_the_agent_logs_are_not_trivial():
    aucs = {r["name"]: r["auccess"]["100"] for r in PHYRE["results"]}
    assert aucs["agents-oracle"] == pytest.approx(1.0)  # PHYRE sums to 1.0000000000000002
    assert 0.0 < aucs["agents-random"] < 1.0 and 0.0 < aucs["agents-anneal"] < 1.0


def test_auccess_by_hand():
    w = auccess_weights()
    assert math.isclose(sum(w), math.log(101))
    assert auccess([1], 1) == pytest.approx(1.0)
    assert auccess([None], 1) == 0.0
    k = 7  # solved at attempt k: counted from k on
    assert auccess([k], 1) == pytest.approx(sum(w[k - 1:]) / sum(w))
    assert auccess([1, None], 2) == pytest.approx(0.5)
    assert auccess([101], 1) == 0.0  # past PHYRE's 100 attempts: not solved
    # AUCCESS@K renormalises over k <= K
    assert auccess([3], 1, cap=5) == pytest.approx(sum(w[2:5]) / sum(w[:5]))


def test_score_fields():
    sc = score({"a": 1, "b": 4, "c": None}, {"a": 1, "b": 4, "c": 10}, budget=10, caps=(5,))
    assert sc.success_at_1 == pytest.approx(1 / 3) and sc.success_at_budget == pytest.approx(2 / 3)
    assert sc.mean_attempts == pytest.approx(5.0) and len(sc.curve) == 10 and sc.curve[3] == pytest.approx(2 / 3)
    assert set(sc.auccess_at) == {5, 10} and sc.auccess_at[10] < sc.auccess  # flat after the budget: later weights see more


def test_expected_random_equals_enumeration():
    for n, s in [(5, 2), (6, 1), (4, 4), (5, 0)]:
        outcomes = [1] * s + [0] * (n - s)
        perms = list(itertools.permutations(range(n)))
        firsts = []
        for p in perms:
            hit = [k + 1 for k, i in enumerate(p) if outcomes[i]]
            firsts.append(hit[0] if hit else None)
        budget = 7
        brute = [np.mean([f is not None and f <= k for f in firsts]) for k in range(1, budget + 1)]
        assert np.allclose(expected_random_curve(n, s, budget), brute)
        used = np.mean([min(f, budget) if f is not None else min(n, budget) for f in firsts])
        assert expected_random_attempts(n, s, budget) == pytest.approx(used)
