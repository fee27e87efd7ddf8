"""A small Q&A data set (real PHYRE rollouts, the built-in library), generated once per session."""

from __future__ import annotations

import pytest

from simpatterns.qa.generate import GenerateConfig, generate_dataset


@pytest.fixture(scope="session")
def qa_dataset(tmp_path_factory, builtin):
    """(directory, questions): 4 scenes x 5 questions, stability checked."""
    d = tmp_path_factory.mktemp("qa_data")
    return d, generate_dataset(d, GenerateConfig(scenes=4, questions_per_rollout=5, seed=3), builtin)
