"""The README's fenced blocks as test sessions, and the helpers a session script calls.

A block is claimed by the HTML comment on the line before its fence:

- ``<!-- readme-test: NAME -->``: the block runs in session NAME (shell, Python,
  or a ``$ command`` transcript whose printed output is compared);
- ``<!-- readme-test: NAME $ COMMAND -->``: the block is COMMAND's printed
  output; the session runs COMMAND at that point and compares;
- ``<!-- readme-test: NAME server -->`` (a JSON block): the script of the
  scripted LLM server session NAME talks to (``simpatterns.llm.testing``);
- ``<!-- readme-test: skip (WHY) -->``: not run, for the reason given.

Blocks of one session run in document order as one Python script in a fresh
folder, so a snippet sees the files and names the ones before it made.
A block that is not code (language ``text``, ``json``, ...; no ``$ `` lines)
needs no comment; a shell or Python block, or a transcript, must have one.

Output comparison: a line ``...`` matches any number of lines; elsewhere ``...``
in a line matches any run of characters (a line ending in ``...`` is a prefix);
trailing spaces are ignored.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!-- readme-test: (.*?) -->\s*$")
CODE_LANGUAGES = {"bash", "sh", "shell", "console", "python", "py", "pycon"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int              # of the opening fence, 1-based
    language: str
    body: str
    marker: str | None     # the text inside ``readme-test: ... `` or None

    @property
    def where(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}:{self.line}"

    @property
    def is_code(self) -> bool:
        return (self.language in CODE_LANGUAGES or self.language == ""
                or any(line.lstrip().startswith("$ ") for line in self.body.splitlines()))

    @property
    def skipped(self) -> str | None:
        """The reason, when the marker says skip."""
        if self.marker is None:
            return None
        m = re.fullmatch(r"skip \((.+)\)", self.marker, re.S)
        return m.group(1).strip() if m else None

    @property
    def session(self) -> str | None:
        if self.marker is None or self.skipped is not None:
            return None
        name = self.marker.split(" $ ", 1)[0].strip()
        return name[:-len(" server")] if name.endswith(" server") else name

    @property
    def is_server_script(self) -> bool:
        return self.session is not None and " $ " not in self.marker and self.marker.endswith(" server")

    @property
    def command(self) -> str | None:
        """For an output block: the command whose output it is."""
        if self.marker is None or " $ " not in self.marker:
            return None
        return self.marker.split(" $ ", 1)[1].strip()


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, language = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"{path.name}:{i + 1}: a fence that is never closed")
        body = textwrap.dedent("\n".join(lines[i + 1:j]))
        mm = MARKER.match(lines[i - 1]) if i else None
        found.append(Block(path, i + 1, language, body, mm.group(1).strip() if mm else None))
        i = j + 1
    return found


def dangling_markers(path: Path) -> list[str]:
    """Markers not directly followed by a fence (a typo would silently claim nothing)."""
    lines = path.read_text().splitlines()
    return [f"{path.name}:{k + 1}" for k, line in enumerate(lines)
            if MARKER.match(line) and not (k + 1 < len(lines) and FENCE.match(lines[k + 1]))]


def session_script(session: list[Block]) -> str:
    """One Python script running the session's blocks in order."""
    parts = ["import readme_support as _readme", ""]
    for block in session:
        if block.is_server_script:
            continue
        parts.append(f"# ---- {block.where}")
        parts.append(f"_readme.started({block.where!r})")
        if block.command is not None:
            parts.append(f"_readme.transcript({('$ ' + block.command + chr(10) + block.body)!r}, {block.where!r})")
        elif block.language in ("python", "py"):
            parts.append(block.body)
        elif block.language in ("bash", "sh", "shell"):
            parts.append(f"_readme.shell({block.body!r}, {block.where!r})")
        else:
            parts.append(f"_readme.transcript({block.body!r}, {block.where!r})")
        parts.append("")
    parts.append("_readme.started(None)")
    return "\n".join(parts)


# ---- what a session script calls

def _line_matches(expected: str, got: str) -> bool:
    expected, got = expected.rstrip(), got.rstrip()
    if "..." not in expected:
        return expected == got
    pattern = ".*".join(re.escape(piece) for piece in expected.split("..."))
    return re.fullmatch(pattern, got, re.S) is not None


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Match printed lines against the README's, with ``...`` elisions."""
    def match(i: int, k: int) -> bool:
        while i < len(expected):
            if expected[i].strip() == "...":
                return any(match(i + 1, kk) for kk in range(k, len(actual) + 1))
            if k >= len(actual) or not _line_matches(expected[i], actual[k]):
                return False
            i, k = i + 1, k + 1
        return k == len(actual)
    return match(0, 0)


_clock: list = []  # (where, wall, cpu) at the start of the block running now


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the commands a block ran)."""
    own, done = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


def started(where: str | None) -> None:
    """A block starts (None: the session ended). With ``README_TIMINGS=FILE`` in the environment,
    the block before it appends ``where<TAB>wall s<TAB>CPU s`` to FILE: how the long blocks are
    found (CPU seconds over the 2 cores a page assumes, when the machine is busy)."""
    wall, cpu = time.perf_counter(), _cpu()
    out = os.environ.get("README_TIMINGS")
    if _clock and out:
        with open(out, "a") as fh:
            fh.write(f"{_clock[0][0]}\t{wall - _clock[0][1]:.1f}\t{cpu - _clock[0][2]:.1f}\n")
    _clock[:] = [(where, wall, cpu)] if where else []


def _fail(where: str, message: str) -> None:
    print(f"README block {where}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def shell(body: str, where: str) -> None:
    res = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", body], capture_output=True, text=True, timeout=600)
    if res.returncode != 0 or "Traceback" in res.stderr:
        _fail(where, f"exit {res.returncode}\n{body}\n--- stderr\n{res.stderr[-4000:]}")


def transcript(body: str, where: str) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands and commands[-1][0].endswith("\\") and not commands[-1][1]:
            commands[-1] = (commands[-1][0] + "\n" + line, [])      # a continued command
        elif commands:
            commands[-1][1].append(line)
    if not commands:
        _fail(where, "a transcript without a `$ command` line")
    for command, expected in commands:
        # stderr into stdout: the lines in the order a terminal shows them
        res = subprocess.run(["bash", "-o", "pipefail", "-c", command], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=600)
        printed = res.stdout.splitlines()
        while expected and not expected[-1].strip():
            expected.pop()
        if "Traceback (most recent call last)" in res.stdout or not output_matches(expected, printed):
            _fail(where, f"$ {command}\n--- README\n" + "\n".join(expected) + "\n--- printed\n" + "\n".join(printed))
