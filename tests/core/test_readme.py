"""The README runs as written: every block marked ``<!-- readme-test: NAME -->``
runs in a fresh folder (after ``simpatterns examples``), with ``simpatterns``
on the PATH. Shell blocks run under ``bash -eu``; Python blocks of one NAME run
together as one script; a block of ``$ command`` lines is run command by
command and its printed output compared with the README's (a line ending in
"..." matches any line that starts with what precedes it, a line "..."
matches the rest)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"<!-- readme-test: (\S+) -->\n```(\w*)\n(.*?)\n```", re.S)


def readme_blocks() -> dict[str, list[tuple[str, str]]]:
    sessions: dict[str, list[tuple[str, str]]] = {}
    for name, lang, body in BLOCK.findall(README.read_text()):
        sessions.setdefault(name, []).append((lang, body))
    return sessions


SESSIONS = readme_blocks()


def test_the_readme_marks_the_first_hour():
    # the path a newcomer follows is covered: simulate, annotate, a reward check, envs
    # (the demo block is tests/test_demo.py's)
    assert {"simulate", "simulate-python", "annotate", "reward-check", "envs"} <= set(SESSIONS)


def _environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "simpatterns"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m simpatterns.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["COLUMNS"] = "200"
    env["MPLBACKEND"] = "Agg"
    return env


def _matches(expected: list[str], actual: list[str]) -> bool:
    k = 0
    for line in expected:
        if line.strip() == "...":
            return True
        if k >= len(actual):
            return False
        got = actual[k].rstrip()
        if line.endswith("..."):
            if not got.startswith(line[:-3].rstrip()):
                return False
        elif got != line.rstrip():
            return False
        k += 1
    return k == len(actual)


def _run_transcript(body: str, cwd: Path, env: dict[str, str]) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    assert commands, "a transcript block without a $ command"
    for command, expected in commands:
        res = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        printed = (res.stdout + res.stderr).splitlines()
        while expected and not expected[-1].strip():
            expected.pop()
        assert _matches(expected, printed), f"$ {command}\n--- README\n" + "\n".join(expected) + \
            "\n--- printed\n" + "\n".join(printed)


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_readme_block_runs_as_written(name, tmp_path):
    env = _environment(tmp_path)
    work = tmp_path / "fresh"
    work.mkdir()
    subprocess.run(["simpatterns", "examples"], cwd=work, env=env,
                   check=True, capture_output=True, timeout=120)
    python: list[str] = []
    for lang, body in SESSIONS[name]:
        if lang in ("bash", "sh"):
            res = subprocess.run(["bash", "-eu", "-c", body], cwd=work, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert res.returncode == 0, f"{body}\n--- stderr\n{res.stderr[-3000:]}"
            assert "Traceback" not in res.stderr
        elif lang == "python":
            python.append(body)
        else:
            _run_transcript(body, work, env)
    if python:
        script = work / f"readme_{name}.py"
        script.write_text("\n\n".join(python) + "\n")
        res = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, f"{script.read_text()}\n--- stderr\n{res.stderr[-3000:]}"
