"""The rope world, the shipped configurations, the tasks and top-down rendering."""

import numpy as np
import pytest

from simpatterns.simulators.mujoco import (
    KnotTask,
    RopeConfig,
    RopeWorld,
    circle_positions,
    diagram,
    generate_configurations,
    is_unknot,
    load_configurations,
)
from simpatterns.simulators.mujoco.rope import bead_colors


def test_rope_config_checks_the_spacing():
    with pytest.raises(ValueError, match="must exceed twice the radius"):
        RopeConfig(spacing=0.01, radius=0.005)


def test_positions_round_trip_and_the_rest_loop():
    w = RopeWorld()
    assert w.num_beads == 100 and w.model.opt.gravity.tolist() == [0.0, 0.0, 0.0]
    assert np.allclose(w.positions(), circle_positions(), atol=1e-4)
    p = circle_positions() * [0.5, 1.0, 1.0] + [0.1, -0.2, 0.05]
    w.set_positions(p)
    assert np.allclose(w.positions(), p, atol=1e-12)
    spacing = np.linalg.norm(np.roll(circle_positions(), -1, axis=0) - circle_positions(), axis=1)
    assert np.allclose(spacing, 0.012, atol=1e-4)


def test_an_action_pushes_the_bead_nearest_the_point():
    w = RopeWorld()
    before = w.positions()
    bead = w.act(np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0]))  # the right edge of the view, force up
    assert bead == 0  # bead 0 sits at angle 0: the rightmost point of the rest loop
    moved = np.linalg.norm(w.positions() - before, axis=1)
    assert int(np.argmax(moved)) == 0 and w.positions()[0, 2] > 0.02
    assert not w.unstable()


def test_recording_covers_the_actions_and_ends_with_the_current_state():
    w = RopeWorld()
    w.start_recording(stride=8)
    for _ in range(3):
        w.act(np.array([0.0, 1.0, 0.0, 0.5, 0.0, 0.0]))
    tr = w.trace()
    assert tr.num_frames == 3 * 24 // 8 + 1
    beads = tr.meta["ropes"][0]["bodies"]
    assert np.allclose(tr.position[-1, beads], w.positions())
    assert tr.meta["rope"]["beads"] == 100


@pytest.mark.parametrize("split", ["train", "eval"])
def test_shipped_configurations_have_their_labelled_crossings(split):
    c = load_configurations(split)
    assert len(c) == 140 and c.meta["seed"] == 17 and c.meta["script"] == "scripts/build_rope_configs.py"
    assert sorted(set(c.crossings.tolist())) == list(range(7))
    assert all((c.crossings == k).sum() == 20 for k in range(7))
    for i in range(len(c)):
        d = diagram(c.positions[i])
        assert d.num_crossings == c.crossings[i] and d.code.text == c.gauss[i]
        assert not d.ambiguous and not d.reprojected
    assert np.allclose(c.positions.mean(axis=1), 0.0, atol=1e-6)


def test_splits_come_from_different_episodes():
    train, evaluation = load_configurations("train"), load_configurations("eval")
    assert not set(train.episode.tolist()) & set(evaluation.episode.tolist())
    for c in (train, evaluation):  # at most one configuration per crossing count per episode
        pairs = list(zip(c.episode.tolist(), c.crossings.tolist()))
        assert len(pairs) == len(set(pairs))


def test_generation_is_reproducible_and_filtered():
    a = generate_configurations(5, per_level=4, levels=range(3), max_episodes=12)
    b = generate_configurations(5, per_level=4, levels=range(3), max_episodes=12)
    for split in ("train", "eval"):
        assert np.array_equal(a[split].positions, b[split].positions)
        assert a[split].meta["seed"] == 5
        for i in range(len(a[split])):
            pts = a[split].positions[i]
            assert diagram(pts).num_crossings == a[split].crossings[i] and is_unknot(pts)


def test_tasks_draw_starts_and_goals_with_their_crossings():
    c = load_configurations("train")
    rng = np.random.default_rng(0)
    for name, crossings, start_n, goal_n in (("unknot", 3, 3, 0), ("tie", 2, 0, 2), ("convert", 4, 3, 4)):
        task = KnotTask.make(name, crossings)
        for _ in range(10):
            s, g = task.sample(c, rng)
            assert c.crossings[s] == start_n and c.crossings[g] == goal_n
            if name == "convert":
                assert not c.code(s).same_as(c.code(g))
    several = KnotTask.make("unknot", [2, 3, 4])
    assert several.start_crossings == (2, 3, 4) and several.goal_crossings == (0,)
    with pytest.raises(ValueError, match="no configuration with 9 crossings"):
        KnotTask.make("tie", 9).sample(c, rng)
    with pytest.raises(ValueError, match="task must be one of"):
        KnotTask.make("untie")


def test_top_view_rendering():
    from simpatterns.simulators.mujoco import RopeRenderer

    w = RopeWorld()
    r = RopeRenderer(w, 96, 96)
    img = r.render(circle_positions())
    assert img.shape == (96, 96, 3) and img.dtype == np.uint8
    white = np.argwhere((img > 230).all(axis=2))  # bead 0 is white, at angle 0: the right of the image
    assert white.size and white[:, 1].mean() > 80 and abs(white[:, 0].mean() - 48) < 8
    colour = bead_colors(100)[25][:3] * 255  # bead 25 is at the top (+y is up in the image)
    near = np.argwhere(np.abs(img.astype(float) - colour).sum(axis=2) < 40)
    assert near.size and near[:, 0].mean() < 20
    assert np.array_equal(r.render(circle_positions()), img)  # deterministic
    r.close()
