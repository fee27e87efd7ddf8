"""The built-in detectors that were rewritten for speed emit exactly the events of the
versions they replaced (frozen in tests/data/reference_detectors/) on a few hundred
traces: every template, several scenes, random valid actions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simpatterns.annotate.annotator import annotate, run_detector
from simpatterns.annotate.phases import guarded_view
from simpatterns.detectors.contract import load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate

REFERENCE = Path(__file__).parent.parent / "data" / "reference_detectors"
SCENES_PER_TEMPLATE = 4
ACTIONS_PER_SCENE = 3  # 25 templates x 4 scenes x 3 actions = 300 traces


def _cases():
    rng = np.random.default_rng(18)
    for tid in TEMPLATES:
        t = get_template(tid)
        if t.num_variants:
            scenes = [t.variant_scene(k % t.num_variants) for k in range(SCENES_PER_TEMPLATE)]
        else:
            params = list(zip(range(SCENES_PER_TEMPLATE), t.valid_param_sets()))
            scenes = [t.scene(p) for _, p in params]
        for scene in scenes:
            found = 0
            while found < ACTIONS_PER_SCENE:
                a = rng.random(3)
                if check_action(scene, a) is None:
                    found += 1
                    yield scene, a


@pytest.fixture(scope="module")
def annotated():
    lib = PatternLibrary.builtin()
    out = []
    for scene, a in _cases():
        trace = simulate(scene, a).trace
        out.append((guarded_view(trace), annotate(trace, lib)))
    return lib, out


@pytest.mark.parametrize("name", sorted(p.stem for p in REFERENCE.glob("*.py")))
def test_fast_detector_emits_the_reference_events(annotated, name):
    lib, cases = annotated
    ref = load_detector((REFERENCE / f"{name}.py").read_text(), f"{name}.py")
    det = lib.get(ref.pattern)
    assert det.source != ref.source  # the library's version is the rewritten one
    fired = 0
    for trace, ann in cases:
        deps = {label: [(e.frame, dict(e.params)) for e in ann.by_pattern(label)] for label in det.depends}
        want = run_detector(ref, trace, deps)
        got = run_detector(det, trace, deps)
        assert json.dumps(got) == json.dumps(want), (ref.pattern, trace.meta.get("template"))
        fired += bool(want)
    assert len(cases) >= 300 and fired >= 10  # the comparison saw the pattern fire in many traces
