"""A detector's cost in Python steps: the same number in every run, growing with Python-level work."""

from __future__ import annotations

import numpy as np

from simpatterns.detectors import PatternLibrary
from simpatterns.detectors.cost import counted_detect

VECTORISED = '''
PATTERN = "fast"
DESCRIPTION = "the red ball moves up"
DEPENDS = []
PARAMS = ["object_a"]

def detect(trace, events):
    """A docstring stays a docstring."""
    vy = trace.velocity[:, 0, 1]
    frames = np.flatnonzero(vy > 0)
    return [(int(f), {"object_a": trace.objects[0].name}) for f in frames[:3]]
'''

LOOPING = VECTORISED.replace('"fast"', '"slow"').replace('''    vy = trace.velocity[:, 0, 1]
    frames = np.flatnonzero(vy > 0)''', '''    frames = []
    t = 0
    while t < trace.num_frames:
        if above(trace.velocity[t, 0, 1]):
            frames.append(t)
        t += 1''') + '''

def above(v):
    return v > 0
'''


def test_steps_are_deterministic_and_count_python_work(scene):
    trace = scene("drop").trace
    fast, fast_steps = counted_detect(VECTORISED, "<fast>")
    slow, slow_steps = counted_detect(LOOPING, "<slow>")
    assert fast.__doc__ == "A docstring stays a docstring."
    runs = []
    for _ in range(2):
        events = fast(trace, {})
        runs.append(fast_steps.take())
    assert runs[0] == runs[1] == 1 + min(3, int((trace.velocity[:, 0, 1] > 0).sum()))  # the call, the elements
    assert slow(trace, {}) == events  # the same events...
    # ...but each frame costs a loop iteration and a call to `above`
    assert slow_steps.take() == 1 + 2 * trace.num_frames + len(events)


def test_builtin_detectors_are_cheap(scene):
    """The floor the time penalty measures against (200 steps per trace) is far above what
    the vectorised built-in detectors take (about 20)."""
    trace = scene("stack").trace
    lib = PatternLibrary.builtin()
    ann_events: dict[str, list] = {}
    costs = {}
    for label in lib.order():
        det = lib.get(label)
        detect, counter = counted_detect(det.source, det.filename)
        ann_events[label] = detect(trace, {d: ann_events[d] for d in det.depends})
        costs[label] = counter.take()
    assert np.median(list(costs.values())) < 50 and max(costs.values()) < 200, costs
