"""PhyreOneBall-v0: Gymnasium compliance, determinism, vector envs, invalid actions, options, rewards."""

from __future__ import annotations

import functools
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.envs import ENV_IDS, PHYRE_ONE_BALL, RewardProgramWrapper, register_envs
from simpatterns.envs.observation import OBJECT_COLUMNS, SEMANTIC_CHANNELS
from simpatterns.simulators.phyre import SceneBuilder, get_template

FAST = dict(template="00000", max_steps=240)  # 4 s rollouts keep the suite fast
# one goal-touch of 00000's balls gives these patterns; the program mixes events and positions
PROGRAM = """AND(
    EVENT("collision start", {"object_a": "green ball", "object_b": "ground"}),
    NEARBY_AT("green ball", target="blue ball", t=1.0, radius=30),
    TOUCHING("green ball", "blue ball", t=1.0),
)"""


def make(**kw) -> gym.Env:
    return gym.make(PHYRE_ONE_BALL, **{**FAST, **kw})


def wrapped(program: str = PROGRAM, reward: str = "score", invalid: str = "zero", **kw) -> gym.Env:
    return RewardProgramWrapper(make(**kw), program, reward, info_trace=True, invalid=invalid)  # tests read the trace


def check_wrapped_env(env: gym.Env, **kw) -> None:
    """`check_env` on a program-reward wrapper, every warning an error but the
    one that says a wrapper is being checked."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*is out of date")  # v0 is tested on purpose
        warnings.filterwarnings("ignore", message=".*different from the unwrapped")
        check_env(env, **kw)


def solution(variant: int = 0) -> np.ndarray:
    return np.asarray(get_template("00000").solution(variant), dtype=np.float32)


def test_registered_without_time_limit_and_idempotent():
    register_envs()
    register_envs()
    assert set(ENV_IDS) <= set(gym.registry)
    env = make()
    assert env.spec.max_episode_steps is None  # the one step ends the episode itself
    _, info = env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(solution())
    assert terminated and not truncated


def test_make_by_module_prefix_in_fresh_interpreter():
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('simpatterns.envs:simpatterns/PhyreOneBall-v0', template='00000', max_steps=10)\n"
        "obs, info = env.reset(seed=1)\n"
        "print(obs.shape, env.spec.max_episode_steps)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(256,", "256,", "3)", "None"]


@pytest.mark.parametrize("obs_mode", ["rgb", "semantic", "objects"])
def test_check_env_every_obs_mode(obs_mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings count as failures
        warnings.filterwarnings("ignore", message=".*is out of date")  # v0 is tested on purpose
        check_env(make(obs_mode=obs_mode).unwrapped)
        check_env(make(obs_mode=obs_mode, action_bins=8).unwrapped)


@pytest.mark.parametrize("render_mode", ["rgb_array", "rgb_array_list", "ansi"])
def test_check_env_render_modes_and_program_reward(render_mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*is out of date")  # v0 is tested on purpose
        env = make(obs_mode="semantic", render_mode=render_mode)
        check_env(env.unwrapped, skip_render_check=False)
    # the program reward's wrapper around the bare env (the trace in info switched on)
    check_wrapped_env(RewardProgramWrapper(make(obs_mode="semantic", render_mode=render_mode).unwrapped, PROGRAM),
                      skip_render_check=False)


def test_named_scene_env_passes_check_env():
    from simpatterns.envs.scenes import bucket_program_text

    env = gym.make(PHYRE_ONE_BALL, scene="buckets", obs_mode="objects", max_steps=120)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*is out of date")  # v0 is tested on purpose
        check_env(env.unwrapped)
    check_wrapped_env(RewardProgramWrapper(env.unwrapped, bucket_program_text(1)))


def _rollout(env: gym.Env, seed: int, action) -> tuple:
    obs0, info0 = env.reset(seed=seed)
    obs1, r, term, trunc, info1 = env.step(action)
    return obs0, info0, obs1, r, term, info1


def test_reset_seed_reproduces_episode_exactly():
    env = make(info_trace=True)
    a = _rollout(env, 7, solution())
    _rollout(env, 8, solution())  # another episode in between must not matter
    b = _rollout(env, 7, solution())
    assert a[1] == b[1]
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[2], b[2])
    assert a[3] == b[3]
    assert a[5]["trace"].equals(b[5]["trace"])
    # a fresh env with the same seed picks the same variant; other seeds spread over variants
    assert _rollout(make(), 7, solution())[1] == a[1]
    variants = {make().reset(seed=s)[1]["variant"] for s in range(8)}
    assert len(variants) >= 4


def _vector_expected(kw: dict, seeds: list[int], actions: np.ndarray):
    out = []
    for s, a in zip(seeds, actions):
        env = wrapped(**kw)
        out.append(_rollout(env, s, a))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs_match_sequential_runs(mode):
    kw = dict(obs_mode="semantic")
    seeds = [3, 4, 5, 6]
    actions = np.stack([solution(0), np.array([0.1, 0.9, 0.2], np.float32),
                        np.array([0.5, 0.5, 0.9], np.float32), np.array([0.8, 0.6, 0.3], np.float32)])
    # the program reward is the wrapper, applied in each worker (a picklable partial of the class)
    venv = gym.make_vec(PHYRE_ONE_BALL, num_envs=len(seeds), vectorization_mode=mode,
                        vector_kwargs={"context": "forkserver"} if mode == "async" else {},
                        wrappers=[functools.partial(RewardProgramWrapper, program=PROGRAM, info_trace=True)], **FAST, **kw)
    try:
        obs0, info0 = venv.reset(seed=seeds)
        obs1, rew, term, trunc, info1 = venv.step(actions)
    finally:
        venv.close()
    expected = _vector_expected(kw, seeds, actions)
    for i, (e_obs0, e_info0, e_obs1, e_r, e_term, e_info1) in enumerate(expected):
        np.testing.assert_array_equal(obs0[i], e_obs0)
        assert info0["variant"][i] == e_info0["variant"]
        np.testing.assert_array_equal(obs1[i], e_obs1)
        assert rew[i] == pytest.approx(e_r, abs=0)
        assert bool(term[i]) == e_term
        assert bool(info1["is_success"][i]) == e_info1["is_success"]
        assert info1["trace"][i].equals(e_info1["trace"])  # the trace travels in info, also from workers
        for key in e_info1:
            if key.startswith("reward/"):
                assert info1[key][i] == e_info1[key]
    assert len({float(r) for r in rew}) > 1  # the four episodes really differ


def test_invalid_actions_end_the_episode_with_a_reason():
    env = wrapped()
    env.reset(seed=0)
    scene = env.unwrapped.scene
    green = next(b for b in scene.bodies if b.name == "green ball")
    on_green = np.array([green.center_x / 255, green.center_y / 255, 0.3], np.float32)
    cases = {
        "overlaps green ball": on_green,
        "outside [0, 1]": np.array([1.5, 0.5, 0.5], np.float32),
        "not finite": np.array([np.nan, 0.5, 0.5], np.float32),
        "extends outside the scene": np.array([0.0, 0.5, 1.0], np.float32),
    }
    for expect, action in cases.items():
        env.reset(seed=0)
        obs, r, term, trunc, info = env.step(action)
        assert expect in info["invalid_reason"], (expect, info["invalid_reason"])
        assert r == 0.0 and term and not info["is_success"]
        assert env.observation_space.contains(obs)
        assert info["trace"] is None and info["annotation"] is None and info["program_score"] == 0.0
        assert [v for k, v in info.items() if k.startswith("reward/")] == [0.0, 0.0, 0.0]
    disc = make(action_bins=4)
    disc.reset(seed=0)
    _, r, term, _, info = disc.step(64)
    assert "outside [0, 64)" in info["invalid_reason"] and r == 0.0 and term


def test_an_invalid_action_is_scored_as_the_world_left_alone():
    from simpatterns.dsl import RewardProgram
    from simpatterns.simulators.phyre import simulate

    program = 'TOUCHING("green ball", "blue ball", hold=0.18)'
    env = RewardProgramWrapper(make(), program)  # the default: invalid="left-alone"
    env.reset(seed=0, options={"template": "00000", "variant": 3})
    scene = env.unwrapped.scene
    _, r, term, _, info = env.step(np.array([1.5, 0.5, 0.5], np.float32))
    assert info["invalid_reason"] and term and "trace" not in info
    # recomputed here: the scene's rollout without the red ball, under the env's simulation settings
    alone = simulate(scene, None, **env.unwrapped.sim_kwargs).trace
    expect = RewardProgram.coerce(program, None).evaluate(None, alone)
    assert 0.0 < r == pytest.approx(expect.score) == info["program_score"]
    assert not info["is_success"]
    # the task's left-alone rollout is simulated, checked and scored once, however often it is asked for
    assert env.unwrapped.left_alone_trace() is env.unwrapped.left_alone_trace()
    calls = []
    for name in ("check_bodies", "evaluate"):
        real = getattr(env.program, name)
        setattr(env.program, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
    env.reset(seed=0, options={"template": "00000", "variant": 3})
    _, r2, _, _, info2 = env.step(np.array([1.5, 0.5, 0.5], np.float32))
    assert calls == [] and r2 == r and info2["program_score"] == info["program_score"]
    zero = RewardProgramWrapper(make(), program, invalid="zero")
    zero.reset(seed=0, options={"template": "00000", "variant": 3})
    assert zero.step(np.array([1.5, 0.5, 0.5], np.float32))[1] == 0.0
    # a program about the action's own ball has no left-alone world to grade: 0
    about_red = RewardProgramWrapper(make(), 'TOUCHING("red ball", "green ball")')
    about_red.reset(seed=0, options={"template": "00000", "variant": 3})
    assert about_red.step(np.array([1.5, 0.5, 0.5], np.float32))[1] == 0.0
    with pytest.raises(ValueError, match="left-alone"):
        RewardProgramWrapper(make(), program, invalid="none")


def test_gain_pays_success_first_and_below_it_what_the_action_changed():
    from simpatterns.dsl import RewardProgram
    from simpatterns.simulators.phyre import simulate

    program = 'TOUCHING("green ball", "blue ball", hold=0.18)'
    env = RewardProgramWrapper(make(max_steps=1000), program, reward="gain")
    env.reset(seed=0, options={"template": "00000", "variant": 0})
    alone = simulate(env.unwrapped.scene, None, **env.unwrapped.sim_kwargs).trace  # recomputed here
    baseline = RewardProgram.coerce(program, None).evaluate(None, alone).score
    assert 0.0 < baseline < 1.0
    paid = {}
    for name, action in (("solved", solution()), ("near miss", solution() + np.float32([0.05, 0, 0])),
                         ("invalid", np.array([1.5, 0.5, 0.5], np.float32))):
        env.reset(seed=0, options={"template": "00000", "variant": 0})
        _, paid[name], term, _, info = env.step(action)
        assert term and info["left_alone_score"] == pytest.approx(baseline)
        assert info["is_success"] == (name == "solved")
        if name != "solved":
            assert paid[name] == pytest.approx(info["program_score"] - baseline)
    assert paid["solved"] == 1.0 and paid["invalid"] == 0.0
    assert paid["near miss"] > 0.0  # the ball came closer than doing nothing
    # knocking the goal pair further apart than doing nothing leaves them pays 0, not less
    from simpatterns.envs.scenes import task_program_text
    from simpatterns.simulators.phyre import load_scene

    apart = RewardProgramWrapper(make(template="00004", max_steps=1000), task_program_text(load_scene("00004", 2)),
                                 reward="gain")
    apart.reset(seed=0, options={"template": "00004", "variant": 2})
    _, r, _, _, info = apart.step(np.float32([0.43, 0.844, 0.288]))  # the pair ends further apart
    assert not info["invalid_reason"] and info["program_score"] < info["left_alone_score"] and r == 0.0
    # a program about the action's own ball has no left-alone world: the gain is the score
    about_red = RewardProgramWrapper(make(max_steps=1000), 'NEARBY_AT("red ball", target="green ball")',
                                     reward="gain")
    about_red.reset(seed=0, options={"template": "00000", "variant": 0})
    _, r, _, _, info = about_red.step(solution() + np.float32([0.05, 0, 0]))
    assert info["left_alone_score"] == 0.0 and r == info["program_score"] > 0.0


def test_malformed_actions_and_misuse_raise_clear_errors():
    env = make().unwrapped
    with pytest.raises(gym.error.ResetNeeded):
        env.step(solution())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        env.step(np.zeros(2))
    env.reset(seed=0)
    env.step(solution())
    with pytest.raises(gym.error.ResetNeeded):
        env.step(solution())
    disc = make(action_bins=4).unwrapped
    disc.reset(seed=0)
    with pytest.raises(ValueError, match="integer"):
        disc.step(1.5)
    with pytest.raises(TypeError, match="RewardProgramWrapper"):
        make(reward_mode="program")
    with pytest.raises(ValueError, match="no shipped variants|variants"):
        gym.make(PHYRE_ONE_BALL, template="00000", variant=10_000)
    with pytest.raises(ValueError, match="does not fit the scene 00000:"):
        wrapped('NEARBY_AT("purple jar", x=1, y=1)').reset(seed=0)


def test_discrete_actions_are_grid_cell_centres():
    from simpatterns.simulators.phyre import quantize_action

    env = make(action_bins=5, info_trace=True)
    env.reset(seed=2)
    _, _, _, _, info = env.step(np.int64(3 + 5 * 4 + 25 * 1))
    np.testing.assert_allclose(info["action"], quantize_action(3 + 5 * 4 + 25, 5))
    np.testing.assert_allclose(info["trace"].meta["action"], [0.7, 0.9, 0.3])


def test_options_choose_the_task():
    env = make()
    _, info = env.reset(seed=0, options={"template": "00000", "variant": 3})
    assert (info["template"], info["variant"]) == ("00000", 3)
    _, info = env.reset(seed=0, options={"scene": "buckets"})
    assert info["template"] == "buckets" and env.unwrapped.scene.goal is None
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"varient": 3})
    with pytest.raises(ValueError, match="one of scene, template or tasks"):
        make(tasks=[("00000", 1)])
    tasks = gym.make(PHYRE_ONE_BALL, tasks=[("00000", 1), "00000:2"], max_steps=10)
    seen = {tasks.reset(seed=s)[1]["variant"] for s in range(12)}
    assert seen == {1, 2}


def test_program_reward_equals_reward_eval_cli(tmp_path):
    from typer.testing import CliRunner

    from simpatterns.cli import app

    env = wrapped(max_steps=1000)
    rows = []
    for k, action in enumerate([solution(0), np.array([0.2, 0.8, 0.5], np.float32)]):
        env.reset(seed=0, options={"template": "00000", "variant": 0})
        _, r, _, _, info = env.step(action)
        path = tmp_path / f"t{k}.npz"
        info["trace"].save(path)
        rows.append((r, info, path))
    program = tmp_path / "goal.rwd"
    program.write_text(PROGRAM)
    out = CliRunner().invoke(app, ["reward", "eval", str(program), *[str(p) for _, _, p in rows], "--json"])
    assert out.exit_code == 0, out.output
    import json

    results = [json.loads(line) for line in out.output.splitlines() if line.startswith("{")]
    assert len(results) == 2
    for (r, info, _), res in zip(rows, results):
        assert r == res["score"] == info["program_score"]
        assert info["is_success"] == res["success"]
        assert [info[f"reward/{c['text']}"] for c in res["clauses"]] == [c["score"] for c in res["clauses"]]
    assert rows[0][1]["is_success"] and not rows[1][1]["is_success"]  # one success, one partial


def test_wrapper_pays_the_programs_evaluation_of_the_rollout_on_every_template():
    """Reward and info of the wrapped step equal the program evaluated on the same rollout simulated
    directly (what ``simpatterns reward eval`` computes), for every template's first variant: a touch
    program (contacts at the horizon, events, NEVER) and a distance one, both running through the
    wrapper's caches (one compiled program, scene views and annotator shared across templates), and
    the task's own program (it reads no pattern: its annotation runs no detector)."""
    from pathlib import Path

    from simpatterns.dsl import RewardProgram
    from simpatterns.envs.scenes import task_program_text
    from simpatterns.simulators.phyre import TEMPLATES, simulate

    goals = Path(__file__).resolve().parents[2] / "examples" / "goals"
    tasks = [(t, 0) for t in TEMPLATES if TEMPLATES[t].num_variants]
    assert len(tasks) == 25
    sim = dict(max_steps=300)  # short rollouts: the equality, not the physics, is under test
    envs = [RewardProgramWrapper(gym.make(PHYRE_ONE_BALL, tasks=tasks, obs_mode="objects", **sim), path)
            for path in (goals / "a01_touch_at_end_red_never_green.rwd", goals / "a06_near_miss.rwd")]
    for t, v in tasks:
        template = get_template(t)
        action = np.asarray(template.solution(v), dtype=np.float32)
        trace = simulate(template.variant_scene(v), action, max_steps=300).trace
        assert trace is not None
        own = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL, template=t, variant=v, obs_mode="objects", **sim),
                                   task_program_text(template.variant_scene(v), max_steps=300))
        for env in (*envs, own):
            program: RewardProgram = env.program
            want = program.evaluate(None, trace)
            env.reset(options={"template": t, "variant": v})
            _, reward, _, _, info = env.step(action)
            assert reward == info["program_score"] == want.score, (t, program.text)
            assert info["is_success"] == want.success and info["program_determined"] == want.determined
            assert [info[f"reward/{c}"] for c in program.clauses] == [c.score for c in want.clauses]
            assert info["task_success"] == trace.success and "trace" not in info


