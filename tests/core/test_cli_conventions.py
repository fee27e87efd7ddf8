"""The command line's conventions (simpatterns.cli_support), over every command:
bad input is one line on stderr with exit code 2 and nothing left on disk;
Ctrl-C stops long jobs promptly, keeps finished work and resumes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.files import sweep_stale, temporary_sibling
from simpatterns.trace import Trace

ROOT = Path(__file__).resolve().parents[2]


def _walk(command, path=()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _walk(sub, (*path, name))


def _click_app():
    import typer.main

    return typer.main.get_command(app)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder with a trace, a file and a folder in the way, and a fake library."""
    d = tmp_path_factory.mktemp("bad")
    res = CliRunner().invoke(app, ["simulate", "-t", "0", "-v", "1", "--out", str(d / "t.npz")])
    assert res.exit_code == 0, res.output
    (d / "afile").write_text("x")
    (d / "adir").mkdir()
    (d / "some.npz").write_text("not a library")
    (d / "bad.rwd").write_text('AND(EVENT("a")')
    return d


BAD = {
    "stride 0": ["simulate", "-t", "0", "--stride", "0"],
    "boolean with a value": ["simulate", "-t", "0", "--full", "true"],
    "unknown template": ["simulate", "-t", "99"],
    "action of two numbers": ["simulate", "-t", "0", "--action", "0.5,0.3"],
    "action outside the unit cube": ["simulate", "-t", "0", "--action", "0.5,1.5,0.3"],
    "out is a folder": ["simulate", "-t", "0", "--out", "adir"],
    "out under a file": ["simulate", "-t", "0", "--out", "afile/x.npz"],
    "gif is a folder": ["simulate", "-t", "0", "--gif", "adir"],
    "png under a file": ["simulate", "-t", "0", "--png", "afile/x.png"],
    "good out, gif under a file": ["simulate", "-t", "0", "--out", "newdir/x.npz", "--gif", "afile/x.gif"],
    "annotate into a new folder with a file in the way": ["annotate", "t.npz", "-o", "afile/new/deeper"],
    "unknown action kind": ["dataset", "--templates", "0", "--actions", "sideways:3", "--out", "d"],
    "dataset out is a file": ["dataset", "--templates", "0", "--actions", "random:1", "--out", "afile"],
    "dataset workers 0": ["dataset", "--templates", "0", "--out", "d", "-j", "0"],
    "missing trace": ["annotate", "missing.npz"],
    "library is a file": ["annotate", "t.npz", "--library", "some.npz"],
    "annotate out under a file": ["annotate", "t.npz", "-o", "afile/sub"],
    "unknown option": ["annotate", "t.npz", "--bogus"],
    "missing goal": ["reward", "check", "missing.rwd"],
    "eval missing goal": ["reward", "eval", "missing.rwd", "t.npz"],
    "rollouts 0": ["optimize", "-t", "0", "--rollouts", "0"],
    "optimize out is a folder": ["optimize", "-t", "0", "--rollouts", "2", "-o", "adir"],
    "optimize gif under a file": ["optimize", "-t", "0", "--rollouts", "2", "--gif", "afile/b.gif"],
    "unknown pattern": ["library", "show", "no such pattern"],
    "discover library is a file": ["discover", "--traces", "nowhere", "--labels", "x.toml", "--offline",
                                   "--out", "some.npz"],
}


@pytest.mark.parametrize("args", BAD.values(), ids=list(BAD))
def test_bad_input_is_one_line_on_stderr_exit_2_and_nothing_written(workdir, args, monkeypatch):
    monkeypatch.chdir(workdir)
    before = sorted(p.name for p in workdir.rglob("*"))
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", *args], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "200"})
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr and "--debug" not in res.stderr
    assert res.stdout == ""
    assert sorted(p.name for p in workdir.rglob("*")) == before  # nothing created, no temporary file


def test_program_errors_go_to_stderr_exit_1(workdir):
    """A goal that does not parse is reported on stderr (stdout keeps only results), exit 1."""
    for args in (["reward", "check", "bad.rwd"], ["reward", "eval", "bad.rwd", "t.npz"]):
        res = subprocess.run([sys.executable, "-m", "simpatterns.cli", *args], capture_output=True, text=True,
                             timeout=120, cwd=workdir)
        assert res.returncode == 1 and res.stdout == "", (args, res.stdout)
        assert "bad.rwd:1:" in res.stderr and "error[unexpected-end]" in res.stderr, res.stderr


def test_user_text_in_square_brackets_is_printed_as_it_is(tmp_path):
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", "annotate", str(tmp_path / "[red]x[/red].npz")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "[red]x[/red].npz" in res.stderr


