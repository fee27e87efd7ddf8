"""The annotator with the built-in guided library on real template rollouts."""

from __future__ import annotations

import numpy as np
import pytest

from simpatterns.annotate.annotator import annotate
from simpatterns.annotate.distances import annotation_distance_matrix
from simpatterns.annotate.text import annotation_text
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import check_action, get_template, simulate


@pytest.fixture(scope="module")
def rollouts():
    out = []
    rng = np.random.default_rng(7)
    for tid in ("00000", "00002", "00007"):
        t = get_template(tid)
        scene = t.scene(next(t.valid_param_sets()))
        while True:
            a = rng.random(3)
            if check_action(scene, a) is None:
                break
        out.append(simulate(scene, a, max_steps=600).trace)
    return out


def test_builtin_annotation_is_clean_and_deterministic(rollouts):
    lib = PatternLibrary.builtin()
    for trace in rollouts:
        a = annotate(trace, lib, trace_id="x")
        assert not a.errors, a.errors
        assert a.patterns == lib.labels
        # raw simulator events come through as patterns with the same frames
        starts = sorted(e.frame for e in trace.raw_events("CollisionStart"))
        assert sorted(e.frame for e in a.by_pattern("collision start")) == starts
        assert a.equals(annotate(trace, lib, trace_id="x"))
        text = annotation_text(trace, a, budget_chars=3000)
        assert len(text) <= 3000 and "Timeline" in text


def test_builtin_annotation_distances_are_symmetric(rollouts):
    lib = PatternLibrary.builtin()
    anns = [annotate(t, lib) for t in rollouts]
    d = annotation_distance_matrix(anns, lib.labels)
    assert d.shape == (3, 3) and np.allclose(d, d.T) and np.all(np.isfinite(d))