def test_wrapper_info_and_the_annotation_it_reads():
    from simpatterns.annotation import Annotation

    plain = wrapped()
    texted = wrapped(render_mode="ansi")  # the env annotates with the whole library: the wrapper reuses it
    for action in (solution(0), np.array([0.3, 0.7, 0.4], np.float32)):
        _, info0 = plain.reset(seed=1)
        assert "red ball" in info0["bodies"] and "green ball" in info0["bodies"]
        _, r1, _, _, i1 = plain.step(action)
        texted.reset(seed=1)
        _, r2, _, _, i2 = texted.step(action)
        assert r1 == r2 == i1["program_score"] and i1["is_success"] == i2["is_success"]
        assert {k: v for k, v in i1.items() if k.startswith("reward/")} == \
            {k: v for k, v in i2.items() if k.startswith("reward/")}
        assert "task_success" in i1 and i1["trace"].num_frames == i1["num_frames"]
        # the program reads one pattern: only it and its dependencies are annotated
        assert isinstance(i1["annotation"], Annotation) and "collision start" in i1["annotation"].patterns
        assert len(i1["annotation"].patterns) < len(i2["annotation"].patterns)
        assert i2["annotation"].events_of("collision start") == i1["annotation"].events_of("collision start")
    with pytest.raises(TypeError, match="info_trace"):
        RewardProgramWrapper(gym.make("CartPole-v1"), PROGRAM)


