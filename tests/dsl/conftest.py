"""Fixtures of the DSL tests (builders live in dsl_builders.py)."""

from __future__ import annotations

import pytest

from dsl_builders import SIGNATURES


@pytest.fixture
def signatures() -> dict[str, list[str]]:
    return dict(SIGNATURES)
