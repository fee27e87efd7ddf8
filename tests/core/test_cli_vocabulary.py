"""One option name, one meaning: over every command of the CLI, an option name has
one value type, and a number option names its unit in its help.

"Meaning" here is concrete: (value type, unit phrase). The value type is the
option's element type (``int``, ``float``, ``str``, ``Path``, ``bool`` for
flags; a repeatable option counts as its element). For number options the unit
is the phrase in `UNITS`, which must appear in the option's help in every
command that has it: ``--budget`` (characters in one command, rollouts in
another) cannot pass, as no single phrase fits all its helps. A new number
option needs an entry here, which is the moment to check its name against
the others."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

import pytest

from simpatterns.cli import app
from simpatterns.cli_support import RENAMED_OPTIONS

UNITS: dict[str, str] = {  # number option -> the unit phrase its help names (case-insensitive)
    "--action-count": "actions",
    "--actions-per-episode": "actions",
    "--attempts": "attempts",
    "--batch": "samples",
    "--checkpoint-every": "updates",
    "--log-every": "updates",
    "--lr": "learning rate",
    "--resolution": "pixels",
    "--stages": "stages",
    "--updates": "updates",
    "--val-fraction": "fraction",
    "--width": "channels",
    "--batch-size": "proposals",
    "--bins": "bins",
    "--cap": "auccess@k",
    "--concurrency": "requests in flight",
    "--crossings": "crossings",
    "--episodes": "episodes",
    "--fps": "per second",
    "--frame": "frame",
    "--heldout": "share",
    "--gif-size": "pixels",
    "--image-size": "pixels",
    "--images": "frames",  # export (hf): frames rendered per trace
    "--jitter": "metres",
    "--k": "labels",
    "--limit": "questions",
    "--margin": "accuracy gain",
    "--max-chars": "characters",
    "--max-frames": "frames",
    "--max-images": "images",
    "--max-prompt-tokens": "tokens",
    "--max-requests": "requests",
    "--max-steps": "steps",
    "--max-tokens": "tokens",
    "--max-total-tokens": "tokens",
    "--max-wall-s": "seconds",
    "--per-template": "tasks",
    "--port": "port",
    "--questions-per-rollout": "questions",
    "--repeats": "runs",
    "--retries": "attempts per request",
    "--rollouts": "rollouts",
    "--rounds": "rounds",
    "--samples": "samples",
    "--sandbox-timeout": "seconds",
    "--scenes": "scene",
    "--seed": "seed",
    "--self-discovery": "labels",
    "--shard-rows": "traces",  # export (hf): traces per Parquet shard
    "--speed": "m/s",
    "--step-decay": "factor",
    "--step-size": "std",
    "--steps": "physics steps",
    "--stride": "every k-th",
    "--subsets": "subsets",
    "--t-end": "temperature",
    "--t-start": "temperature",
    "--temperature": "temperature",
    "--theta": "threshold",
    "--threads": "threads",
    "--timeout": "seconds",
    "--train-per-template": "tasks",
    "--trials": "seeds",
    "--variant": "variant",
    "--variants": "variants",
    "--window": "attempts",
    "--workers": "processes",
}
NUMBER = {"int", "float"}


def _walk(command, path=()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _walk(sub, (*path, name))


def _value_type(param) -> str:
    if getattr(param, "is_flag", False):
        return "bool"
    if hasattr(param, "bare_type"):  # typer's own click
        name = param.bare_type()
    else:  # pragma: no cover - plain click
        name = param.type.name
    match = re.fullmatch(r"(?:list|tuple)\[(\w+)(?:, \.\.\.)?\]", name)
    return match.group(1) if match else name


def _options():
    """(command path, long option name, value type, help) for every option of every command."""
    import typer.main

    rows = []
    for path, command in _walk(typer.main.get_command(app)):
        for param in getattr(command, "params", []):
            if param.param_type_name != "option":
                continue
            for name in (*param.opts, *param.secondary_opts):
                if name.startswith("--") and not name.startswith("--no-"):
                    rows.append((" ".join(path) or "simpatterns", name, _value_type(param), param.help or ""))
    return rows


def test_one_option_name_has_one_type_and_one_unit():
    rows = _options()
    assert len(rows) > 200  # every command was walked
    types: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    problems = []
    for path, name, kind, help_text in rows:
        types[name][kind].append(path)
        if kind in NUMBER:
            unit = UNITS.get(name)
            if unit is None:
                problems.append(f"{path} {name}: a number option with no unit in UNITS")
            elif unit not in help_text.lower():
                problems.append(f"{path} {name}: help {help_text!r} does not name its unit {unit!r}")
    for name, kinds in types.items():
        if len(kinds) > 1:
            problems.append(f"{name} has {len(kinds)} types: {dict(kinds)}")
    assert not problems, "\n".join(problems)
    assert "--budget" not in types  # six meanings once: each now names its unit


def test_a_short_flag_is_one_long_option_everywhere():
    """``-n`` may not be ``--attempts`` in one command and ``--rollouts`` in another, and every
    option has a long name (a short flag alone names no meaning)."""
    import typer.main

    longs: dict[str, set[str]] = defaultdict(set)
    bare = []
    for path, command in _walk(typer.main.get_command(app)):
        for param in getattr(command, "params", []):
            if param.param_type_name != "option":
                continue
            names = [*param.opts, *param.secondary_opts]
            long_names = [n for n in names if n.startswith("--")]
            if not long_names:
                bare.append(f"{' '.join(path)} {names}")
            for short in (n for n in names if not n.startswith("--")):
                longs[short].update(long_names or ["(none)"])
    assert not bare, bare
    assert len(longs) > 5  # the walk saw the short flags
    shared = {short: sorted(names) for short, names in longs.items() if len(names) > 1}
    assert not shared, shared


def test_the_vocabulary_check_catches_a_second_meaning():
    """The check above on a made-up pair: one name as characters and as rollouts."""
    helps = {"a": "characters of the text", "b": "simulated rollouts to spend"}
    unit = UNITS["--max-chars"]
    assert [k for k, h in helps.items() if unit not in h] == ["b"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "simpatterns.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", sorted(RENAMED_OPTIONS))
def test_a_renamed_option_is_refused_with_a_hint_naming_the_new_one(command):
    known = {name for path, name, _, _ in _options() if path == command}
    for old, new in RENAMED_OPTIONS[command].items():
        assert old not in known, (command, old)  # really gone
        assert (
            new in known
            or new.removeprefix("--no-") in {n.removeprefix("--") for n in known}
            or "--" + new.removeprefix("--no-") in known
        ), (command, new)
    old, new = next(iter(RENAMED_OPTIONS[command].items()))
    res = _cli(*command.split(), old, "1")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and res.stdout == ""
    assert lines == [f"error: simpatterns {command}: {old} was renamed; use {new}"], res.stderr