def test_program_success_mode_is_binary_and_sparse_is_task_success():
    succ = wrapped(reward="success")
    sparse = make()
    for action in (solution(0), np.array([0.3, 0.7, 0.4], np.float32)):
        succ.reset(seed=0, options={"template": "00000", "variant": 0})
        sparse.reset(seed=0, options={"template": "00000", "variant": 0})
        _, r1, _, _, i1 = succ.step(action)
        _, r2, _, _, i2 = sparse.step(action)
        assert r1 in (0.0, 1.0) and r1 == float(i1["is_success"])
        assert r2 == float(i2["task_success"])
    with pytest.raises(ValueError, match="score"):
        wrapped(reward="dense")


def test_options_come_in_groups_or_as_flat_keywords():
    from simpatterns.envs import ObservationOptions, PhyreOneBallEnv, RenderOptions, SimulationOptions, TaskOptions

    grouped = PhyreOneBallEnv(task=TaskOptions(template="00000", variant=2),
                              simulation=SimulationOptions(max_steps=240),
                              observation=ObservationOptions(obs_mode="objects", max_objects=8),
                              rendering=RenderOptions(render_mode="ansi", text_budget=500))
    flat = gym.make(PHYRE_ONE_BALL, template="00000", variant=2, max_steps=240, obs_mode="objects", max_objects=8,
                    render_mode="ansi", text_budget=500)
    for env in (grouped, flat.unwrapped):
        assert env.task_options == TaskOptions(template="00000", variant=2)
        assert env.sim_options.max_steps == 240 and env.obs_options.max_objects == 8
        assert env.render_mode == "ansi" and env.render_options.annotates and env.render_options.text_budget == 500
        assert env.observation_space.shape == (8, 19)
    a = _rollout(grouped, 0, solution(2))
    b = _rollout(flat, 0, solution(2))
    np.testing.assert_array_equal(a[2], b[2])
    assert a[3] == b[3] and a[5]["annotation_text"] == b[5]["annotation_text"]
    # a flat keyword overrides the same field of a group given beside it (gym.make adds render_mode so)
    both = PhyreOneBallEnv(observation=ObservationOptions(obs_mode="objects", max_objects=8), obs_mode="semantic",
                           rendering=RenderOptions(render_mode="ansi"), render_mode="rgb_array", template="00000")
    assert both.obs_options == ObservationOptions(obs_mode="semantic", max_objects=8)
    assert both.render_mode == "rgb_array" and not both.render_options.annotates


