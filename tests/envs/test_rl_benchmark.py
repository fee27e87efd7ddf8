"""The learning benchmark (benchmarks/rl.py) in miniature: one template, one seed, a few dozen
steps per run. It writes its files, a real Ctrl-C keeps the finished run, and the same command
resumes (skipping what is done) and then finds everything done."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from simpatterns.dsl import RewardProgram, builtin_library

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rl():
    spec = importlib.util.spec_from_file_location("rl_benchmark", ROOT / "benchmarks" / "rl.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


ARGS = ["--algos", "PPO", "--templates", "00000", "--seeds", "1", "--rewards", "sparse", "dense",
        "--steps", "48", "--ppo-n-steps", "16", "--eval-every", "24", "--train-variants", "0-3",
        "--held-out-variants", "50-52", "--random-draws", "1"]


class CtrlCOn(io.StringIO):
    """stdout that sends this process a real SIGINT when the benchmark prints ``trigger``."""

    def __init__(self, trigger: str) -> None:
        super().__init__()
        self.trigger = trigger

    def write(self, text: str) -> int:
        n = super().write(text)
        if self.trigger in text:
            self.trigger = "\0never"
            os.kill(os.getpid(), signal.SIGINT)
        return n


def test_runs_write_their_files_survive_ctrl_c_and_resume(rl, tmp_path, monkeypatch, capsys):
    out = tmp_path / "bench"
    args = ARGS + ["--out", str(out)]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # the handler Ctrl-C relies on
    try:
        with monkeypatch.context() as m:
            stdout = CtrlCOn("[2/2] PPO 00000 dense seed 0: step 0/48")  # inside the second run
            m.setattr(sys, "stdout", stdout)
            assert rl.main(args) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "interrupted: 1 finished runs kept" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["PPO-00000-sparse-s0.json"]  # no partial file
    first = (out / "runs" / "PPO-00000-sparse-s0.json").stat().st_mtime_ns

    assert rl.main(args) == 0
    text = capsys.readouterr().out
    assert "[1/2] PPO 00000 sparse seed 0: done before" in text and "[2/2] PPO 00000 dense seed 0: 48 steps" in text
    assert (out / "runs" / "PPO-00000-sparse-s0.json").stat().st_mtime_ns == first
    for name in ("table.md", "results.csv", "curves.csv", "curves.png", "random-00000.json"):
        assert (out / name).stat().st_size > 0, name

    dense = json.loads((out / "runs" / "PPO-00000-dense-s0.json").read_text())
    assert [p["step"] for p in dense["curve"]] == [0, 24, 48]
    assert all(0 <= p["held_out_success"] <= 1 and p["held_out_success"] * 3 == round(p["held_out_success"] * 3)
               for p in dense["curve"])  # a rate over the three held-out variants
    assert dense["config"]["program"].startswith("# the template's goal") and dense["steps_done"] == 48
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["reward"], r["steps"]) for r in rows] == [("dense", "48"), ("sparse", "48")]
    points = list(csv.DictReader((out / "curves.csv").open()))
    assert [(p["reward"], p["step"]) for p in points] == [("dense", "0"), ("dense", "24"), ("dense", "48"),
                                                          ("sparse", "0"), ("sparse", "24"), ("sparse", "48")]
    assert "| 00000 | PPO |" in (out / "table.md").read_text()

    assert rl.main(args) == 0  # everything done: nothing trains again
    assert capsys.readouterr().out.count("done before") == 2

    assert rl.main([*args[:args.index("--steps") + 1], "96", *args[args.index("--steps") + 2:]]) == 2
    err = capsys.readouterr().err
    assert "PPO-00000-sparse-s0.json: saved with another configuration (field 'steps': 48 vs 96)" in err


def test_words_program_names_each_templates_goal_pair(rl):
    from simpatterns.simulators.phyre import load_scene

    for template in ("00000", "00002"):
        text, source = rl.reward_program(template, "words", 1000, None, 0)
        a, b = load_scene(template, 0).goal_names
        assert f'TOUCHING("{a}", "{b}", hold=0.18)' in text and "no LLM" in source
        RewardProgram.from_text(text, builtin_library(), bodies=load_scene(template, 0).trace_bodies())
    text, _ = rl.reward_program("00002", "words", 500, None, 0)
    assert "hold=0.36" in text  # 3 s of a 500-step episode


def test_tiebreak_pays_success_first_and_a_tenth_of_the_dense_score_below_it(rl):
    from simpatterns.simulators.phyre import get_template

    rows = rl.rows_needed("00000", [0])
    tiebreak, source = rl.reward_program("00000", "tiebreak", 1000, None, 0)
    dense, _ = rl.reward_program("00000", "dense", 1000, None, 0)
    assert tiebreak.endswith(dense) and f"{rl.TIEBREAK_WEIGHT} x" in source
    envs = {"tiebreak": rl.make_env("00000", [0], rows, 1000, False, tiebreak, tiebreak=rl.TIEBREAK_WEIGHT),
            "dense": rl.make_env("00000", [0], rows, 1000, False, dense)}
    solved = np.asarray(get_template("00000").solution(0), dtype=np.float32) * 2 - 1
    failed = np.array([-0.9, 0.9, -0.5], dtype=np.float32)  # a small ball high on the left: no success
    paid = {}
    for kind, env in envs.items():
        for name, action in (("solved", solved), ("failed", failed)):
            env.reset(options={"template": "00000", "variant": 0})
            _, reward, terminated, _, info = env.step(action)
            assert terminated and info["is_success"] == (name == "solved") == info["task_success"]
            paid[kind, name] = reward
        env.close()
    assert paid["tiebreak", "solved"] == 1.0 == paid["dense", "solved"]
    assert 0 < paid["dense", "failed"] < 1
    assert paid["tiebreak", "failed"] == pytest.approx(rl.TIEBREAK_WEIGHT * paid["dense", "failed"], abs=1e-12)


def test_gain_pays_success_first_and_what_the_action_changed_below_it(rl):
    from simpatterns.simulators.phyre import get_template

    rows = rl.rows_needed("00000", [0])
    gain, _ = rl.reward_program("00000", "gain", 1000, None, 0)
    dense, _ = rl.reward_program("00000", "dense", 1000, None, 0)
    assert gain.endswith(dense) and gain.startswith(rl.GAIN_HEADER)
    envs = {"gain": rl.make_env("00000", [0], rows, 1000, False, gain, gain=True),
            "dense": rl.make_env("00000", [0], rows, 1000, False, dense)}
    solved = np.asarray(get_template("00000").solution(0), dtype=np.float32) * 2 - 1
    failed = solved + np.float32([0.1, 0, 0])  # a little to the right: a near miss
    invalid = solved + np.float32([0, 0.1, 0])  # a little higher: the ball leaves the scene
    paid = {}
    for kind, env in envs.items():
        for name, action in (("solved", solved), ("failed", failed), ("invalid", invalid)):
            env.reset(options={"template": "00000", "variant": 0})
            _, reward, _, _, info = env.step(action)
            assert bool(info["invalid_reason"]) == (name == "invalid")
            paid[kind, name] = reward
        env.close()
    assert paid["gain", "solved"] == 1.0 == paid["dense", "solved"]
    assert 0 < paid["dense", "invalid"] < 1  # the world left alone scores above nothing
    assert paid["gain", "invalid"] == 0.0
    assert paid["gain", "failed"] == pytest.approx(paid["dense", "failed"] - paid["dense", "invalid"], abs=1e-12)
    assert paid["dense", "failed"] > paid["dense", "invalid"]  # the near miss comes closer than doing nothing
