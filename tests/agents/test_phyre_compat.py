"""The phyre-shaped entry point: PHYRE code runs on our simulator with only its import changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simpatterns.agents.phyre_compat as phyre
from agent_tasks import SOLVABLE
from simpatterns.agents.tasks import Task
from simpatterns.simulators.phyre import simulate

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "readme" / "agents.md"


def docs_script() -> str:
    """The script in the README written for `phyre` (the fenced block after its marker)."""
    text = DOCS.read_text()
    m = re.search(r"\(phyre-script: [^\n]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, f"{DOCS}: no ```python block after the phyre-script marker"
    return m.group(1)


def test_the_docs_script_written_for_phyre_runs_with_only_its_import_changed(tmp_path):
    script = docs_script()
    assert script.splitlines()[0] == "import phyre"
    ours = script.replace("import phyre\n", "import simpatterns.agents.phyre_compat as phyre\n", 1)
    assert ours.count("\n") == script.count("\n") and ours.splitlines()[1:] == script.splitlines()[1:]
    path = tmp_path / "script.py"
    path.write_text(ours)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=240)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "initial scenes: (3, 256, 256)"
    m = re.fullmatch(r"attempts: (\d+) AUCCESS: ([0-9.]+)", lines[1])
    assert m and 3 <= int(m.group(1)) <= 90 and 0.0 <= float(m.group(2)) <= 1.0


def test_simulate_action_images_objects_and_statuses():
    sim = phyre.initialize_simulator([SOLVABLE, "00000:000"], "ball")
    assert sim.task_ids == (SOLVABLE, "00000:000") and sim.action_space_dim == 3 and sim.goals is None
    scene = Task.from_id(SOLVABLE).scene
    solution = Task.from_id(SOLVABLE).stored_solution
    res = sim.simulate_action(0, solution, need_images=True, need_featurized_objects=True, stride=30)
    assert res.status == phyre.SimulationStatus.SOLVED and res.status.is_solved()
    trace = simulate(scene, solution).trace
    shown = list(range(0, trace.num_frames, 30))
    frames = len(shown)
    assert res.images.shape == (frames, 256, 256) and res.images.dtype == np.uint8
    assert set(np.unique(res.images)) <= set(range(7))
    f = res.featurized_objects
    bodies = [b for b in trace.bodies if b.role != "wall"]  # PHYRE does not featurize the walls
    assert f.features.shape == (frames, len(bodies), 14)
    assert f.colors == [b.color.upper() for b in bodies] and f.colors[-1] == "RED"
    assert f.shapes == [b.shape.upper() for b in bodies]
    assert f.num_user_inputs == 1 and f.num_scene_objects == len(bodies) - 1
    red = trace.body_index("red ball")
    assert f.xs[:, -1] == pytest.approx(trace.position[shown, red, 0] / 256, abs=1e-6)
    assert f.ys[:, -1] == pytest.approx(trace.position[shown, red, 1] / 256, abs=1e-6)
    assert f.diameters[-1] == pytest.approx(2 * (2 + 30 * solution[2]) / 256, rel=1e-6)
    # the floor of 00002 is purple (code 4) and lies along the bottom: row 0 is the bottom
    initial = sim.initial_scenes[0]
    assert np.all(initial[1] == 4) and not np.any(initial[-2] == 4)
    assert phyre.observations_to_uint8_rgb(initial).shape == (256, 256, 3)
    bad = sim.simulate_action(0, [0.5, 0.0, 1.0])  # a big ball through the floor
    assert bad.status == phyre.SimulationStatus.INVALID_INPUT and bad.images is None
    status, images = sim.simulate_single(0, solution, need_images=False)
    assert status.is_solved() and images is None
    stable = sim.simulate_action(0, solution, need_images=False, stable=True).status
    assert stable in (phyre.SimulationStatus.STABLY_SOLVED, phyre.SimulationStatus.UNSTABLY_SOLVED)


def test_evaluator_rules():
    ev = phyre.Evaluator(("00000:000", "00000:001"))
    assert not ev.maybe_log_attempt(0, phyre.SimulationStatus.INVALID_INPUT) and len(ev) == 0
    for _ in range(100):
        assert ev.maybe_log_attempt(0, -1)
    with pytest.raises(AssertionError, match="already has 100 attempts"):
        ev.maybe_log_attempt(0, 1)
    assert ev.maybe_log_attempt(1, "1") and ev.get_attempts_for_task(1) == 1
    assert ev.get_auccess() == pytest.approx(0.5) and ev.get_aucess(10) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="only the 'ball' action tier"):
        phyre.initialize_simulator(["00000:000"], "two_balls")
    assert phyre.eval_setup_to_action_tier("ball_cross_template") == "ball"
    assert phyre.list_eval_setups() == ("ball_cross_template", "ball_within_template")


def test_outcomes_are_decided_by_full_runs_not_the_settle_shortcut():
    """Template 00017 variant 1: this action "settles" at frame 150 (the green ball creeps below
    the settle threshold) and succeeds at about frame 770. Menus and the phyre-shaped API report
    what the full run says."""
    from simpatterns.agents.menu import task_solved
    from simpatterns.agents.phyre_compat import SimulationStatus, initialize_simulator
    from simpatterns.simulators.phyre import load_scene, simulate

    scene, action = load_scene("00017", 1), [0.8997, 0.2029, 0.2286]
    assert not simulate(scene, action, stop_when_settled=True).success  # the shortcut alone would say "failed"
    assert task_solved(scene, action)
    sim = initialize_simulator(["00017:001"], "ball")
    status = sim.simulate_action(0, action, need_images=False).status
    assert status is SimulationStatus.SOLVED and status.is_solved()