def test_bad_options_fail_with_one_line_naming_them():
    from simpatterns.envs import ObservationOptions, PhyreOneBallEnv, TaskOptions

    def one_line(exc_type, match, **kw):
        with pytest.raises(exc_type, match=match) as err:
            gym.make(PHYRE_ONE_BALL, **kw)
        assert "\n" not in str(err.value)

    one_line(TypeError, r"unknown option 'obs_mod' \(did you mean 'obs_mode'\?\)", obs_mod="rgb")
    one_line(TypeError, "no option 'reward_program': .*RewardProgramWrapper", reward_program=PROGRAM)
    one_line(ValueError, "obs_mode must be one of", obs_mode="pixels")
    with pytest.raises(ValueError, match="render_mode must be one of"):
        PhyreOneBallEnv(render_mode="video")
    one_line(ValueError, "action_bins must be a positive integer", action_bins=0)
    one_line(ValueError, "max_steps and stride must be >= 1", max_steps=0)
    one_line(ValueError, "one of scene, template or tasks", template="00000", scene="buckets")
    with pytest.raises(TypeError, match="observation= must be a ObservationOptions"):
        PhyreOneBallEnv(observation=TaskOptions())
    with pytest.raises(ValueError, match="semantic_size"):
        ObservationOptions(semantic_size=4)


