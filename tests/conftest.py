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


# Longest first: with two workers the suite ends when the last long test ends, so tests that take
# many seconds start first and the short ones fill in around them (`--maxschedchunk` in pyproject
# hands each worker a couple of tests at a time). Seconds measured on the 2-core VM; a name that no
# longer matches only loses its place in the queue.
SLOW_TESTS = {
    "tests/llm/test_local_model.py::test_reward_compile": 79,
    "tests/llm/test_local_model.py::test_discover_with": 73,
    "tests/qa/test_local_llm.py::": 70,
    "tests/agents/test_agent_local_llm.py::": 44,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/integrations.md": 36,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/value.md": 28,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/discover.md": 27,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/viewer.md": 21,
    "tests/core/test_readme.py::test_block_runs_as_written[README.md": 20,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/annotate.md": 20,
    "tests/value/test_value.py::test_resume_after_sigkill": 19,
    "tests/value/test_value.py::test_cli_build_train_eval": 18,
    "tests/llm/test_local_model.py::test_llama_cpp_grammar": 17,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/mujoco.md": 16,
    "tests/core/test_ray_backend.py::test_map_submit": 15,
    "tests/dsl/test_constrained_grammar.py::test_generated_grammars": 14,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/qa.md": 14,
    "tests/core/test_readme.py::test_block_runs_as_written[docs/guide/agents.md": 13,
    "tests/dsl/test_dsl_fuzz.py::test_fuzz_ten_thousand": 12,
    "tests/core/test_no_orphans.py::": 10,
    "tests/qa/test_pipeline.py::test_killed_run_resumes": 10,
    "tests/evolve/test_hostile_job.py::": 10,
    "tests/evolve/test_reproducible.py::": 9,
    "tests/integrations/test_entry_point.py::": 9,
    "tests/value/test_value.py::test_a_tiny_model": 8,
    "tests/optimize/test_optimize_resume.py::": 8,
    "tests/core/test_readme.py::": 8,
    "tests/evolve/test_discovery.py::": 7,
    "tests/core/test_cli_conventions.py::test_ctrl_c": 7,
    "tests/envs/test_rl_ecosystem.py::test_sb3_subproc": 7,
}


def expected_seconds(nodeid: str) -> float:
    return max((s for prefix, s in SLOW_TESTS.items() if nodeid.startswith(prefix)), default=0.0)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -expected_seconds(item.nodeid))  # stable: the rest keep their order
