"""The default task program (`task_program_text`) says PHYRE's goal: on rollouts of all 25
templates (solution, near-misses, random actions) its success is the simulator's, and among
failures its score rises as the goal pair's closest approach shrinks. The closest approach is
measured here independently of the DSL's geometry: both outlines sampled every 1 px, nearest
points found with a k-d tree over every frame."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
from scipy.spatial import cKDTree
from scipy.stats import spearmanr

from simpatterns.dsl import RewardProgram, builtin_library
from simpatterns.envs.scenes import task_program_text
from simpatterns.simulators.phyre import TEMPLATES, get_template, simulate

STEP_PX = 1.0
COARSE_PX = 8.0


def _outline_points(parts, step: float) -> np.ndarray:
    """Points every ~``step`` px along a body's outline, in its own frame."""
    pts = []
    for part in parts:
        if part.get("kind") == "circle":
            r = float(part["radius"])
            n = max(8, int(2 * math.pi * r / step))
            a = np.linspace(0, 2 * math.pi, n, endpoint=False)
            pts.append(np.stack([part["center"][0] + r * np.cos(a), part["center"][1] + r * np.sin(a)], 1))
        else:
            v = np.asarray(part["vertices"], dtype=float)[:, :2]
            for p, q in zip(v, np.roll(v, -1, axis=0)):
                n = max(2, int(np.linalg.norm(q - p) / step) + 1)
                pts.append(p + np.linspace(0, 1, n)[:, None] * (q - p))
    return np.concatenate(pts)


def _nearest(trace, i: int, j: int, frames: np.ndarray, step: float) -> np.ndarray:
    """[F]: the least distance between points every ``step`` px on the outlines of i and j: i's
    points are carried into j's frame and queried against j's with a k-d tree."""
    pi, pj = _outline_points(trace.bodies[i].parts, step), _outline_points(trace.bodies[j].parts, step)
    if len(pi) > len(pj):  # query with the smaller outline
        i, j, pi, pj = j, i, pj, pi
    ci, cj = trace.position[frames, i], trace.position[frames, j]
    ai, aj = trace.angle[frames, i][:, None], trace.angle[frames, j][:, None]
    wx = ci[:, None, 0] + np.cos(ai) * pi[:, 0] - np.sin(ai) * pi[:, 1] - cj[:, None, 0]
    wy = ci[:, None, 1] + np.sin(ai) * pi[:, 0] + np.cos(ai) * pi[:, 1] - cj[:, None, 1]
    local = np.stack([np.cos(aj) * wx + np.sin(aj) * wy, -np.sin(aj) * wx + np.cos(aj) * wy], axis=-1)
    return cKDTree(pj).query(local.reshape(-1, 2))[0].reshape(len(frames), -1).min(axis=1)


def closest_approach(trace, i: int, j: int) -> float:
    """The least distance between the outlines of bodies i and j over the rollout (0 at a contact):
    every frame on 8 px samples, then the frames within 2 x 8 px of that least (one per distinct
    pose) on 1 px samples."""
    pair = ((trace.contact_a == i) & (trace.contact_b == j)) | ((trace.contact_a == j) & (trace.contact_b == i))
    if pair.any():
        return 0.0
    coarse = _nearest(trace, i, j, np.arange(trace.num_frames), COARSE_PX)
    near = np.flatnonzero(coarse <= coarse.min() + 2 * COARSE_PX)
    pose = np.concatenate([trace.position[near][:, [i, j]].reshape(len(near), -1),
                           trace.angle[near][:, [i, j]]], axis=1)
    near = near[np.unique(np.round(pose, 3), axis=0, return_index=True)[1]]  # bodies at rest: one frame
    return float(_nearest(trace, i, j, near, STEP_PX).min())


@lru_cache(maxsize=1)
def rollouts() -> list[tuple[str, object, object]]:
    """(template, goal pair, trace) for the solution, 2 near-misses and 3 random valid actions of
    every template's variant 0; the solution once more run past its success."""
    rng = np.random.default_rng(7)
    out = []
    for tid in sorted(TEMPLATES):
        tpl = get_template(tid)
        scene = tpl.variant_scene(0)
        sol = np.asarray(tpl.solution(0))
        actions = [sol] + [np.clip(sol + rng.normal(0, 0.03, 3), 0, 1) for _ in range(2)]
        runs = [simulate(scene, a) for a in actions]
        runs.append(simulate(scene, sol, stop_on_success=False))
        while sum(r.valid for r in runs) < 7:
            runs.append(simulate(scene, rng.random(3)))
        out += [(tid, scene, r.trace) for r in runs if r.valid]
    return out


