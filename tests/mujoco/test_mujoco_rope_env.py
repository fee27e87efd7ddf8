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
from simpatterns.trace import Trace

ID = "simpatterns.envs:simpatterns/KnotRope-v0"


PROGRAM = 'AND(COUNT("bead dragged") >= 2, NEVER("crossing formed"))'


def check_wrapped_env(env: gym.Env, **kw) -> None:
    """`check_env` on a program-reward wrapper, every warning an error but the
    one that says a wrapper is being checked."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*different from the unwrapped")
        check_env(env, **kw)


@pytest.mark.parametrize("obs_mode", ["rgb", "state"])
def test_check_env(obs_mode):
    env = gym.make(KNOT_ROPE, obs_mode=obs_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no checker warnings either
        check_env(env.unwrapped)
    assert env.spec.max_episode_steps == 50
    shape = (128, 256, 3) if obs_mode == "rgb" else (2, 100, 3)
    assert env.observation_space.shape == shape and env.action_space.shape == (6,)
    # the program reward's wrapper around the bare env (the trace in info switched on)
    wrapped = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode=obs_mode).unwrapped, PROGRAM)
    check_wrapped_env(wrapped)
    assert wrapped.unwrapped.info_trace


@pytest.mark.parametrize("render_mode", ["rgb_array", "ansi"])
def test_check_env_render_modes(render_mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(KNOT_ROPE, obs_mode="state", render_mode=render_mode).unwrapped, skip_render_check=False)
    check_wrapped_env(RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state", render_mode=render_mode).unwrapped,
                                           PROGRAM), skip_render_check=False)


def test_options_in_groups_or_flat():
    from simpatterns.envs import KnotRopeEnv, RopeObservationOptions, RopeTaskOptions

    grouped = KnotRopeEnv(task=RopeTaskOptions(task="tie", crossings=(2, 3)),
                          observation=RopeObservationOptions(obs_mode="state"))
    flat = gym.make(KNOT_ROPE, task="tie", crossings=[2, 3], obs_mode="state").unwrapped
    assert grouped.task_options == flat.task_options and grouped.obs_options == flat.obs_options
    assert grouped.task.goal_crossings == (2, 3) and grouped.observation_space.shape == (2, 100, 3)
    # a flat keyword overrides the same field of a group given beside it
    mixed = KnotRopeEnv(task=RopeTaskOptions(task="tie", crossings=3), crossings=4)
    assert mixed.task_options.task == "tie" and mixed.task.goal_crossings == (4,)


@pytest.mark.parametrize("kw, message", [
    (dict(obs_mod="state"), "KnotRopeEnv got an unknown option 'obs_mod' (did you mean 'obs_mode'?)"),
    (dict(reward_mode="program"), "KnotRopeEnv has no option 'reward_mode': a reward program is added with "
                                  "RewardProgramWrapper"),
    (dict(reward_program=PROGRAM), "KnotRopeEnv has no option 'reward_program'"),
    (dict(program_reward="success"), "KnotRopeEnv has no option 'program_reward'"),
])
def test_unknown_or_moved_keywords_fail_in_one_line(kw, message):
    with pytest.raises(TypeError) as err:
        gym.make(KNOT_ROPE, **kw)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("kw, message", [
    (dict(task="untie"), "task must be one of"),
    (dict(split="test"), "split must be one of"),
    (dict(obs_mode="pixels"), "obs_mode must be one of"),
    (dict(render_mode="video"), "render_mode must be one of"),
    (dict(record_stride=0), "record_stride must be >= 1"),
    (dict(record_stride=5), "record_stride must divide the frame skip \\(24 physics steps per action\\), got 5"),
    (dict(image_size=8), "image_size must be >= 16"),
])
def test_bad_option_values_fail_in_one_line(kw, message):
    from simpatterns.envs import KnotRopeEnv

    with pytest.raises(ValueError, match=message) as err:
        KnotRopeEnv(**kw)  # not gym.make, which warns first about an unknown render mode
    assert "\n" not in str(err.value)


def test_info_bodies_trace_and_annotation(tmp_path):
    env = gym.make(KNOT_ROPE, obs_mode="state", annotate=True, info_trace=True)
    _, info = env.reset(seed=0)
    bodies, goal = info["bodies"], info["goal"]
    assert len(bodies) == 100 and len(set(bodies)) == 100
    _, _, _, _, info = env.step(np.array([0.3, 0.2, 0.0, 0.0, 0.0, 1.0], np.float32))
    trace, ann = info["trace"], info["annotation"]
    assert list(trace.names) == list(bodies) and trace.position.shape[1:] == (100, 3)
    assert trace.num_frames == 24 // 8 + 1  # one push of 24 physics steps, a frame every 8, and the start
    assert set(ann.patterns) == set(env.unwrapped.library.labels) and ann.num_frames == trace.num_frames
    assert ann.events_of("bead dragged")  # the push is seen
    assert info["annotation_text"].startswith("Rope loop of 100 beads")
    # the episode's trace is a valid file: its goal in words is not the PHYRE goal pair
    trace.save(tmp_path / "episode.npz")
    again = Trace.load(tmp_path / "episode.npz")
    assert again.meta["task_goal"] == goal and "goal" not in again.meta
    assert np.array_equal(again.position, trace.position)
    plain = gym.make(KNOT_ROPE, obs_mode="state")
    plain.reset(seed=0)
    _, _, _, _, info = plain.step(np.zeros(6, np.float32))
    assert not {"trace", "annotation", "annotation_text"} & set(info)


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


def test_ansi_render_shows_both_codes_and_the_events():
    env = gym.make(KNOT_ROPE, obs_mode="state", render_mode="ansi", task="unknot", crossings=2)
    _, info = env.reset(seed=2)
    env.step(np.array([0.3, 0.2, 0.0, 0.0, 0.0, 1.0], np.float32))
    text = env.render()
    assert "Goal Gauss code: no crossings" in text and "Gauss code now:" in text
    assert "Timeline" in text and "bead dragged" in text
    assert "Last action: force (0.000, 0.000, 0.200) N on bead" in text


def test_rgb_render_is_the_observation():
    env = gym.make(KNOT_ROPE, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    img = env.render()
    assert img.shape == (128, 256, 3) and np.array_equal(img, obs)
    assert img[:, :128].any() and img[:, 128:].any()


def test_program_rewards_over_rope_patterns():
    env = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state", task="unknot", crossings=2), PROGRAM,
                               info_trace=True)
    assert env.program.library is env.unwrapped.library  # the env's own library: the 3D one
    _, info0 = env.reset(seed=0)
    push = np.array([0.5, 0.0, 0.0, 1.0, 0.0, 0.0], np.float32)
    _, r1, term1, _, info1 = env.step(push)
    assert 0.0 <= r1 <= 1.0 and set(info1) >= {"program_score", "task_success", "trace", "annotation",
                                               'reward/COUNT("bead dragged") >= 2'}
    assert set(info1["annotation"].patterns) >= {"bead dragged", "crossing formed"}
    drags = len(info1["annotation"].events_of("bead dragged"))
    assert info1['reward/COUNT("bead dragged") >= 2'] == (1.0 if drags >= 2 else pytest.approx(1 / (1 + np.log(3 - drags))))
    # the program's success does not end the episode unless asked; the Gauss code test stays in task_success
    assert info1["is_success"] == (r1 == 1.0) and not term1 and not info1["task_success"]
    _, r2, _, _, info2 = env.step(np.array([-0.5, 0.0, 0.0, -1.0, 0.0, 0.0], np.float32))
    # each step pays the change of the episode's score: the return so far is the score now
    assert r1 + r2 == pytest.approx(info2["program_score"]) and info2["trace"].num_frames > info1["trace"].num_frames
    assert len(info2["annotation"].events_of("bead dragged")) >= drags  # the episode's trace so far is scored
    stop = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state", task="unknot", crossings=2), PROGRAM,
                                reward="success", terminate_on_success=True)
    stop.reset(seed=0)
    _, s1, t1, _, i1 = stop.step(push)
    assert s1 == float(info1["is_success"]) and t1 == info1["is_success"] and i1["program_score"] == r1


def test_wrapper_checks_the_programs_bodies_against_the_rope():
    env = RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state"),
                               'EVENT("bead dragged", {"object": "green ball"})')
    with pytest.raises(ValueError, match="does not fit the unknot task") as err:
        env.reset(seed=0)
    assert "green ball" in str(err.value)
    with pytest.raises(Exception, match="bounce"):  # the PHYRE library's labels are not the rope's
        RewardProgramWrapper(gym.make(KNOT_ROPE, obs_mode="state"), 'EVENT("sliding contact")')


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


def test_vector_env_of_wrapped_ropes():
    def make():
        return RewardProgramWrapper(gym.make(ID, obs_mode="state"), PROGRAM, reward="score", info_trace=True)

    venv = gym.vector.SyncVectorEnv([make, make])
    try:
        venv.reset(seed=[0, 1])
        _, r, _, _, info = venv.step(np.tile(np.array([0.5, 0.0, 0.0, 1.0, 0.0, 0.0], np.float32), (2, 1)))
        assert r.shape == (2,) and np.array_equal(r, info["program_score"]) and "task_success" in info
        assert all(t.num_frames == 4 for t in info["trace"])
    finally:
        venv.close()


def _rope_now(world) -> np.ndarray:
    """The beads where the rope is: a copy of the data brought to its state with mj_forward."""
    import mujoco

    c = mujoco.MjData(world.model)
    mujoco.mj_copyData(c, world.model, world.data)
    mujoco.mj_forward(world.model, c)
    return c.xpos[world.bead_bodies]


def test_the_env_observes_the_rope_as_it_is_and_the_trace_ends_there():
    env = gym.make(KNOT_ROPE, obs_mode="state", info_trace=True)
    obs, info = env.reset(seed=4)
    world = env.unwrapped.world
    rng = np.random.default_rng(5)
    moved = 0.0
    for _ in range(6):
        action = rng.uniform(-1, 1, 6)
        before = _rope_now(world)
        bead = int(np.argmin(((before - world.point_of(action[:3])) ** 2).sum(axis=1)))
        obs, _, terminated, truncated, info = env.step(action)
        now = _rope_now(world)
        moved = max(moved, float(np.abs(now - before).max()))
        assert info["bead"] == bead  # snapped on the rope as it was when the action came
        assert np.array_equal(obs[0], (now - now.mean(axis=0)).astype(np.float32))
        assert info["gauss_code"] == diagram(now).code.text
        trace = info["trace"]
        beads = trace.meta["ropes"][0]["bodies"]
        assert np.array_equal(trace.position[-1, beads], now)  # the last frame is what info describes
        assert diagram(trace.position[-1, beads]).code.text == info["gauss_code"]
        if terminated or truncated:
            break
    assert moved > 1e-3
