"""The environments in the RL ecosystem's own tools: Gymnasium's and SB3's checkers on
``gym.make(id)``, vector environments in fresh processes, v1's conventions, pickling."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.envs import ENV_IDS, KNOT_ROPE, PHYRE_ONE_BALL, PHYRE_ONE_BALL_V1, RewardProgramWrapper
from simpatterns.simulators.phyre import get_template

FAST = dict(template="00000", max_steps=240)
PROGRAM = 'AND(EVENT("touch start", {"object_a": "red ball"}), NEARBY_AT("green ball", target="blue ball", radius=30))'
PHYRE_CONFIGS = [{}, {"obs_mode": "semantic"}, {"obs_mode": "objects"}, {"action_bins": 4},
                 {"obs_mode": "semantic", "channels_first": False, "onehot_value": 1},
                 {"render_mode": "ansi"}, {"render_mode": "rgb_array", "obs_mode": "objects"}]
# the one warning check_env gives for any gym.make'd env (it checks through the wrappers),
# and Gymnasium's note that v0 has a successor
EXPECTED_WARNINGS = (".*different from the unwrapped", ".*is out of date")


def configs(env_id: str) -> list[dict]:
    if env_id == KNOT_ROPE:
        return [{}, {"render_mode": "rgb_array"}]
    return [{**FAST, **c} for c in PHYRE_CONFIGS]


def strict_check(env: gym.Env) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for message in EXPECTED_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        check_env(env, skip_render_check=env.render_mode is None)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env_passes_on_gym_make(env_id):
    for config in configs(env_id):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is out of date")
            env = gym.make(env_id, **config)
        strict_check(env)
        env.close()


@pytest.mark.parametrize("env_id", [PHYRE_ONE_BALL, PHYRE_ONE_BALL_V1])
def test_one_step_episodes_are_terminated_not_truncated(env_id):
    env = gym.make(env_id, **FAST)
    assert env.spec.max_episode_steps is None
    for seed in range(3):
        env.reset(seed=seed)
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        assert terminated and not truncated


def test_program_wrapper_passes_check_env_on_gym_make():
    for env_id in (PHYRE_ONE_BALL, PHYRE_ONE_BALL_V1):
        strict_check(RewardProgramWrapper(gym.make(env_id, **FAST), PROGRAM))
    strict_check(RewardProgramWrapper(gym.make(KNOT_ROPE), 'EVENT("crossing removed")'))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_stable_baselines3_check_env(env_id):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    for config in configs(env_id)[:4]:
        env = gym.make(env_id, **config)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for message in EXPECTED_WARNINGS:
                warnings.filterwarnings("ignore", message=message)
            if env_id == PHYRE_ONE_BALL:  # v0 keeps PHYRE's [0, 1] actions, which SB3 warns about
                warnings.filterwarnings("ignore", message=".*symmetric and normalized")
                warnings.filterwarnings("ignore", message=".*bounds are not in \\[0, 255\\]")
            if config.get("obs_mode") == "objects":  # (bodies, features): MlpPolicy flattens it
                warnings.filterwarnings("ignore", message=".*unconventional shape")
            sb3_checker.check_env(env)
        env.close()


def test_rope_state_observation_is_flattened_by_sb3_and_only_its_image_notes_are_given():
    # SB3's checker takes a 3-D Box for an image; the rope's [2, 100, 3] float32 bead positions
    # are none (docs/guide/mujoco.md says so): the checker's notes are its image notes, no more,
    # and MlpPolicy flattens the observation
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    from stable_baselines3.common.preprocessing import is_image_space

    env = gym.make(KNOT_ROPE, obs_mode="state")
    assert env.observation_space.shape == (2, 100, 3) and env.observation_space.dtype == np.float32
    assert not is_image_space(env.observation_space, check_channels=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(env)
    notes = [str(w.message) for w in caught if not any(re.match(m, str(w.message)) for m in EXPECTED_WARNINGS)]
    assert len(notes) == 3 and all(("image" in n) or ("resolution" in n) for n in notes), notes
    model = sb3.PPO("MlpPolicy", env, n_steps=8, batch_size=8, seed=0, device="cpu")
    assert type(model.policy.features_extractor).__name__ == "FlattenExtractor"
    assert model.policy.features_extractor.features_dim == 600
    env.close()


def test_v1_observations_fit_sb3_cnn_policy():
    preprocessing = pytest.importorskip("stable_baselines3.common.preprocessing")
    env = gym.make(PHYRE_ONE_BALL_V1, obs_mode="semantic", **FAST)
    space = env.observation_space
    assert space.shape == (7, 64, 64) and space.dtype == np.uint8 and space.high.max() == 255
    assert preprocessing.is_image_space(space, check_channels=False)
    assert preprocessing.is_image_space_channels_first(space)
    obs, _ = env.reset(seed=0)
    assert set(np.unique(obs)) <= {0, 255} and (obs == 255).sum(axis=0).tolist() == np.ones((64, 64)).tolist()
    rgb = gym.make(PHYRE_ONE_BALL_V1, **FAST)
    assert rgb.observation_space.shape == (3, 256, 256)
    assert preprocessing.is_image_space(rgb.observation_space, check_channels=True)


def test_v1_images_are_v0_images_transposed_and_scaled():
    v0 = gym.make(PHYRE_ONE_BALL, obs_mode="semantic", **FAST)
    v1 = gym.make(PHYRE_ONE_BALL_V1, obs_mode="semantic", **FAST)
    a, _ = v0.reset(seed=4)
    b, _ = v1.reset(seed=4)
    np.testing.assert_array_equal(b, a.transpose(2, 0, 1) * 255)
    v0 = gym.make(PHYRE_ONE_BALL, **FAST)
    v1 = gym.make(PHYRE_ONE_BALL_V1, **FAST)
    np.testing.assert_array_equal(v1.reset(seed=4)[0], v0.reset(seed=4)[0].transpose(2, 0, 1))


def test_symmetric_actions_map_onto_phyre_actions():
    solution = np.asarray(get_template("00000").solution(0), dtype=np.float64)
    v0 = gym.make(PHYRE_ONE_BALL, info_trace=True, template="00000")
    v1 = gym.make(PHYRE_ONE_BALL_V1, info_trace=True, template="00000")
    assert v1.action_space.low.tolist() == [-1, -1, -1] and v1.action_space.high.tolist() == [1, 1, 1]
    v0.reset(seed=0, options={"template": "00000", "variant": 0})
    v1.reset(seed=0, options={"template": "00000", "variant": 0})
    _, r0, *_, i0 = v0.step(solution)
    _, r1, *_, i1 = v1.step(solution * 2 - 1)
    assert r0 == r1 == 1.0
    np.testing.assert_allclose(i1["action"], solution, atol=1e-12)
    assert i0["trace"].equals(i1["trace"])
    v1.reset(seed=0)
    assert "outside" in v1.step(np.array([0.0, 0.0, 1.5]))[-1]["invalid_reason"]


def test_program_info_is_small_unless_asked():
    task = {"template": "00000", "variant": 0}
    action = np.asarray(get_template("00000").solution(0), dtype=np.float32) * 2 - 1  # valid: a rollout
    env = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL_V1, **FAST), PROGRAM)
    env.reset(seed=0, options=task)
    info = env.step(action)[-1]
    assert "trace" not in info and "annotation" not in info and info["num_frames"] > 0
    small = pickle.dumps(info)
    assert all(np.isscalar(v) or isinstance(v, (str, np.ndarray)) for v in info.values()), info
    full = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL_V1, **FAST), PROGRAM, info_trace=True)
    full.reset(seed=0, options=task)
    info = full.step(action)[-1]
    assert info["trace"] is not None and set(info["annotation"].patterns) >= {"touch start"}
    assert len(pickle.dumps(info)) > 20 * len(small)


def test_wrapper_and_program_pickle_and_score_the_same():
    env = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL_V1, **FAST), PROGRAM)
    again = pickle.loads(pickle.dumps(env))
    assert again.program.text == env.program.text and again.program.patterns == env.program.patterns
    action = np.array([0.1, 0.4, -0.5], np.float32)
    results = []
    for e in (env, again):
        e.reset(seed=5)
        _, reward, _, _, info = e.step(action)
        results.append((reward, info["program_score"], info["is_success"]))
    assert results[0] == results[1]


def _run(code: str) -> subprocess.CompletedProcess:
    # a fresh interpreter whose __main__ has no file: workers cannot learn our ids from it
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


def test_sb3_subproc_vec_env_with_the_plain_id():
    pytest.importorskip("stable_baselines3")
    out = _run(
        "import simpatterns.envs\n"
        "from stable_baselines3.common.env_util import make_vec_env\n"
        "from stable_baselines3.common.vec_env import SubprocVecEnv\n"
        "venv = make_vec_env('simpatterns/PhyreOneBall-v1', n_envs=2, vec_env_cls=SubprocVecEnv,\n"
        "                    env_kwargs=dict(obs_mode='objects', template='00000', max_steps=120))\n"
        "obs = venv.reset()\n"
        "obs, rewards, dones, infos = venv.step([venv.action_space.sample() for _ in range(2)])\n"
        "print(obs.shape, dones.tolist(), sorted(infos[0])[:2])\n"
        "venv.close()\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0].startswith("(2, 3, 19) [True, True]")


def test_gymnasium_async_vector_env_with_the_plain_id_same_step_autoreset():
    out = _run(
        "import gymnasium as gym, functools\n"
        "import simpatterns.envs\n"
        "from gymnasium.vector import AutoresetMode\n"
        "kw = dict(obs_mode='objects', template='00000', max_steps=120)\n"
        "venv = gym.vector.AsyncVectorEnv([functools.partial(gym.make, 'simpatterns/PhyreOneBall-v1', **kw)] * 2,\n"
        "                                 context='forkserver', autoreset_mode=AutoresetMode.SAME_STEP)\n"
        "venv.reset(seed=0)\n"
        "steps = [venv.step(venv.action_space.sample()) for _ in range(3)]\n"
        "print([bool(s[2].all()) for s in steps])\n"
        "venv.close()\n"
        "vec = gym.make_vec('simpatterns/PhyreOneBall-v1', num_envs=2, vectorization_mode='async', **kw)\n"
        "vec.reset(seed=0); print(vec.step(vec.action_space.sample())[0].shape); vec.close()\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[True, True, True]", "(2, 3, 19)"]


def test_multi_step_episodes_return_their_final_program_score():
    """The rope pays the change of the program's score each step (potential-based): the
    return is the final score, and a step that keeps the score pays 0."""
    program = 'AND(COUNT("bead dragged") >= 3, NEVER("crossing formed"))'
    env = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state", max_episode_steps=6), program)
    rng = np.random.default_rng(0)
    for seed in range(2):
        env.reset(seed=seed)
        rewards, scores, done = [], [], False
        while not done:
            _, r, terminated, truncated, info = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
            rewards.append(r)
            scores.append(info["program_score"])
            done = terminated or truncated
        assert sum(rewards) == pytest.approx(scores[-1], abs=1e-12)
        assert np.allclose(rewards, np.diff([0.0, *scores]), atol=1e-12)
    assert len(set(np.round(scores, 9))) > 1  # the score moved during the episode
