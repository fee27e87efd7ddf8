"""`simpatterns agent eval -j 2` SIGKILLed mid-run leaves no process of the job running, and
the same command resumes: menus and episodes finished before the kill are reused."""

from __future__ import annotations

import json
import subprocess
import sys

from process_tree import kill_mid_run

from simpatterns.agents.runner import EPISODES_FILE

CLI = [sys.executable, "-m", "simpatterns.cli"]


def test_killed_agent_eval_leaves_no_worker_and_resumes(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "menus"
    args = ["agent", "eval", "--out", str(run), "--tasks", "00002:002,00006:011,00000:003", "--bins", "3",
            "--seeds", "0", "--attempts", "20", "--cache", str(cache), "--agents", "random,anneal", "-j", "2"]
    killed = kill_mid_run([*CLI, *args], tmp_path, lambda: any(cache.rglob("*.json")))  # a menu is built
    print(f"agent eval: {killed.workers} processes under the job at the kill, all gone {killed.seconds:.2f} s later")
    assert killed.workers >= 2 and not killed.left, killed
    episodes = run / EPISODES_FILE
    done = len(episodes.read_text().splitlines()) if episodes.exists() else 0
    menus = {p.name: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")}
    res = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"{6 - done} episodes run, {done} already" in res.stdout, res.stdout
    assert [json.loads(x)["task"] for x in episodes.read_text().splitlines()].count("00002:002") == 2
    assert {p: t for p, t in ((q.name, q.stat().st_mtime_ns) for q in cache.rglob("*") if q.name in menus)} == menus
