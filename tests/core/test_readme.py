"""The README and the docs run as written.

Every shell block, Python snippet and ``$ command`` transcript in README.md and
docs/**/*.md is either run here or marked skipped with its reason (the marker
syntax is in ``readme_support``). A session runs in an empty folder with only what its
earlier blocks made (no hidden setup: even ``simpatterns examples`` is a block
on the page), with ``simpatterns`` on the PATH; printed output the page shows
is compared. Sessions that talk to a model get the project's
scripted server, and ``http://localhost:8000/v1`` in their blocks is its address.
"""

from __future__ import annotations

import ast
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from readme_support import Block, blocks, dangling_markers, session_script

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LOCAL_SERVER = "http://localhost:8000/v1"

def all_blocks() -> list[Block]:
    return [b for path in DOCUMENTS for b in blocks(path)]


def sessions() -> dict[str, list[Block]]:
    found: dict[str, list[Block]] = {}
    for block in all_blocks():
        if block.session is not None:
            found.setdefault(f"{block.path.relative_to(ROOT).as_posix()}:{block.session}", []).append(block)
    return found


SESSIONS = sessions()


def test_every_code_block_is_run_or_says_why_not():
    unclaimed = [f"{b.where} ({b.language or 'no language'}): {b.body.splitlines()[0][:60] if b.body else ''}"
                 for b in all_blocks() if b.is_code and b.marker is None]
    assert not unclaimed, ("blocks neither run nor marked skipped (add <!-- readme-test: NAME --> or "
                           "<!-- readme-test: skip (why) --> before the fence, or a language like text):\n"
                           + "\n".join(unclaimed))
    empty = [b.where for b in all_blocks() if b.marker is not None and b.session is None and not b.skipped]
    assert not empty, f"markers that neither name a session nor give a reason: {empty}"
    dangling = [w for path in DOCUMENTS for w in dangling_markers(path)]
    assert not dangling, f"readme-test markers not directly before a fence: {dangling}"


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: put the rest in a docs/ page and link it"


def test_the_readme_walks_the_first_five_minutes():
    commands = " ".join(b.body for b in SESSIONS["README.md:five-minutes"])
    for step in ("simulate", "annotate", "reward eval", "optimize", "qa generate"):
        assert f"simpatterns {step}" in commands, f"the README's five-minute path lost `simpatterns {step}`"


def test_every_page_is_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.relative_to(ROOT / "docs").as_posix() for p in DOCUMENTS[1:]
               if p.relative_to(ROOT / "docs").as_posix() not in nav]
    assert not missing, f"docs pages missing from mkdocs.yml's nav: {missing}"


API_DIRECTIVE = re.compile(r"^::: (\S+)\n(?:    options:\n(?:      .*\n)*?      members: \[(.*?)\]\n)?", re.M)
# what a user of the library reaches for first; the API reference must show each
API_ESSENTIALS = ("Trace", "Annotation", "simulate", "rollout_traces", "annotate", "annotate_many", "PatternLibrary",
                  "RewardProgram", "parse", "check", "compile_program", "PhyreOneBallEnv", "RewardProgramWrapper",
                  "KnotRopeEnv", "anneal", "optimize_scene", "generate_dataset", "run_eval", "evaluate", "make_client",
                  "train", "export_hf")


def _defined_names(module: str) -> set[str]:
    """The names a module of the package defines or imports at its top level (read, not imported)."""
    base = ROOT / module.replace(".", "/")
    source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    assert source.is_file(), f"docs/reference/api names {module}, which is not a module of the package"
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_the_api_reference_names_real_objects():
    """Each ``::: module`` of docs/reference/api/ and the members it lists exist (the strict site build
    in CI fails on the same; this runs with the suite), and the essentials are all shown."""
    shown: set[str] = set()
    for page in sorted((ROOT / "docs" / "reference" / "api").glob("*.md")):
        for m in API_DIRECTIVE.finditer(page.read_text()):
            members = [x.strip() for x in m.group(2).split(",")] if m.group(2) else []
            missing = set(members) - _defined_names(m.group(1))
            assert not missing, f"{page.name}: {m.group(1)} has no {sorted(missing)}"
            shown.update(members or [m.group(1)])
    assert not set(API_ESSENTIALS) - shown, f"not in the API reference: {sorted(set(API_ESSENTIALS) - shown)}"


def _environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "simpatterns"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m simpatterns.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), str(Path(__file__).parent),
                                                    env.get("PYTHONPATH", "")] if p)
    env.update(COLUMNS="200", MPLBACKEND="Agg", OMP_WAIT_POLICY="PASSIVE",
               SIMPATTERNS_CACHE=str(tmp_path / "cache"))  # a cold cache, as a new user's
    env.pop("SIMPATTERNS_LLM_BASE_URL", None)
    return env


@pytest.mark.parametrize("key", sorted(SESSIONS))
def test_block_runs_as_written(key, tmp_path):
    name = key.split(":", 1)[1]
    env = _environment(tmp_path)
    work = tmp_path / "fresh"
    work.mkdir()
    script = session_script(SESSIONS[key])
    server = None
    shown = [b.body for b in SESSIONS[key] if b.is_server_script]
    if shown:
        from simpatterns.llm.testing import ScriptedLLMServer

        (tmp_path / "script.json").write_text(shown[0])
        server = ScriptedLLMServer.from_script(tmp_path / "script.json").start()
        script = script.replace(LOCAL_SERVER, server.base_url)
        env["SIMPATTERNS_LLM_BASE_URL"] = server.base_url
    try:
        path = work / f"readme_{name}.py"
        path.write_text(script)
        res = subprocess.run([sys.executable, str(path)], cwd=work, env=env, capture_output=True, text=True,
                             timeout=600, check=False)
    finally:
        if server is not None:
            server.stop()
    assert res.returncode == 0, f"{res.stderr[-6000:]}\n--- the session's script\n{script}"