def test_all_25_templates_have_a_goal_program():
    assert len(TEMPLATES) == 25
    for tid in TEMPLATES:
        assert "hold=0.18" in task_program_text(get_template(tid).variant_scene(0))


def test_success_is_phyres_on_every_rollout():
    lib = builtin_library()
    programs = {}
    n_success = 0
    for tid, scene, trace in rollouts():
        prog = programs.setdefault(tid, RewardProgram.from_text(task_program_text(scene), lib))
        r = prog.evaluate(None, trace)
        assert r.success == trace.meta["success"], (tid, trace.meta["action"])
        assert (r.score == 1.0) == r.success
        n_success += r.success
    assert n_success >= 25  # every template's solution, at least


def test_failures_score_higher_the_closer_the_goal_pair_came():
    lib = builtin_library()
    by_template: dict[str, list[tuple[float, float]]] = {}
    for tid, scene, trace in rollouts():
        if trace.meta["success"]:
            continue
        r = RewardProgram.from_text(task_program_text(scene), lib).evaluate(None, trace)
        gap = closest_approach(trace, *scene.goal)
        # below 0.5 before the pair ever touches; from 0.5 once it has
        assert (r.score >= 0.5) == (gap == 0.0), (tid, gap, r.score)
        by_template.setdefault(tid, []).append((r.score, gap))
    pooled = [p for pairs in by_template.values() for p in pairs]
    assert len(pooled) >= 60
    scores, gaps = np.array(pooled).T
    assert spearmanr(scores, -gaps).statistic > 0.9
    for tid, pairs in by_template.items():
        s, g = np.array(pairs).T
        if len(set(s)) > 2 and len(set(g)) > 2:
            assert spearmanr(s, -g).statistic > 0, tid
        # pairs that never touched: the score falls as the sampled gap grows (sampling error < 1 px)
        apart = sorted((gap, score) for score, gap in pairs if gap > 0)
        for (g0, s0), (g1, s1) in zip(apart, apart[1:]):
            if g1 > g0 + 1.5:
                assert s1 <= s0 + 1e-9, (tid, g0, s0, g1, s1)


@pytest.mark.parametrize("stop", [True, False])
def test_solution_scores_one_whether_or_not_the_rollout_stops_at_success(stop):
    tpl = get_template("00002")
    scene = tpl.variant_scene(0)
    trace = simulate(scene, tpl.solution(0), stop_on_success=stop).trace
    r = RewardProgram.from_text(task_program_text(scene), builtin_library()).evaluate(None, trace)
    assert trace.meta["success"] and r.success and r.score == 1.0 and r.determined


@pytest.mark.parametrize("max_steps, solved", [(240, False), (700, True)])
def test_shorter_episodes_ask_for_the_same_180_steps(max_steps, solved):
    """The DSL measures time in fractions of the episode: the hold follows max_steps (00005's
    solution succeeds at step 530)."""
    tpl = get_template("00005")
    scene = tpl.variant_scene(0)
    text = task_program_text(scene, max_steps=max_steps)
    assert f"hold={180 / max_steps:.6g}" in text
    program = RewardProgram.from_text(text, builtin_library())
    for stop in (True, False):
        trace = simulate(scene, tpl.solution(0), max_steps=max_steps, stop_on_success=stop).trace
        assert trace.meta["success"] == solved
        assert program.evaluate(None, trace).success == solved
    with pytest.raises(ValueError, match="shorter than"):
        task_program_text(scene, max_steps=100)


def test_the_shipped_example_is_phyres_goal_of_00000():
    from importlib import resources

    path = resources.files("simpatterns.examples").joinpath("goals", "phyre_touch_for_3s.rwd")
    program = RewardProgram.from_text(path.read_text(), builtin_library())
    traces = [trace for tid, _, trace in rollouts() if tid == "00000"]
    assert any(t.meta["success"] for t in traces) and not all(t.meta["success"] for t in traces)
    for trace in traces:
        assert program.evaluate(None, trace).success == trace.meta["success"]


def test_success_is_phyres_from_collision_events_alone():
    """Without the trace, TOUCHING rebuilds contacts from "collision start"/"collision end": the
    same runs, so the same verdict."""
    from simpatterns.annotate.annotator import annotate

    lib = builtin_library()
    raw = lib.subset(["collision start", "collision end"])
    seen: dict[str, int] = {}
    for tid, scene, trace in rollouts():
        if seen.get(tid, 0) >= 3:
            continue
        seen[tid] = seen.get(tid, 0) + 1
        r = RewardProgram.from_text(task_program_text(scene), lib).evaluate(annotate(trace, raw))
        assert r.success == trace.meta["success"], (tid, trace.meta["action"])
