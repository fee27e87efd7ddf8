from __future__ import annotations

from pathlib import Path

import pytest
from viewer_browser import Browser


@pytest.fixture
def browser():
    b = Browser()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def t19(tmp_path_factory) -> Path:
    """A full 1000-step PHYRE rollout (template 00019, its solution) with its annotation beside it."""
    from simpatterns.annotate.annotator import annotate
    from simpatterns.dsl.program import builtin_library
    from simpatterns.simulators.phyre import get_template, simulate

    t = get_template(19)
    rollout = simulate(t.variant_scene(0), t.solution(0), stop_on_success=False)
    folder = tmp_path_factory.mktemp("t19")
    path = rollout.trace.save(folder / "t19.npz")
    annotate(rollout.trace, builtin_library("phyre"), trace_id=path.name).save(folder / "t19.annotation.jsonl")
    return path
