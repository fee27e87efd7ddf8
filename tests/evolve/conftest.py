"""Shared fixtures: real PHYRE traces (template 00000, 300 steps) and small libraries."""

from __future__ import annotations

from pathlib import Path

import pytest
from evolve_fixtures import make_traces

from simpatterns.detectors.library import PatternLibrary


@pytest.fixture(scope="session")
def many_traces() -> list:
    return make_traces(40, seed=12)


@pytest.fixture(scope="session")
def traces(many_traces) -> list:
    return many_traces[:24]


@pytest.fixture(scope="session")
def trace_dir(tmp_path_factory, traces) -> Path:
    d = tmp_path_factory.mktemp("traces")
    for i, t in enumerate(traces):
        t.save(d / f"t{i:03d}.npz")
    return d


@pytest.fixture(scope="session")
def small_library(builtin) -> PatternLibrary:
    """Raw collision events only: a small base library keeps jobs fast and gains large."""
    return builtin.subset(["collision start", "collision end", "task complete"])
