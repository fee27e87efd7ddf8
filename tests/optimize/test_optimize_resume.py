"""Ctrl-C in `simpatterns optimize` keeps every finished evaluation in a checkpoint beside
``--out``; the same command then replays them and finishes with the uninterrupted run's result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from simpatterns.optimize import CheckpointError, Evaluation, EvaluationLog

ARGS = ["optimize", "-t", "00000", "--rollouts", "300", "--keep-going", "--seed", "3"]
SAME = ("best_action", "best_score", "best_success", "samples", "invalid_proposals", "first_success", "curve")


def _run(args, cwd):
    return subprocess.run([sys.executable, "-m", "simpatterns.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_ctrl_c_keeps_the_evaluations_and_the_rerun_ends_as_an_uninterrupted_run(tmp_path):
    t0 = time.monotonic()
    whole = _run([*ARGS, "-o", "whole/best.json"], tmp_path)
    whole_s = time.monotonic() - t0
    assert whole.returncode == 0, whole.stderr
    log = tmp_path / "cut" / "best.evaluations.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "simpatterns.cli", *ARGS, "-o", "cut/best.json"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.exists() and len(log.read_text().splitlines()) > 20):
        time.sleep(0.02)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - start
    # promptly: against the whole run on the same machine, which had 280 evaluations more to do
    assert proc.returncode == 130 and took < 0.5 * whole_s, (took, whole_s, err)
    assert "Traceback" not in err and "run the same command to resume: simpatterns optimize" in err
    kept = len(log.read_text().splitlines()) - 1
    assert 20 <= kept < 300 and not (tmp_path / "cut" / "best.json").exists()
    again = _run([*ARGS, "-o", "cut/best.json"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resumed: {kept} evaluation(s) replayed" in again.stderr
    a = json.loads((tmp_path / "whole" / "best.json").read_text())
    b = json.loads((tmp_path / "cut" / "best.json").read_text())
    assert {k: a[k] for k in SAME} == {k: b[k] for k in SAME}


def test_a_checkpoint_of_other_settings_is_refused_and_a_cut_line_ignored(tmp_path):
    path = tmp_path / "x.evaluations.jsonl"
    log = EvaluationLog(path, {"scene": "a"})
    log.add([Evaluation([0.1, 0.2, 0.3], 0.5, False, False, 10), Evaluation([0.4, 0.5, 0.6], 1.0, True, True, 9)])
    log.close()
    with open(path, "a") as fh:
        fh.write('{"action": [0.7, ')  # what a kill mid-write leaves
    again = EvaluationLog(path, {"scene": "a"})
    assert again.get([0.4, 0.5, 0.6]).score == 1.0 and len(again.known) == 2
    again.add([Evaluation([0.9, 0.9, 0.9], 0.2, False, False, 5)])  # appending drops the cut line first
    again.close()
    assert len(EvaluationLog(path, {"scene": "a"}).known) == 3
    with pytest.raises(CheckpointError, match="another search"):
        EvaluationLog(path, {"scene": "b"})
    assert os.path.exists(path)
