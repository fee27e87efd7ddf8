"""simpatterns/KnotRope-v0: Gymnasium conventions, success tests, rewards, vector envs."""

import functools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.envs import KNOT_ROPE, RewardProgramWrapper
from simpatterns.simulators.mujoco import diagram, load_configurations

ID = "simpatterns.envs:simpatterns/KnotRope-v0"


@pytest.mark.parametrize("obs_mode", ["rgb", "state"])
def test_check_env(obs_mode):
    env = gym.make(KNOT_ROPE, obs_mode=obs_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no checker warnings either
        check_env(env.unwrapped)
    assert env.spec.max_episode_steps == 50
    shape = (128, 256, 3) if obs_mode == "rgb" else (2, 100, 3)
    assert env.observation_space.shape == shape and env.action_space.shape == (6,)


def test_reset_is_determined_by_the_seed():
    env = gym.make(KNOT_ROPE, obs_mode="state", task="convert", crossings=3)
    a, ia = env.reset(seed=4)
    b, ib = env.reset(seed=4)
    assert np.array_equal(a, b) and ia == ib
    c = load_configurations("train")
    assert ia["crossings"] == 2 and ia["goal_crossings"] == 3
    assert c.crossings[ia["start_index"]] == 2 and ia["gauss_code"] == c.gauss[ia["start_index"]]


def test_reaching_the_goal_code_succeeds_and_terminates():
    c = load_configurations("train")
    g = int(c.with_crossings([2])[0])
    env = gym.make(KNOT_ROPE, obs_mode="state", task="tie", crossings=2)
    _, info = env.reset(seed=0, options={"start": g, "goal": g})
    assert info["is_success"]
    obs, reward, terminated, truncated, info = env.step(np.zeros(6, np.float32))  # no force: nothing changes
    assert info["is_success"] and info["task_success"] and terminated and not truncated
    assert reward == 1.0 and info["reward/success"] == 1.0 and info["gauss_code"] == c.gauss[g]


def test_success_ignores_the_start_bead_unless_strict():
    c = load_configurations("train")
    g = int(c.with_crossings([3])[0])
    first = min(min(x.over, x.under) for x in diagram(c.positions[g]).crossings)
    turned = np.roll(c.positions[g], -(first + 1), axis=0)  # the same rope, read from just past its first pass
    assert diagram(turned).code.text != c.gauss[g]
    for strict, expected in ((False, True), (True, False)):
        env = gym.make(KNOT_ROPE, obs_mode="state", task="tie", crossings=3, strict=strict)
        _, info = env.reset(seed=0, options={"start": turned, "goal": g})
        assert info["is_success"] is expected


def test_a_random_episode_times_out_with_the_penalty():
    env = gym.make(KNOT_ROPE, obs_mode="state", task="tie", crossings=4, timeout_penalty=-5.0, horizon=3,
                   max_episode_steps=3)
    env.reset(seed=1)
    env.action_space.seed(1)
    rewards, done = [], False
    while not done:
        _, r, terminated, truncated, info = env.step(env.action_space.sample())
        rewards.append(r)
        done = terminated or truncated
    assert truncated and not info["is_success"] and rewards[-1] == -5.0 and rewards[:-1] == [0.0] * 2


def test_malformed_actions():
    env = gym.make(KNOT_ROPE, obs_mode="state")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape \\(6,\\)"):
        env.step(np.zeros(3))
    obs, r, term, trunc, info = env.step(np.full(6, np.nan))
    assert "NaN" in info["invalid_reason"] and info["bead"] == -1 and env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="task must be one of"):
        gym.make(KNOT_ROPE, task="untie")


def test_ansi_render_shows_both_codes_and_the_events():
    env = gym.make(KNOT_ROPE, obs_mode="state", render_mode="ansi", task="unknot", crossings=2)
    _, info = env.reset(seed=2)
    env.step(np.array([0.3, 0.2, 0.0, 0.0, 0.0, 1.0], np.float32))
    text = env.render()
    assert f"Goal Gauss code: no crossings" in text and "Gauss code now:" in text
    assert "Timeline" in text and "bead dragged" in text
    assert "Last action: force (0.000, 0.000, 0.200) N on bead" in text


def test_rgb_render_is_the_observation():
    env = gym.make(KNOT_ROPE, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    img = env.render()
    assert img.shape == (128, 256, 3) and np.array_equal(img, obs)
    assert img[:, :128].any() and img[:, 128:].any()


def test_program_rewards_over_rope_patterns():
    program = 'AND(COUNT("bead dragged") >= 2, NEVER("crossing formed"))'
    env = gym.make(KNOT_ROPE, obs_mode="state", task="unknot", crossings=2, reward_mode="program",
                   reward_program=program)
    env.reset(seed=0)
    _, r1, _, _, info1 = env.step(np.array([0.5, 0.0, 0.0, 1.0, 0.0, 0.0], np.float32))
    assert 0.0 <= r1 <= 1.0 and set(info1) >= {"program_score", 'reward/COUNT("bead dragged") >= 2'}
    _, r2, _, _, info2 = env.step(np.array([-0.5, 0.0, 0.0, -1.0, 0.0, 0.0], np.float32))
    assert info2['reward/COUNT("bead dragged") >= 2'] == 1.0  # two drags by now
    assert r2 == pytest.approx(info2["program_score"])
    wrapped = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state"), program)
    wrapped.reset(seed=0)
    _, r, _, _, info = wrapped.step(np.array([0.5, 0.0, 0.0, 1.0, 0.0, 0.0], np.float32))
    assert "program_score" in info and "task_success" in info and r == pytest.approx(r1)


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_vector_envs(vector):
    make = functools.partial(gym.make, ID, obs_mode="rgb")
    if vector == "sync":
        venv = gym.vector.SyncVectorEnv([make, make])
    else:  # fresh worker processes: a forked copy of a process that already rendered cannot open OpenGL again
        venv = gym.vector.AsyncVectorEnv([make, make], context="forkserver")
    try:
        obs, info = venv.reset(seed=[0, 1])
        assert obs.shape == (2, 128, 256, 3)
        for _ in range(2):
            obs, r, term, trunc, info = venv.step(venv.action_space.sample())
        assert obs.shape == (2, 128, 256, 3) and r.shape == (2,) and "is_success" in info
    finally:
        venv.close()
