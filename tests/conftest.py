import atexit
import importlib
import os
import shutil
import signal
import tempfile

import pytest
from process_tree import no_process_outlives_its_test  # noqa: F401 - an autouse fixture for every test

os.environ.setdefault("MUJOCO_GL", "egl")

# Caches (the agents' menus, the PHYRE simulation cache) go to a folder of this run, never the
# home directory: SIMPATTERNS_CACHE is where every cache lives (simpatterns.files.cache_dir).
if "SIMPATTERNS_CACHE" not in os.environ:
    os.environ["SIMPATTERNS_CACHE"] = tempfile.mkdtemp(prefix="simpatterns-cache-")
    atexit.register(shutil.rmtree, os.environ["SIMPATTERNS_CACHE"], ignore_errors=True)

# A suite started in the background (`nohup pytest ... &`) inherits an ignored SIGINT, and an
# ignored signal stays ignored across exec: the processes the Ctrl-C tests start would never see
# their KeyboardInterrupt. A Python handler here resets to the default in every child at exec,
# so each child Python installs its own (pytest's process and each xdist worker run this).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Rich wraps at the terminal's width (80 columns when stdout is not a tty), so a
# long temporary path could be folded mid-name. Tests read CLI output rendered
# at one fixed, wide width, and messages are never hard-wrapped (soft wrap), so
# no path length can fold a name.
CLI_WIDTH = 200


@pytest.fixture(scope="session")
def builtin():
    """The built-in pattern library, loaded once (tests read it, never change it)."""
    from simpatterns.detectors.library import PatternLibrary

    return PatternLibrary.builtin()


@pytest.fixture(autouse=True)
def _fixed_width_cli_output():
    from simpatterns import cli

    consoles = []
    for name in cli.COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        console = getattr(module, "console", None)
        if console is not None:
            consoles.append((console, console._width, console.soft_wrap))
            console.width = CLI_WIDTH
            console.soft_wrap = True
    yield
    for console, width, soft_wrap in consoles:
        console._width = width
        console.soft_wrap = soft_wrap