def test_ansi_render_is_the_annotation_text_and_rgb_renders_frames():
    env = make(render_mode="ansi")
    env.reset(seed=0)
    before = env.render()
    assert "No action taken yet" in before and "green ball" in before
    _, _, _, _, info = env.step(solution())
    text = env.render()
    assert text == info["annotation_text"]
    assert "Timeline" in text and "red ball" in text
    rgb = make(render_mode="rgb_array")
    rgb.reset(seed=0)
    assert rgb.render().shape == (256, 256, 3)
    frames = make(render_mode="rgb_array_list", render_stride=40)
    frames.reset(seed=0)
    _, _, _, _, info = frames.step(solution())
    out = frames.render()
    assert isinstance(out, list) and len(out) == -(-info["num_frames"] // 40) + (
        (info["num_frames"] - 1) % 40 != 0) and out[0].shape == (256, 256, 3)


def _purpose_built_scene():
    B = SceneBuilder()
    g = B.add("ball", scale=0.1, dynamic=True, center_x=64, bottom=100)
    s = B.add("bar", scale=0.3, dynamic=False, center_x=192, bottom=40)
    B.add("box", scale=0.1, dynamic=True, center_x=200, bottom=150)
    B.add("bar", scale=0.2, dynamic=False, center_x=60, bottom=200)
    B.set_goal(g, s)
    return B.build(template="test")


