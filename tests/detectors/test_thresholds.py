"""One source of truth: every built-in detector's threshold constant equals the shared configuration
that the Q&A answers read (simpatterns.detectors.thresholds)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from simpatterns.detectors.thresholds import BUILTIN_CONSTANTS, THRESHOLDS

BUILTIN = Path(importlib.import_module("simpatterns.detectors.builtin").__file__).parent


@pytest.mark.parametrize("file,constants", sorted(BUILTIN_CONSTANTS.items()))
def test_builtin_constants_equal_the_shared_thresholds(file, constants):
    module = importlib.import_module(f"simpatterns.detectors.builtin.{file[:-3]}")
    for const, field in constants.items():
        assert getattr(module, const) == pytest.approx(getattr(THRESHOLDS, field)), (file, const, field)


def test_every_rest_speed_constant_is_mapped():
    # a built-in that names a resting threshold must be listed, so a change cannot miss it
    for path in sorted(BUILTIN.glob("*.py")):
        text = path.read_text()
        for const in ("REST_SPEED", "REST_SPIN"):
            if re.search(rf"^{const} =", text, re.M):
                assert const in BUILTIN_CONSTANTS.get(path.name, {}), f"{path.name}: {const} not in BUILTIN_CONSTANTS"


def test_border_role_literal_matches():
    # built-ins compare roles with a literal: it must be the configured wall role
    roles = set()
    for path in BUILTIN.glob("*.py"):
        roles |= set(re.findall(r"role\s*[!=]=\s*\"([a-z_]+)\"", path.read_text()))
    assert roles == {THRESHOLDS.wall_role}


def test_thresholds_are_frozen_and_serialisable():
    with pytest.raises(AttributeError):
        THRESHOLDS.rest_speed = 2.0  # type: ignore[misc]
    d = THRESHOLDS.to_json()
    assert d["rest_speed"] == 1.0 and d["ground_names"] == ["ground"]
