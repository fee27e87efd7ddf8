"""The ``simpatterns`` command.

Each subpackage that offers commands has a ``commands.py`` with
``register(app: typer.Typer) -> None``; this module only assembles them, so
command code lives beside the code it drives.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import typer

from simpatterns.cli_support import ConventionGroup, fail, note, set_debug, version_callback

COMMAND_MODULES = (
    "simpatterns.simulators.commands",
    "simpatterns.simulators.mujoco.commands",
    "simpatterns.detectors.commands",
    "simpatterns.annotate.commands",
    "simpatterns.dsl.commands",
    "simpatterns.llm.commands",
    "simpatterns.evolve.commands",
    "simpatterns.envs.commands",
    "simpatterns.optimize.commands",
    "simpatterns.qa.commands",
    "simpatterns.agents.commands",
    "simpatterns.demo",
)

app = typer.Typer(
    name="simpatterns",
    help="Annotated physics traces, discovered event detectors and reward programs.",
    no_args_is_help=True,
    add_completion=False,
    cls=ConventionGroup,  # one error line on stderr, exit codes, Ctrl-C (simpatterns.cli_support)
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug/--no-debug",
                               help="Show the traceback of an error (also SIMPATTERNS_DEBUG=1)."),
) -> None:
    """Annotated physics traces, discovered event detectors and reward programs."""
    set_debug(debug or bool(os.environ.get("SIMPATTERNS_DEBUG")))

@app.command("examples")
def examples_cmd(
    out: Path = typer.Option(Path("examples"), "--out", "-o", help="where to copy them (created)"),
    force: bool = typer.Option(False, "--force/--no-force", help="overwrite files already there"),
) -> None:
    """Copy the shipped examples (goal programs, discovery labels, MuJoCo scenes) into a folder,
    so the README's commands (``examples/goals/...``) run as written."""
    from simpatterns import examples

    source = Path(str(examples.path())).resolve()
    if out.exists() and out.resolve() == source:
        note(f"{out} is the shipped examples folder itself; nothing to copy")
        return
    if out.exists() and not out.is_dir():
        fail(f"{out}: is a file; give a folder")
    try:
        written = examples.copy_to(out, force=force)
    except OSError as exc:
        fail(f"{out}: cannot copy the examples ({exc.strerror or exc})")
    note(f"{len(written)} example file(s) -> {out}" + ("" if force else " (existing files kept; --force overwrites)"))


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as exc:
        # a subpackage without commands is fine; a missing dependency inside one is not
        if not (exc.name and (_name == exc.name or _name.startswith(exc.name + "."))):
            raise
        continue
    _module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
