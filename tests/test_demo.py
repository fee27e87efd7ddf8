"""``simpatterns demo`` end to end (small budget): every report file, and numbers that check out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from simpatterns.cli import app


def test_demo_writes_a_consistent_report(tmp_path):
    out = tmp_path / "report"
    res = CliRunner().invoke(app, ["demo", "--out", str(out), "--rollouts", "15", "--trials", "1", "--workers", "1"])
    assert res.exit_code == 0, res.output
    for name in ("README.md", "annotation.txt", "goal.rwd", "bucket_goal.rwd", "best_rollout.gif", "timeline.png",
                 "anneal_curve.png", "best_rollout.npz", "best_rollout.jsonl", "summary.json", "dataset/index.jsonl"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())

    # the dataset: every indexed trace is there with its annotation
    from simpatterns.annotation import Annotation
    from simpatterns.trace import Trace

    index_rows = [json.loads(line) for line in (out / "dataset" / "index.jsonl").read_text().splitlines()]
    # the program names template 00000's bodies, so it is evaluated on those rollouts
    assert len([r for r in index_rows if r["template"] == "00000"]) == len(summary["program"]["rollouts"]) >= 6
    for row in index_rows:
        trace = Trace.load(out / "dataset" / row["file"])
        ann = Annotation.load((out / "dataset" / row["file"]).with_suffix(".jsonl"))
        assert ann.num_frames == trace.num_frames and trace.success == row["success"]

    # the reward program table: score 1 exactly on success, and a solved rollout is in it
    rows = summary["program"]["rollouts"]
    assert all((r["score"] == 1.0) == r["success"] for r in rows)
    assert any(r["solved"] for r in rows) and any(not r["solved"] for r in rows)

    # the annealing result re-simulates to the reported outcome
    from simpatterns.envs.scenes import bucket_goal, three_buckets
    from simpatterns.simulators.phyre import simulate

    a = summary["anneal"]
    trace = simulate(three_buckets(), a["best_action"], stop_when_settled=True).trace
    goal = bucket_goal(2)
    assert np.isclose(goal.distance(trace), a["final_distance_px"])
    assert goal(trace) == a["success"]
    assert a["samples"] <= 15

    # pictures and text
    gif = Image.open(out / "best_rollout.gif")
    assert gif.n_frames > 5 and gif.size[0] == 256
    text = (out / "README.md").read_text()
    assert (out / "annotation.txt").read_text().strip() in text
    assert "best_rollout.gif" in text and "Simulated annealing" in text
    assert Trace.load(out / "best_rollout.npz").meta["action"] == a["best_action"]

    # the viewer pages: the best rollout (with its reward program) and the dataset's index, linked
    assert "(best_rollout.html)" in text and "(dataset.html)" in text
    page = (out / "best_rollout.html").read_text()
    assert "Reward program" in page and '<script id="data"' in page
    index = (out / "dataset.html").read_text()
    for row in index_rows:
        assert f'"file":"{row["file"]}"' in index
        assert (out / "dataset_files" / (Path(row["file"]).stem + ".html")).is_file()


def test_demo_names_a_report_folder_it_cannot_create(tmp_path):
    (tmp_path / "taken").write_text("")
    res = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "taken" / "report")])
    assert res.exit_code == 2
    assert "error:" in res.output and "taken" in res.output and "cannot create the report folder" in res.output