def test_semantic_grid_channels_follow_roles():
    scene = _purpose_built_scene()
    env = gym.make(PHYRE_ONE_BALL, scene=scene, obs_mode="semantic", semantic_size=256, max_steps=1)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (256, 256, len(SEMANTIC_CHANNELS))
    assert (obs.sum(-1) == 1).all()  # exactly one channel per pixel

    def channel_at(x: float, y: float) -> int:
        return int(obs[int(256 - y), int(x)].argmax())

    g = next(b for b in scene.bodies if b.name == "green ball")
    s = next(b for b in scene.bodies if b.color == "purple")
    c = next(b for b in scene.bodies if b.color == "gray")
    k = next(b for b in scene.bodies if b.color == "black" and b.kind == "bar")
    assert channel_at(g.center_x, g.center_y) == 0  # dynamic goal object
    assert channel_at(s.center_x, s.center_y) == 1  # static goal body
    assert channel_at(c.center_x, c.center_y) == 4  # dynamic confounder
    assert channel_at(k.center_x, k.center_y) == 3  # static confounder
    assert channel_at(128, 250) == 6  # background
    assert obs[..., 5].sum() == 0  # no agent before the action
    obs, *_ = env.step(np.array([0.5, 0.9, 0.2], np.float32))
    assert channel_at(0.5 * 255, 0.9 * 255) == 5


