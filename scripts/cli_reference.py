#!/usr/bin/env python
"""Write docs/reference/cli.md from the command definitions (every command and option).

Run after changing a command: ``python scripts/cli_reference.py``. ``--check``
exits 1 when the committed page differs from what the commands say (the test
suite runs it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simpatterns.cli import app  # noqa: E402 (after the path insert: runs from a checkout)
from simpatterns.files import atomic_write  # noqa: E402

PAGE = ROOT / "docs" / "reference" / "cli.md"
HEADER = """# Command-line reference

Every `simpatterns` command with its options, generated from the command
definitions by `scripts/cli_reference.py` (do not edit by hand; a test checks
the page is current). `simpatterns COMMAND --help` prints the same in a
terminal. The rules every command follows (errors, exit codes, outputs,
resuming) are on the [conventions](conventions.md) page.
"""


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _param_row(param: Any, ctx: Any) -> str:
    """One table row: the option's spellings and value, and its help with the default, as --help prints them."""
    record = param.get_help_record(ctx) if param.param_type_name == "option" else None
    if record is None:  # an argument
        name, text = param.name.upper(), (getattr(param, "help", "") or "") + ("  [required]" if param.required else "")
    else:
        name, text = record
    return f"| `{_cell(name)}` | {_cell(text)} |"


def _section(command: Any, path: list[str]) -> list[str]:
    # typer vendors its own click: its classes, reached through the command
    ctx = command.context_class(command, info_name=" ".join(path))
    out = [f"## {' '.join(path)}", ""]
    if command.help:
        out += [" ".join(command.help.split()), ""]
    out += ["```text", command.get_usage(ctx).replace("Usage: ", ""), "```", ""]
    params = [p for p in command.params if p.name != "help" and not getattr(p, "hidden", False)]
    if params:
        out += ["| option | what |", "|---|---|", *(_param_row(p, ctx) for p in params), ""]
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += _section(sub, [*path, name])
    return out


def page() -> str:
    root = typer.main.get_command(app)
    return HEADER + "\n" + "\n".join(_section(root, ["simpatterns"])).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed page is stale")
    args = ap.parse_args()
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"error: {PAGE.relative_to(ROOT)} is stale: run python scripts/cli_reference.py", file=sys.stderr)
            sys.exit(1)
        return
    atomic_write(PAGE, text)
    print(f"{PAGE.relative_to(ROOT)}: {text.count(chr(10) + '## ')} commands")


if __name__ == "__main__":
    main()