def test_version_debug_and_help_conventions():
    from simpatterns.cli_support import package_version

    runner = CliRunner()
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"simpatterns {package_version()}"
    res = runner.invoke(app, ["--debug", "simulate", "-t", "0", "--action", "x"])
    assert res.exit_code == 2
    # flags take no value (help shows none); -j is --workers, -o is --out, -q is --quiet everywhere
    seen = 0
    for path, command in _walk(_click_app()):
        for param in getattr(command, "params", []):
            names = set(param.opts) | set(param.secondary_opts)
            if "-j" in names:
                assert "--workers" in names, path
            if "-o" in names:
                assert "--out" in names, path
            if "-q" in names:
                assert "--quiet" in names, path
            if getattr(param, "is_flag", False):
                seen += 1
                assert not param.metavar, (path, param.opts)  # help shows no value for a flag
    assert seen > 10
    help_text = runner.invoke(app, ["simulate", "--help"], terminal_width=200).output
    assert "<bool>" not in help_text and "--full" in help_text and "--no-full" in help_text


def test_sweep_removes_temporaries_of_dead_processes_only(tmp_path):
    target = tmp_path / "out.txt"
    mine = temporary_sibling(target)
    mine.write_text("in progress")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f".out.txt.tmp-{int(dead.stdout)}-abcd1234"
    gone.write_text("left by a killed run")
    folder = tmp_path / f".lib.old-{int(dead.stdout)}-00ff00ff"
    folder.mkdir()
    assert sorted(p.name for p in sweep_stale(tmp_path)) == sorted([gone.name, folder.name])
    assert mine.exists() and not gone.exists() and not folder.exists()


