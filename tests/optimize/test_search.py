"""Simulated annealing and random search: budgets, determinism, pools, grids, the bucket scene."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from simpatterns.optimize import AnnealConfig, Objective, RolloutPool, anneal, random_search
from simpatterns.optimize.search import _reflect
from simpatterns.simulators.phyre import SceneBuilder, action_to_index, check_action, quantize_action

# the red ball's own start position: a reward that is smooth in the action and cheap to simulate
TARGET = 'NEARBY_AT("red ball", x=100, y=180, t=0.0, radius=6)'


def empty_scene():
    return SceneBuilder().build(template="empty", require_goal=False)


def half_blocked_scene():
    """A static box filling the left half: many proposals are invalid."""
    B = SceneBuilder()
    B.add_box(128, 250, dynamic=False, left=0, bottom=0).color = "black"
    return B.build(template="blocked", require_goal=False)


def smooth_objective(scene=None) -> Objective:
    return Objective(scene or empty_scene(), program=TARGET, max_steps=1)


def test_anneal_climbs_a_smooth_reward_that_random_search_misses():
    obj = smooth_objective()
    sa = [anneal(obj, 80, seed=k, keep_trace=False) for k in range(5)]
    rs = [random_search(obj, 80, seed=k, keep_trace=False) for k in range(5)]
    # hitting a 6 px disc at random has probability ~0.2% per sample; following the score finds it
    assert sum(r.best_success for r in sa) >= 4
    assert np.mean([r.best_score for r in sa]) > np.mean([r.best_score for r in rs])
    for r in sa:
        if r.best_success:
            x, y = r.best_action[0] * 255, r.best_action[1] * 255
            assert np.hypot(x - 100, y - 180) <= 6 + 1e-9


def test_budget_curve_and_early_stop():
    obj = smooth_objective()
    r = anneal(obj, 30, seed=1, keep_trace=True, stop_on_success=False)
    assert r.samples == r.budget == 30 == len(r.curve) == len(r.evaluations)
    assert np.all(np.diff(r.curve) >= 0)
    assert r.best_score == max(e.score for e in r.evaluations) == r.curve[-1]
    assert r.best_trace is not None and r.best_trace.meta["action"] == r.best_action
    stopped = anneal(obj, 200, seed=2, keep_trace=False)
    assert stopped.best_success and stopped.samples == stopped.first_success < 200


def test_results_depend_on_seed_only_not_on_workers():
    obj = smooth_objective()
    cfg = AnnealConfig(batch_size=4)
    one = anneal(obj, 24, seed=5, config=cfg, workers=1, keep_trace=False, stop_on_success=False)
    two = anneal(obj, 24, seed=5, config=cfg, workers=2, keep_trace=False, stop_on_success=False)
    assert [e.action for e in one.evaluations] == [e.action for e in two.evaluations]
    assert [e.score for e in one.evaluations] == [e.score for e in two.evaluations]
    other = anneal(obj, 24, seed=6, config=cfg, keep_trace=False, stop_on_success=False)
    assert [e.action for e in other.evaluations] != [e.action for e in one.evaluations]
    rs1 = random_search(obj, 16, seed=3, workers=1, keep_trace=False, stop_on_success=False)
    rs2 = random_search(obj, 16, seed=3, workers=2, keep_trace=False, stop_on_success=False)
    assert [e.action for e in rs1.evaluations] == [e.action for e in rs2.evaluations]


def test_objective_pickles_without_its_compiled_program():
    obj = smooth_objective()
    _ = obj.reward_program  # compiled and cached in this process
    clone = pickle.loads(pickle.dumps(obj))
    assert clone._runtime is None
    a = [0.4, 0.7, 0.2]
    assert clone.evaluate(a) == obj.evaluate(a)
    with RolloutPool(obj, workers=2) as pool:
        assert pool.evaluate([a, [0.39, 0.7, 0.2]])[0] == obj.evaluate(a)


def test_rollout_pool_results_do_not_depend_on_workers():
    obj = smooth_objective()
    rng = np.random.default_rng(0)
    batches = [rng.random((5, 3)).tolist(), rng.random((3, 3)).tolist()]
    expected = [[obj.evaluate(a) for a in batch] for batch in batches]
    for workers in (1, 2, 3):
        with RolloutPool(obj, workers=workers) as pool:
            assert [pool.evaluate(batch) for batch in batches] == expected  # one pool serves every batch
    assert expected[0][0].score > 0  # scored by the program, not a default


def test_quantised_search_evaluates_grid_cell_centres_only():
    obj = smooth_objective()
    for search in (anneal, random_search):
        r = search(obj, 25, seed=0, bins=6, keep_trace=False, stop_on_success=False)
        for e in r.evaluations:
            np.testing.assert_allclose(e.action, quantize_action(action_to_index(e.action, 6), 6))


def test_invalid_proposals_are_redrawn_and_counted():
    obj = smooth_objective(half_blocked_scene())
    for search in (anneal, random_search):
        r = search(obj, 20, seed=0, keep_trace=False, stop_on_success=False)
        assert r.samples == 20 and r.invalid_proposals > 0
        assert all(check_action(obj.scene, e.action) is None for e in r.evaluations)


def test_reflect_keeps_steps_inside_the_cube():
    x = np.array([-0.25, 1.3, 0.5, 2.6, -1.9])
    y = _reflect(x, 0.0, 1.0)
    np.testing.assert_allclose(y, [0.25, 0.7, 0.5, 0.6, 0.1])


def test_bad_settings_fail_early():
    with pytest.raises(ValueError, match="schedule"):
        AnnealConfig(schedule="cosine")
    with pytest.raises(ValueError, match="needs a reward program"):
        Objective(empty_scene(), reward="score")
    with pytest.raises(ValueError, match="does not fit"):
        Objective(empty_scene(), program='NEARBY_AT("green ball", x=1, y=1)')
    with pytest.raises(ValueError, match="budget"):
        anneal(smooth_objective(), 0)


def test_linear_and_geometric_schedules_run_from_start_to_end():
    for schedule in ("linear", "geometric"):
        cfg = AnnealConfig(t_start=0.2, t_end=0.01, schedule=schedule)
        assert cfg.temperature(0.0) == pytest.approx(0.2) and cfg.temperature(1.0) == pytest.approx(0.01)
    assert AnnealConfig(step_size=0.2, step_decay=0.5).step(1.0) == pytest.approx(0.1)


def test_bucket_goals_fit_the_scene_and_agree_with_the_distance_criterion():
    from pathlib import Path

    from simpatterns.dsl import RewardProgram
    from simpatterns.envs.scenes import bucket_goal, bucket_program_text, three_buckets

    root = Path(__file__).resolve().parents[2]
    scene = three_buckets()
    names = [b.name for b in scene.bodies]
    assert {"green ball", "black jar 1", "black jar 2", "black jar 3"} <= set(names)
    jars = sorted((b for b in scene.bodies if b.kind == "jar"), key=lambda b: b.center_x)
    assert [b.name for b in jars] == ["black jar 1", "black jar 2", "black jar 3"]
    for k, word in enumerate(("first", "second", "third"), start=1):
        shipped = RewardProgram.load(root / "examples" / "goals" / f"bucket_{word}.rwd")
        assert shipped.canonical_text == RewardProgram.from_text(bucket_program_text(k)).canonical_text
    # find a rollout that lands in bucket 1 with the distance test as a sparse reward,
    # then the dense program must call it a success too
    obj = Objective(scene, reward="goal", goal=bucket_goal(1), stop_when_settled=True)
    r = random_search(obj, 300, seed=0)
    assert r.best_goal_success, "no random action in 300 landed in bucket 1 (expected ~5% each)"
    dense = Objective(scene, program=bucket_program_text(1), goal=bucket_goal(1), stop_when_settled=True)
    score, ok, goal_ok = dense.score_trace(r.best_trace)
    assert ok and goal_ok and score == 1.0
    for k in (2, 3):
        other = Objective(scene, program=bucket_program_text(k), goal=bucket_goal(k), stop_when_settled=True)
        score, ok, goal_ok = other.score_trace(r.best_trace)
        assert not ok and not goal_ok and score < 1.0


def test_optimize_cli(tmp_path):
    from typer.testing import CliRunner

    from simpatterns.cli import app

    runner = CliRunner()
    goal = tmp_path / "goal.rwd"
    goal.write_text(TARGET + "\n")
    out = runner.invoke(app, ["optimize", "--template", "00000", "--variant", "0", "--goal", str(goal),
                              "--rollouts", "12", "--seed", "3", "--out", str(tmp_path / "new" / "r.json"),
                              "--gif", str(tmp_path / "pics" / "best.gif"), "--keep-going"])
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "new" / "r.json").read_text())  # missing folders are created
    assert data["samples"] == 12 and len(data["curve"]) == 12 and data["reward"] == "score"
    assert (tmp_path / "pics" / "best.gif").stat().st_size > 0
    (tmp_path / "taken").write_text("")
    bad = runner.invoke(app, ["optimize", "--template", "00000", "--rollouts", "2", "--out",
                              str(tmp_path / "taken" / "r.json")])
    assert bad.exit_code == 2 and "error:" in bad.output and "taken" in bad.output
    sparse = runner.invoke(app, ["optimize", "--template", "00000", "--rollouts", "3", "--method", "random"])
    assert sparse.exit_code == 0, sparse.output
    bad = runner.invoke(app, ["optimize", "--template", "00000", "--sparse", "--rollouts", "3"])
    assert bad.exit_code == 2 and "--sparse needs --goal" in bad.output
    wrong = tmp_path / "wrong.rwd"
    wrong.write_text('NEARBY_AT("purple jar", x=1, y=1)')
    bad = runner.invoke(app, ["optimize", "--scene", "buckets", "--goal", str(wrong), "--rollouts", "3"])
    assert bad.exit_code == 1 and "purple jar" in bad.output


def test_stop_on_goal_stops_at_the_first_sample_meeting_the_goal():
    # a goal the dense reward does not define: the red ball starts in the right half
    obj = Objective(empty_scene(), program=TARGET, max_steps=1, goal=_right_half)
    full = anneal(obj, 30, seed=4, keep_trace=False, stop_on_success=False)
    first = next(k for k, e in enumerate(full.evaluations, start=1) if e.goal_success)
    stopped = anneal(obj, 30, seed=4, keep_trace=False, stop_on_success=False, stop_on_goal=True)
    assert stopped.samples == first < 30
    assert [e.action for e in stopped.evaluations] == [e.action for e in full.evaluations[:first]]
    rs = random_search(obj, 30, seed=4, batch_size=1, keep_trace=False, stop_on_success=False, stop_on_goal=True)
    assert rs.evaluations[-1].goal_success and not any(e.goal_success for e in rs.evaluations[:-1])


def _right_half(trace) -> bool:
    return bool(trace.position[0, trace.body_index("red ball"), 0] > 128)
