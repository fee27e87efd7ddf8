"""The simulator commands, run as a user would (subprocess on the installed entry point)."""

import json
import subprocess
import sys

from simpatterns.trace import Trace


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "simpatterns.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_scenes_lists_templates():
    out = run("scenes")
    assert out.returncode == 0, out.stderr
    assert "00000" in out.stdout and "00024" in out.stdout


def test_simulate_writes_trace_and_gif(tmp_path):
    out = run("simulate", "--template", "0", "--variant", "1", "--out", str(tmp_path / "t.npz"),
              "--gif", str(tmp_path / "t.gif"), "--png", str(tmp_path / "t.png"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SOLVED" in out.stdout
    tr = Trace.load(tmp_path / "t.npz")
    assert tr.success and tr.meta["template"] == "00000" and tr.meta["variant"] == 1
    assert (tmp_path / "t.gif").read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_simulate_invalid_action_says_why(tmp_path):
    out = run("simulate", "--template", "0", "--variant", "1", "--action", "0.5,1.5,0.3")
    assert out.returncode == 2 and not out.stdout  # bad input: nothing was simulated
    # user text in square brackets is printed as it is, on one line on stderr
    assert "outside [0, 1]" in out.stderr and "nothing simulated" in out.stderr
    bad = run("simulate", "--template", "0", "--action", "0.5,0.3")
    assert bad.returncode == 2 and "three numbers" in bad.stderr and not bad.stdout
    unknown = run("simulate", "--template", "99")
    assert unknown.returncode == 2 and "unknown template" in unknown.stderr


def test_dataset_writes_index_and_resumes(tmp_path):
    args = ("dataset", "--templates", "0", "--variants", "2", "--actions", "random:2,solution,near-miss",
            "--out", str(tmp_path), "--workers", "2")
    out = run(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    for r in rows:
        tr = Trace.load(tmp_path / r["file"])
        assert tr.meta["variant"] == r["variant"] and tr.success == r["success"]
        if r["kind"] == "solution":
            assert r["success"]
        if r["kind"] == "near-miss":
            assert not r["success"]
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.npz")}
    again = run(*args)
    assert again.returncode == 0
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.npz")} == before  # resumed, not rewritten
    bad = run("dataset", "--templates", "0", "--actions", "sideways:3", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "unknown kind" in bad.stderr


def test_simulate_creates_output_folders_and_names_a_bad_path(tmp_path):
    out = run("simulate", "--template", "0", "--variant", "1", "--out", str(tmp_path / "new" / "dir" / "t.npz"),
              "--png", str(tmp_path / "pics" / "t.png"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert Trace.load(tmp_path / "new" / "dir" / "t.npz").success
    assert (tmp_path / "pics" / "t.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "file").write_text("")
    bad = run("simulate", "--template", "0", "--variant", "1", "--out", str(tmp_path / "file" / "t.npz"))
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ") and str(tmp_path / "file") in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "new", "pics"]  # no temporary left behind
