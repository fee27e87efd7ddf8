"""Shared MuJoCo fixtures: a table scene, small rope traces."""

from __future__ import annotations


import numpy as np
import pytest

from mujoco_paths import TABLE_XML


@pytest.fixture(scope="session")
def table_trace():
    from simpatterns.simulators.mujoco import simulate

    return simulate(TABLE_XML, 1200, stride=4)


@pytest.fixture(scope="session")
def rope_dataset(tmp_path_factory):
    """12 short rope episodes of random actions (files + index), from 2-crossing starts."""
    from simpatterns.simulators.mujoco.dataset import build_rope_dataset

    out = tmp_path_factory.mktemp("rope_traces")
    build_rope_dataset(out, 12, 6, task="unknot", crossings=2, seed=3, stride=8)
    return out


@pytest.fixture(scope="session")
def rope_trace(rope_dataset):
    from simpatterns.trace import Trace

    return Trace.load(rope_dataset / "rope_000.npz")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
