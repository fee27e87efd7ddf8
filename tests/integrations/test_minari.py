"""`simpatterns export --format minari`: PHYRE-environment rollouts that `minari.load_dataset` opens,
whose recorded spec rebuilds the environment, and whose program rewards are our reward programs'."""

from __future__ import annotations

import json
from importlib.resources import files

import numpy as np
import pytest
from typer.testing import CliRunner

minari = pytest.importorskip("minari")

from simpatterns.cli import app
from simpatterns.dsl import RewardProgram
from simpatterns.envs import RewardProgramWrapper
from simpatterns.envs.scenes import task_program_text

ENV = "simpatterns/PhyreOneBall-v0"
KWARGS = {"obs_mode": "objects", "template": 0}


def _export(tmp_path, *extra):
    res = CliRunner().invoke(app, ["export", ENV, "--format", "minari", "--episodes", "4", "--seed", "7",
                                   "--env-kwargs", json.dumps(KWARGS), "--data-path", str(tmp_path / "minari"),
                                   *extra])
    assert res.exit_code == 0, res.output
    return res


def test_load_dataset_replays_in_the_recovered_environment(tmp_path, monkeypatch):
    res = _export(tmp_path)
    assert "4 episodes, 4 steps" in res.stderr and "simpatterns/PhyreOneBall/random-v0" in res.stderr
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    ds = minari.load_dataset("simpatterns/PhyreOneBall/random-v0")
    assert ds.total_episodes == 4 and ds.total_steps == 4
    env = ds.recover_environment()
    assert env.spec.id == ENV and env.spec.kwargs == KWARGS
    env.unwrapped.info_trace = True
    programs = 0
    for k, ep in enumerate(ds.iterate_episodes()):
        assert ep.observations.shape[0] == 2 and ep.actions.shape == (1, 3)
        assert list(ep.terminations) == [True] and list(ep.truncations) == [False]
        obs, info = env.reset(seed=7 + k)
        assert np.array_equal(obs, ep.observations[0])
        obs, reward, *_, info = env.step(ep.actions[0])
        assert np.array_equal(obs, ep.observations[1]) and reward == ep.rewards[0]
        assert ep.infos["template"][1] == 0 and ep.infos["variant"][1] == info["variant"]
        assert ep.infos["valid"][1] == int(not info["invalid_reason"])
        trace = info["trace"]
        expected = 0.0
        if trace is not None:
            program = RewardProgram.coerce(task_program_text(env.unwrapped.scene), env.unwrapped.library)
            expected = program.evaluate(None, trace).score
            programs += 1
        assert ep.infos["program_reward"][1] == pytest.approx(expected)
        assert ep.infos["program_reward"][0] == 0.0 and ep.infos["task_success"][1] == int(reward == 1.0)
    assert programs > 0  # at least one valid action was scored


def test_a_goal_program_is_scored_as_the_wrapper_scores_it(tmp_path, monkeypatch):
    goal = tmp_path / "goal.rwd"
    goal.write_text((files("simpatterns.examples") / "goals" / "a06_near_miss.rwd").read_text())
    _export(tmp_path, "--goal", str(goal), "-o", "simpatterns/PhyreOneBall/goal-v0")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    ds = minari.load_dataset("simpatterns/PhyreOneBall/goal-v0")
    env = RewardProgramWrapper(ds.recover_environment(), goal.read_text())
    paid = []
    for k, ep in enumerate(ds.iterate_episodes()):
        env.reset(seed=7 + k)
        _, reward, *_ = env.step(ep.actions[0])
        assert ep.infos["program_reward"][1] == pytest.approx(reward)
        paid.append(reward)
    assert max(paid) > 0  # partial credit somewhere: the comparison is not of zeros only


def test_bad_input_is_one_line(tmp_path):
    base = ["export", "--format", "minari", "--data-path", str(tmp_path)]
    res = CliRunner().invoke(app, [*base[:1], "simpatterns/Nope-v0", *base[1:]])
    assert res.exit_code == 2 and "environment 'simpatterns/Nope-v0'" in res.stderr
    res = CliRunner().invoke(app, [*base[:1], ENV, *base[1:], "--env-kwargs", "{oops"])
    assert res.exit_code == 2 and "--env-kwargs: not JSON" in res.stderr
    res = CliRunner().invoke(app, [*base[:1], ENV, *base[1:], "--env-kwargs", '{"colour": 3}'])
    assert res.exit_code == 2 and "colour" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    (tmp_path / "bad.rwd").write_text('NEARBY_AT("red ball", "green ball", d=40)\n')
    res = CliRunner().invoke(app, [*base[:1], ENV, *base[1:], "--goal", str(tmp_path / "bad.rwd")])
    assert res.exit_code == 2 and "bad.rwd" in res.stderr and len(res.stderr.strip().splitlines()) == 1