# ------------------------------------------------------------------ Ctrl-C
def _interrupt(args, cwd, wait_for, timeout=120.0):
    """Run the command, send SIGINT once ``wait_for()`` holds; return (seconds to exit, result)."""
    proc = subprocess.Popen([sys.executable, "-m", "simpatterns.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not wait_for():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job made no progress"
        time.sleep(0.05)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return time.monotonic() - start, proc.returncode, out, err


def _index(folder):
    path = folder / "index.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_ctrl_c_in_dataset_keeps_finished_traces_and_the_index_and_resumes(tmp_path):
    out = tmp_path / "ds"
    args = ["dataset", "--templates", "0,1,2,3", "--variants", "6", "--actions", "random:2", "--out", str(out),
            "-j", "2", "--stride", "4"]
    took, rc, _, err = _interrupt(args, tmp_path, lambda: len(list(out.glob("*.npz"))) >= 3)
    assert rc == 130 and took < 2.0, (took, err)
    assert "Traceback" not in err and "run the same command to resume: simpatterns dataset" in err
    kept = _index(out)
    on_disk = sorted(p.name for p in out.glob("*.npz"))
    # the index lists what the parent received; a worker may have finished one more trace
    assert 2 <= len(kept) and {r["file"] for r in kept} <= set(on_disk) and len(on_disk) < 48
    for r in kept:
        assert Trace.load(out / r["file"]).success == r["success"]
    for name in on_disk:
        Trace.load(out / name)  # complete, valid traces only
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file
    stamps = {name: (out / name).stat().st_mtime_ns for name in on_disk}
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", *args, "-q"], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    assert len(_index(out)) == 48
    assert {f: (out / f).stat().st_mtime_ns for f in stamps} == stamps  # finished traces were not redone


def test_ctrl_c_in_annotate_keeps_finished_annotations_and_resumes(tmp_path):
    traces = tmp_path / "traces"
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", "dataset", "--templates", "0,1", "--variants", "4",
                          "--actions", "random:1", "--out", str(traces), "-j", "2", "-q"], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "ann"
    # plots make it slow enough to stop: the interrupt lands while annotating or while rendering
    args = ["annotate", str(traces), "-o", str(out), "-j", "2", "--plot"]
    took, rc, _, err = _interrupt(args, tmp_path, lambda: len(list(out.glob("*.annotation.jsonl"))) >= 1)
    assert rc == 130 and took < 2.0, (took, err)
    assert "Traceback" not in err and "interrupted:" in err and "run the same command to resume: simpatterns annotate" in err
    from simpatterns.annotation import Annotation

    done = sorted(out.glob("*.annotation.jsonl"))
    plots = sorted(out.glob("*.timeline.png"))
    assert 1 <= len(done) <= 8 and len(plots) < 8
    # workers write what they finish, also results the parent never received: the count is of files
    assert f"interrupted: {len(done)} of 8 annotation(s) written" in err, err
    for p in done:
        assert Annotation.load(p).num_frames > 0
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    stamps = {p.name: p.stat().st_mtime_ns for p in done + plots}
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", *args, "-q"], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"{len(done)} of 8 annotation(s) up to date, skipped" in res.stderr
    assert len(list(out.glob("*.annotation.jsonl"))) == 8 and len(list(out.glob("*.timeline.png"))) == 8
    assert {p: (out / p).stat().st_mtime_ns for p in stamps} == stamps  # nothing finished was redone


def test_an_interrupt_swallowed_by_a_destructor_is_delivered_again():
    # Python cannot unwind a Ctrl-C that lands in a __del__ (it prints "Exception ignored" and
    # goes on); the command line delivers it again so the command still stops
    from simpatterns.cli_support import sigterm_as_interrupt

    class Bomb:
        def __del__(self):
            raise KeyboardInterrupt

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            Bomb()  # collected at once: its __del__ raises inside the collector
            for _ in range(2000):
                time.sleep(0.001)
            reached.append("end")
    assert not reached


def test_annotate_many_with_workers_runs_in_a_plain_script(tmp_path):
    """The README's snippet, as a script without a __main__ guard."""
    res = subprocess.run([sys.executable, "-m", "simpatterns.cli", "dataset", "--templates", "0", "--variants", "3",
                          "--actions", "random:1", "--out", str(tmp_path / "runs"), "-q"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    script = tmp_path / "snippet.py"
    script.write_text(
        "from pathlib import Path\n"
        "from simpatterns.detectors import PatternLibrary\n"
        "from simpatterns.annotate import annotate_iter, annotate_many\n"
        "lib = PatternLibrary.builtin()\n"
        "paths = sorted(Path('runs').glob('*.npz'))\n"
        "anns = annotate_many(paths, lib, workers=2, progress=True)\n"
        "Path('out').mkdir(exist_ok=True)\n"
        "for i, ann in annotate_iter(paths, lib, workers=2):\n"
        "    ann.save(f'out/{i}.annotation.jsonl')\n"
        "print(len(anns), 'annotations')\n")
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3 annotations" and len(list((tmp_path / "out").iterdir())) == 3
    assert "Error" not in res.stderr


def test_examples_are_found_inside_the_package_and_copied_out(tmp_path):
    from simpatterns import examples
    from simpatterns.dsl.synthesize import DEFAULT_EXAMPLES_DIR

    assert DEFAULT_EXAMPLES_DIR == examples.goals_dir() and (DEFAULT_EXAMPLES_DIR / "bucket_second.rwd").is_file()
    res = CliRunner().invoke(app, ["examples", "-o", str(tmp_path / "ex")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ex" / "goals" / "paper_verbatim.rwd").is_file()
    assert (tmp_path / "ex" / "labels" / "labels.toml").is_file()
    assert (tmp_path / "ex" / "mujoco" / "table_drop.xml").is_file()
    assert not (tmp_path / "ex" / "__init__.py").exists()
    shutil.rmtree(tmp_path / "ex")


def test_tables_keep_the_identifying_column_whole_at_a_narrow_width():
    import io

    from rich.console import Console
    from rich.table import Table

    from simpatterns.cli_support import print_table

    buf = io.StringIO()
    console = Console(file=buf, width=40, markup=False)
    table = Table(title="rollouts")
    for col in ("rollout", "frames", "most frequent patterns"):
        table.add_column(col)
    for k in range(6):
        table.add_row(f"T00000_V000_random{k}.npz", "1001", "grid cell transition x40, collision start x3")
    print_table(table, console)
    text = buf.getvalue()
    assert all(f"T00000_V000_random{k}.npz" in text for k in range(6)) and "…" not in text


def test_the_command_map_names_what_each_module_registers():
    # main() imports only the module of the command being run, found through cli.COMMANDS
    import importlib

    import typer

    from simpatterns import cli

    for module, names in cli.COMMANDS.items():
        one = typer.Typer()
        importlib.import_module(module).register(one)
        registered = [c.name for c in one.registered_commands] + [g.name for g in one.registered_groups]
        assert sorted(registered) == sorted(names), module
    everything = set(typer.main.get_command(app).commands)
    assert everything == {n for names in cli.COMMANDS.values() for n in names} | set(cli.BUILTIN_COMMANDS)
    assert cli.modules_for(["--debug", "annotate", "runs", "-j", "2"]) == ("simpatterns.annotate.commands",)
    assert cli.modules_for(["reward", "check", "x.rwd"]) == ("simpatterns.dsl.commands",)
    assert cli.modules_for(["examples", "-o", "x"]) == () and cli.modules_for(["--version"]) == ()
    assert cli.modules_for([]) == cli.modules_for(["--help"]) == cli.modules_for(["nosuch"]) == cli.COMMAND_MODULES


def test_a_command_runs_without_importing_the_other_commands_modules():
    code = ("import sys; from simpatterns import cli; sys.argv = ['simpatterns', 'scenes']; "
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: cli.main()\n"
            "    except SystemExit as e: assert not e.code, e.code\n"
            "print(sorted(m for m in sys.modules if m in cli.COMMANDS or m.startswith('mujoco')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['simpatterns.simulators.commands']"
