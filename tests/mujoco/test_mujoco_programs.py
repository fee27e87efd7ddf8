"""Reward programs, annealing, annotation text and discovery run unchanged on MuJoCo traces."""

import re

import numpy as np
import pytest
from mujoco_paths import ROOT
from test_mujoco_builtin3d import rope_trace as known_rope_trace
from typer.testing import CliRunner

from simpatterns.annotate import annotate
from simpatterns.annotate.text import annotation_text
from simpatterns.cli import app
from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl import RewardProgram
from simpatterns.optimize import AnnealConfig, RopeObjective, anneal, code_goal, final_code, random_search
from simpatterns.simulators.mujoco import load_configurations
from simpatterns.trace import Trace

load_trace = Trace.load

LIB3D = PatternLibrary.builtin("3d")


def test_a_reward_program_over_rope_patterns_evaluates():
    tr = known_rope_trace()
    ann = annotate(tr, LIB3D)
    untangled = RewardProgram.from_text('AND(EVENT("crossing removed", {"crossings": 0}), '
                                        'AFTER("crossing formed", "crossing removed", first_params={"object_a": '
                                        '"bead 28"}))', LIB3D)
    res = untangled.evaluate(ann, tr)
    assert res.success and res.score == 1.0
    never = RewardProgram.from_text('NEVER("crossing formed", window=(0.4, 1))', LIB3D)
    res = never.evaluate(ann, tr)  # a crossing forms at frame 30 of 60
    assert not res.success and 0.0 <= res.score < 1.0
    near = RewardProgram.from_text('NEARBY_AT("bead 0", target="bead 50", t=0.0, radius=0.05)', LIB3D)
    assert not near.evaluate(ann, tr).success  # opposite sides of the loop: 0.38 m apart


def test_annealing_a_rope_objective():
    configs = load_configurations("train")
    start = int(configs.with_crossings([2])[0])
    obj = RopeObjective(start, program='AND(COUNT("crossing removed") >= 2, NEVER("crossing formed"))', pushes=2)
    assert obj.action_dim == 12 and obj.check([0.5] * 12) is None and "12 numbers" in obj.check([0.5] * 3)
    res = anneal(obj, 12, seed=0, config=AnnealConfig(step_size=0.3))
    assert res.samples <= 12 and len(res.curve) == res.samples
    assert (np.diff(res.curve) >= 0).all() and res.best_score == res.curve[-1] > 0
    again = anneal(obj, 12, seed=0, config=AnnealConfig(step_size=0.3))
    assert again.best_action == res.best_action and again.best_score == res.best_score
    tr = res.best_trace
    assert tr is not None and tr.num_frames == 2 * 24 // 8 + 1 and tr.meta["action"] == res.best_action
    assert obj.evaluate(res.best_action).score == pytest.approx(res.best_score)
    with pytest.raises(ValueError, match="bins quantise PHYRE"):
        random_search(obj, 2, bins=4)


def test_a_gauss_code_goal():
    configs = load_configurations("train")
    start = int(configs.with_crossings([1])[0])
    obj = RopeObjective(start, reward="goal", goal=code_goal(configs.gauss[start]), pushes=1)
    still = obj.evaluate([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])  # the centre, no force: nothing changes
    assert still.success and still.goal_success and still.score == 1.0
    assert final_code(obj.rollout([0.5] * 6)).text == configs.gauss[start]


def test_3d_annotation_text(table_trace):
    text = annotation_text(table_trace, annotate(table_trace, LIB3D), 3000)
    assert "z up" in text and "y up" not in text
    assert "- red ball: ball, dynamic, radius 0.06, at (-0.300, 0.100, 0.900)" in text
    assert "bounce: red ball, table" in text


def test_offline_discovery_on_rope_traces_accepts_a_pattern(rope_dataset, tmp_path):
    res = CliRunner().invoke(app, ["discover", "--traces", str(rope_dataset), "--labels",
                                   str(ROOT / "examples" / "labels" / "rope.toml"), "--out", str(tmp_path / "lib"),
                                   "--base-library", "builtin:3d", "--offline", "--samples", "12", "--seed", "0", "-q"])
    assert res.exit_code == 0, res.output
    accepted = int(re.search(r"\((\d+) accepted this run\)", res.output).group(1))
    assert accepted >= 1
    lib = PatternLibrary.load(tmp_path / "lib")
    new = [label for label in lib.labels if label not in LIB3D or lib.entry(label).provenance == "evolved"]
    assert len(new) == accepted and all(not lib.is_trusted(label) for label in new)
    ann = annotate(load_trace(rope_dataset / "rope_000.npz"), lib)  # the evolved detectors run in the sandbox
    assert not ann.errors and set(new) <= set(ann.patterns)


def test_offline_discovery_on_the_table_scene_with_the_evidence_fitness(tmp_path):
    """The README's generic example: a stock MJCF scene traced, then an offline discovery run (the
    default, evidence fitness). A body falling off the table is far above chance; stacks never
    happen in these rollouts, so no program for them scores."""
    traces = tmp_path / "table_traces"
    res = CliRunner().invoke(app, ["mujoco", "dataset", str(ROOT / "examples" / "mujoco" / "table_drop.xml"),
                                   "--rollouts", "24", "--steps", "1500", "--stride", "10", "--jitter", "0.1",
                                   "--speed", "0.8", "--out", str(traces)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["discover", "--traces", str(traces), "--labels",
                                   str(ROOT / "examples" / "labels" / "table.toml"), "--out", str(tmp_path / "lib"),
                                   "--base-library", "builtin:3d", "--offline", "--samples", "24", "--seed", "0", "-q"])
    assert res.exit_code == 0, res.output
    lib = PatternLibrary.load(tmp_path / "lib")
    assert "fell off" in lib.labels and lib.entry("fell off").fitness > 3  # theta: 3 sd above chance
    assert "stack formed" not in lib.labels
    ann = annotate(load_trace(traces / "rollout_000.npz"), lib)
    assert not ann.errors and ann.events_of("fell off")  # in the sandbox; rollout 0's red ball leaves the table