def test_object_features_match_the_trace():
    scene = _purpose_built_scene()
    env = gym.make(PHYRE_ONE_BALL, scene=scene, obs_mode="objects", max_objects=8, max_steps=30, info_trace=True)
    obs, _ = env.reset(seed=0)
    col = {c: k for k, c in enumerate(OBJECT_COLUMNS)}
    assert obs[:, col["present"]].tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    obs, _, _, _, info = env.step(np.array([0.5, 0.9, 0.2], np.float32))
    tr = info["trace"]
    agent = tr.body_index("red ball")
    np.testing.assert_allclose(obs[-1, [col["x"], col["y"]]], tr.position[-1, agent] / 256, rtol=1e-6)
    assert obs[-1, col["role_agent"]] == 1 and obs[-1, col["shape_ball"]] == 1
    green = tr.body_index("green ball")
    row = [b.name for b in tr.bodies if b.role not in ("wall", "agent")].index("green ball")
    np.testing.assert_allclose(obs[row, col["vy"]], tr.velocity[-1, green, 1] / 256, rtol=1e-6)
    assert obs[row, col["role_goal_object"]] == 1
    with pytest.raises(ValueError, match="max_objects"):
        gym.make(PHYRE_ONE_BALL, scene=scene, obs_mode="objects", max_objects=3).reset(seed=0)


def test_the_body_table_matches_the_shipped_scenes():
    from simpatterns.envs.phyre_env import SHIPPED_MAX_BODIES, scene_bodies
    from simpatterns.simulators.phyre import TEMPLATES, load_scene

    assert SHIPPED_MAX_BODIES == {t: max(scene_bodies(load_scene(t, v)) for v in range(TEMPLATES[t].num_variants))
                                  for t in TEMPLATES}


def test_objects_observations_are_sized_for_the_task_set():
    every = gym.make(PHYRE_ONE_BALL, obs_mode="objects")
    assert every.observation_space.shape == (52, 19)  # template 00013 has 51 bodies besides walls
    small = gym.make(PHYRE_ONE_BALL, template="00000", obs_mode="objects")
    assert small.observation_space.shape == (3, 19)
    # the fullest variants of the templates that overflowed a fixed size reset fine, in the space
    for tid in ("00012", "00013", "00016"):
        env = gym.make(PHYRE_ONE_BALL, template=tid, obs_mode="objects")
        for variant in range(0, 100, 9):
            obs, _ = env.reset(seed=variant)
            assert env.observation_space.contains(obs)
    for seed in range(200):  # random tasks over every template
        obs, info = every.reset(seed=seed)
        assert every.observation_space.contains(obs), (seed, info["template"])


def test_the_readme_async_vector_env_snippet_runs():
    import functools

    venv = gym.vector.AsyncVectorEnv(
        [functools.partial(gym.make, "simpatterns.envs:simpatterns/PhyreOneBall-v0", obs_mode="objects")] * 2)
    try:
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 52, 19)
        obs, reward, terminated, truncated, _ = venv.step(venv.action_space.sample())
        assert obs.shape == (2, 52, 19) and terminated.all()
    finally:
        venv.close()
