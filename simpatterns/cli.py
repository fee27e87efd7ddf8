"""The ``simpatterns`` command.

Each subpackage that offers commands has a ``commands.py`` with
``register(app: typer.Typer) -> None``; this module only assembles them, so
command code lives beside the code it drives.
"""

from __future__ import annotations

import importlib

import typer

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
    pretty_exceptions_show_locals=False,
)

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
