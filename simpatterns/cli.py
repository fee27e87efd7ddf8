"""The ``simpatterns`` command.

Each subpackage that offers commands has a ``commands.py`` with
``register(app: typer.Typer) -> None``; this module only assembles them, so
command code lives beside the code it drives.

`main` imports only the module of the command being run (`COMMANDS` says
which module registers which top-level command; a test checks it): importing
all of them (MuJoCo, Gymnasium, the DSL checker, ...) cost 0.4 s of a 0.6 s
start-up. ``--help`` without a command, and an unknown command, load all.
``simpatterns.cli.app`` (for tests and tools) is the app with every command.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

import typer

from simpatterns.cli_support import ConventionGroup, fail, note, set_debug, version_callback

COMMANDS: dict[str, tuple[str, ...]] = {  # module -> the top-level commands it registers
    "simpatterns.simulators.commands": ("scenes", "simulate", "dataset"),
    "simpatterns.simulators.mujoco.commands": ("mujoco",),
    "simpatterns.detectors.commands": ("library",),
    "simpatterns.annotate.commands": ("annotate",),
    "simpatterns.dsl.commands": ("reward",),
    "simpatterns.llm.commands": ("llm",),
    "simpatterns.evolve.commands": ("discover", "evolve"),
    "simpatterns.envs.commands": ("env",),
    "simpatterns.optimize.commands": ("optimize",),
    "simpatterns.qa.commands": ("qa",),
    "simpatterns.value.commands": ("value",),
    "simpatterns.agents.commands": ("agent",),
    "simpatterns.integrations.commands": ("export", "import"),
    "simpatterns.viewer.commands": ("view",),
    "simpatterns.demo": ("demo",),
}
COMMAND_MODULES = tuple(COMMANDS)
BUILTIN_COMMANDS = ("examples",)  # defined here


def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug/--no-debug",
                               help="Show the traceback of an error (also SIMPATTERNS_DEBUG=1)."),
) -> None:
    """Annotated physics traces, discovered event detectors and reward programs."""
    set_debug(debug or bool(os.environ.get("SIMPATTERNS_DEBUG")))


def examples_cmd(
    out: Path = typer.Option(Path("examples"), "--out", "-o", help="where to copy them (created)"),
    force: bool = typer.Option(False, "--force/--no-force", help="overwrite files already there"),
) -> None:
    """Copy the shipped examples into a folder, so the README's commands run as written.

    Goal programs, discovery labels and MuJoCo scenes, as the README names them (``examples/goals/...``)."""
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


def build_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The ``simpatterns`` app with the commands of ``modules`` (and the built-in ones)."""
    app = typer.Typer(
        name="simpatterns",
        help="Annotated physics traces, discovered event detectors and reward programs.",
        no_args_is_help=True,
        add_completion=False,
        cls=ConventionGroup,  # one error line on stderr, exit codes, Ctrl-C (simpatterns.cli_support)
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    app.command("examples")(examples_cmd)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # a subpackage without commands is fine; a missing dependency inside one is not
            if not (exc.name and (name == exc.name or name.startswith(exc.name + "."))):
                raise
            continue
        module.register(app)
    return app


def modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules a command line needs: the one registering its command (the first
    argument that is not an option: the root options take no value); all of them when there
    is no command or it is unknown (help lists every command, errors suggest among them)."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command in BUILTIN_COMMANDS or (command is None and "--version" in argv and "--help" not in argv):
        return ()
    return tuple(m for m, names in COMMANDS.items() if command in names) or COMMAND_MODULES


def __getattr__(name: str) -> Any:
    if name == "app":  # built on first use: importing this module stays cheap
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    build_app(modules_for(sys.argv[1:]))()


if __name__ == "__main__":
    main()
