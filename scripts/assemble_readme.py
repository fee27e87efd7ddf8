#!/usr/bin/env python
"""Rebuild README.md's topic sections from docs/readme/*.md.

Each topic page in docs/readme is the single source for its README section;
this script copies them, in reading order, between the BEGIN/END markers of
README.md (atomically). Run it after editing a page.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simpatterns.files import atomic_write  # noqa: E402
ORDER = ["architecture", "cli", "templates", "annotate", "annotation_cost", "scale", "builtin_library", "dsl", "llm", "evolve",
         "envs", "qa", "agents", "mujoco"]
BEGIN, END = "<!-- BEGIN topic sections (scripts/assemble_readme.py) -->", "<!-- END topic sections -->"


def assembled(root: Path = ROOT) -> str:
    """README.md as it should be: its own text with the pages of docs/readme in place."""
    text = (root / "README.md").read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    parts = []
    for name in ORDER:
        page = root / "docs" / "readme" / f"{name}.md"
        if page.exists():
            body = page.read_text().strip()
            # images in the pages are relative to docs/readme/
            for image in sorted(p.name for p in (root / "docs" / "readme").glob("*.png")):
                body = body.replace(f"]({image}", f"](docs/readme/{image}")
            parts.append(body)
    return head + BEGIN + "\n\n" + "\n\n".join(parts) + "\n\n" + END + tail


def main() -> None:
    atomic_write(ROOT / "README.md", assembled())
    print(f"README.md: {len(ORDER)} sections")


if __name__ == "__main__":
    main()
