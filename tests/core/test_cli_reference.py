"""docs/reference/cli.md is what the command definitions say (scripts/cli_reference.py writes it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_reference_page_is_current():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr


def test_the_cli_reference_names_every_command():
    from simpatterns.cli import BUILTIN_COMMANDS, COMMANDS

    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name in [*BUILTIN_COMMANDS, *(n for names in COMMANDS.values() for n in names)]:
        assert f"\n## simpatterns {name}\n" in page, f"docs/reference/cli.md has no section for `{name}`"
