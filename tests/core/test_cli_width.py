"""Every table the CLI prints is readable at 80 columns: the real commands, run on
small inputs with COLUMNS=80, print no line wider than 80 cells and cut no cell
with an ellipsis ("…"); the key cells (names, ids, numbers) appear whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 80


def _run(args, cwd):
    res = subprocess.run(
        [sys.executable, "-m", "simpatterns.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "COLUMNS": str(WIDTH)},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two traces, their annotations, a tiny offline discovery run."""
    d = tmp_path_factory.mktemp("width")
    _run(["dataset", "--templates", "0,1", "--variants", "2", "--actions", "random:1", "--out", "ds", "-q"], d)
    (d / "labels.toml").write_text(
        '[[label]]\nlabel = "bounce"\ndescription = "An object rebounds."\nseed = "builtin:bounce"\n'
    )
    return d


def _check(text: str) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= WIDTH, f"{cell_len(line)} cells: {line}"
        assert "…" not in line, line


def test_library_list_keeps_names_and_drops_params_at_80(folder):
    res = _run(["library", "list"], folder)
    _check(res.stdout)
    from simpatterns.detectors.library import PatternLibrary

    lib = PatternLibrary.builtin()
    for entry in lib.entries():  # every label whole, on one line
        assert any(entry.label in line for line in res.stdout.splitlines()), entry.label
    assert "params" in res.stderr and "left out" in res.stderr  # says what it left out
    wide = subprocess.run(
        [sys.executable, "-m", "simpatterns.cli", "library", "list"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "params" in wide.stdout and "left out" not in wide.stderr  # a wide terminal shows every column


def test_optimize_header_and_result_fit_80(folder):
    res = _run(["optimize", "-t", "0", "--rollouts", "3", "--seed", "1"], folder)
    _check(res.stdout)
    head = next(line for line in res.stdout.splitlines() if "score" in line)
    for key in ("x", "y", "r", "score", "success", "samples"):
        assert key in head.split(), head


@pytest.mark.parametrize(
    "args",
    [
        ["scenes"],
        ["simulate", "-t", "0", "--out", "t.npz"],
        ["annotate", "ds", "-o", "ann", "--force"],
        ["reward", "eval", str(ROOT / "examples" / "goals" / "a01_touch_at_end_red_never_green.rwd"), "ds"],
        ["mujoco", "trace", str(ROOT / "examples" / "mujoco" / "table_drop.xml"), "--steps", "20"],
        ["mujoco", "rope-configs"],
        ["demo", "--out", "demo", "--rollouts", "15", "--trials", "1", "--workers", "1"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_command_tables_fit_80(folder, args):
    res = _run(args, folder)
    _check(res.stdout)
    assert res.stdout.strip()


def test_a_title_longer_than_the_terminal_folds(folder):
    """A table titled by a long path (a deep checkout) folds the title, cutting nothing."""
    deep = folder / ("a_rather_long_folder_name_" * 3) / "goals"
    deep.mkdir(parents=True, exist_ok=True)
    program = deep / "a01_touch_at_end_red_never_green.rwd"
    program.write_text((ROOT / "examples" / "goals" / program.name).read_text())
    assert len(str(program)) > WIDTH
    res = _run(["reward", "eval", str(program), "ds"], folder)
    _check(res.stdout)
    assert str(program) in res.stdout.replace("\n", "")  # the whole path, folded


def test_discover_and_its_report_fit_80(folder):
    res = _run(
        [
            "discover",
            "--traces",
            "ds",
            "--labels",
            "labels.toml",
            "--offline",
            "--samples",
            "2",
            "-o",
            "lib",
            "-q",
            "-j",
            "1",
            "--seed",
            "0",
        ],
        folder,
    )
    _check(res.stdout)
    assert any(line.split()[:1] in (["bounce"], ["│"]) and "bounce" in line for line in res.stdout.splitlines())
    res = _run(["evolve", "report", "lib.run"], folder)
    _check(res.stdout)
    row = next(line for line in res.stdout.splitlines() if line.startswith("bounce"))
    record = (
        json.loads((folder / "lib" / "library.json").read_text())
        if (folder / "lib" / "library.json").exists()
        else None
    )
    assert row.split()[1] == "2" and (record is None or "bounce" in json.dumps(record))


def test_qa_eval_table_fits_80_without_folding_a_word(folder):
    """The accuracy table against the project's scripted OpenAI-compatible server."""
    from simpatterns.llm.testing import Reply, ScriptedLLMServer

    _run(["qa", "generate", "--out", "qa", "--scenes", "3", "-q"], folder)
    with ScriptedLLMServer(default=Reply("ANSWER: yes")) as server:
        res = _run(
            [
                "qa",
                "eval",
                "qa",
                "--out",
                "run",
                "--llm",
                "openai",
                "--base-url",
                server.base_url,
                "--conditions",
                "objects,annotation",
                "--limit",
                "10",
                "-q",
            ],
            folder,
        )
    _check(res.stdout)
    words = res.stdout.split()
    for key in ("condition", "objects", "annotation", "identification", "prediction"):
        assert key in words, res.stdout  # whole, not folded over two lines


@pytest.mark.parametrize("width", [200, 80, 40])
def test_rows_stacked_into_one_print_as_added_one_by_one(width):
    """`add_rows` (the annotate summary's hundreds of rows as one row of multi-line cells)
    prints the same characters as rows added one by one, styles and a narrow terminal included."""
    import io

    from rich.console import Console

    from simpatterns.cli_support import add_rows, new_table, print_table

    rows = [
        (f"runs/ds/T{k:05d}_V000_random{k}.npz", str(1000 - 7 * k), str(k % 4), f"{k % 3}/30", "", "-")
        for k in range(12)
    ]
    printed = []
    for stacked in (False, True):
        table = new_table(
            "12 trace(s)", ("trace", "frames", "events", "fired", "note", "errors"), right=("frames", "events")
        )
        if stacked:
            add_rows(table, rows)
            assert len(table.rows) == 1
        else:
            for row in rows:
                table.add_row(*row)
        console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system="truecolor")
        print_table(table, console)
        printed.append(console.file.getvalue())
    assert printed[0] == printed[1] and "T00011_V000_random11.npz" in printed[0]
