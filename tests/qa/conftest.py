"""A small Q&A data set (real PHYRE rollouts, the built-in library), generated once per session."""

from __future__ import annotations

import pytest

from simpatterns.llm import RetryPolicy
from simpatterns.qa.generate import GenerateConfig, generate_dataset

SCENES = 10


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, builtin):
    """(directory, questions): 10 scenes x 10 questions, stability checked."""
    d = tmp_path_factory.mktemp("qa_data")
    questions = generate_dataset(d, GenerateConfig(scenes=SCENES, seed=11), builtin)
    return d, questions


@pytest.fixture
def fast_retry() -> RetryPolicy:
    return RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=0.01, jitter=0.0)
