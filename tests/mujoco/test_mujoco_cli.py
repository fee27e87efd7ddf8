"""``simpatterns mujoco trace|dataset|rope-dataset|rope-configs|knot`` and the 3D library on the CLI."""

import json

from mujoco_paths import TABLE_XML
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.trace import Trace

runner = CliRunner()


def test_trace_an_mjcf_file(tmp_path):
    out = tmp_path / "drop.npz"
    res = runner.invoke(app, ["mujoco", "trace", str(TABLE_XML), "--steps", "600", "--stride", "10", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "10 bodies, 60 frames" in res.output and "yellow box" in res.output
    tr = Trace.load(out)
    assert tr.dim == 3 and tr.num_frames == 60


def test_trace_frame_origins_or_a_bad_position(tmp_path):
    out = tmp_path / "drop.npz"
    res = runner.invoke(app, ["mujoco", "trace", str(TABLE_XML), "--steps", "20", "--position", "xpos",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert Trace.load(out).meta["position"] == "xpos"
    res = runner.invoke(app, ["mujoco", "trace", str(TABLE_XML), "--steps", "20", "--position", "com"])
    assert res.exit_code == 2 and "position must be one of xipos, xpos" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_bad_model_file_is_named(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><geom type='sphere'/></worldbody>")
    res = runner.invoke(app, ["mujoco", "trace", str(bad)])
    assert res.exit_code == 2 and "bad.xml: MuJoCo cannot load the model" in res.output


def test_dataset_then_annotate_with_the_3d_library(tmp_path):
    res = runner.invoke(app, ["mujoco", "dataset", str(TABLE_XML), "--rollouts", "3", "--steps", "500",
                              "--stride", "10", "--out", str(tmp_path / "d"), "--seed", "2"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (tmp_path / "d" / "index.jsonl").read_text().splitlines()]
    assert [r["file"] for r in rows] == ["rollout_000.npz", "rollout_001.npz", "rollout_002.npz"]
    a, b = (Trace.load(tmp_path / "d" / r["file"]) for r in rows[:2])
    assert a.num_frames == 50 and not (a.position[0] == b.position[0]).all()  # jittered starts
    res = runner.invoke(app, ["annotate", str(tmp_path / "d" / "rollout_000.npz"), "--library", "builtin:3d",
                              "--text"])
    assert res.exit_code == 0, res.output


def test_rope_dataset_configs_and_knot(tmp_path):
    res = runner.invoke(app, ["mujoco", "rope-dataset", "--out", str(tmp_path / "r"), "--episodes", "2",
                              "--actions-per-episode", "3", "--crossings", "3"])
    assert res.exit_code == 0, res.output
    row = json.loads((tmp_path / "r" / "index.jsonl").read_text().splitlines()[0])
    assert row["start_crossings"] == 3
    res = runner.invoke(app, ["mujoco", "knot", str(tmp_path / "r" / "rope_000.npz")])
    assert res.exit_code == 0 and f"crossings: {row['end_crossings']}" in res.output
    assert f"Gauss code: {row['end_gauss_code'] or '(none)'}" in res.output
    res = runner.invoke(app, ["mujoco", "knot", str(tmp_path / "r" / "rope_000.npz"), "--frame", "0"])
    assert "crossings: 3" in res.output and "unknot proven: yes" in res.output
    res = runner.invoke(app, ["mujoco", "rope-configs"])
    assert res.exit_code == 0 and "seed 17" in res.output and "│ train │ 20 │ 20 │" in res.output


def test_library_list_shows_the_3d_library():
    res = runner.invoke(app, ["library", "list", "--library", "builtin:3d"])
    assert res.exit_code == 0 and "crossing formed" in res.output and "bead dragged" in res.output
