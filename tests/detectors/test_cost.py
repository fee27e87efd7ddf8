"""A detector's cost in Python steps: the same number in every run, growing with Python-level work."""

from __future__ import annotations

import sys

import pytest

from simpatterns.detectors import load_detector
from simpatterns.detectors.cost import counted_call

VECTORISED = '''
PATTERN = "fast"
DESCRIPTION = "the red ball moves up"
DEPENDS = []
PARAMS = ["object_a"]

def detect(trace, events):
    vy = trace.velocity[:, 0, 1]
    frames = np.flatnonzero(vy > 0)
    return [(int(f), {"object_a": trace.objects[0].name}) for f in frames[:3]]
'''

LOOPING = VECTORISED.replace('"fast"', '"slow"').replace('''    vy = trace.velocity[:, 0, 1]
    frames = np.flatnonzero(vy > 0)''', '''    frames = []
    for t in range(trace.num_frames):
        if trace.velocity[t, 0, 1] > 0:
            frames.append(t)''')


def test_steps_are_deterministic_and_count_python_work(scene):
    tiny_trace = scene("drop").trace
    fast, slow = load_detector(VECTORISED), load_detector(LOOPING)
    (ev_a, a1), (_, a2) = counted_call(fast.detect, tiny_trace, {}), counted_call(fast.detect, tiny_trace, {})
    ev_b, b = counted_call(slow.detect, tiny_trace, {})
    assert a1 == a2 and 0 < a1 < 10  # a handful of lines, the same each time
    assert ev_a == ev_b  # the same events...
    assert b >= 2 * tiny_trace.num_frames  # ...but a loop body counts once per frame
    assert counted_call(slow.detect, tiny_trace, {})[1] == b


def test_counting_restores_an_outer_tracer_and_counts_on_failure(scene):
    def outer(frame, event, arg):
        return None

    failing = load_detector(VECTORISED.replace("frames[:3]]", "frames[:3]] + 1/0"))
    before = sys.gettrace()
    sys.settrace(outer)
    try:
        counted_call(load_detector(VECTORISED).detect, scene("drop").trace, {})
        assert sys.gettrace() is outer
        with pytest.raises(ZeroDivisionError):
            counted_call(failing.detect, scene("drop").trace, {})
        assert sys.gettrace() is outer
    finally:
        sys.settrace(before)


def test_counting_stops_at_the_limit(scene):
    trace = scene("drop").trace
    slow = load_detector(LOOPING)
    full = counted_call(slow.detect, trace, {})
    cut = counted_call(slow.detect, trace, {}, limit=50)
    assert cut[1] == 50 < full[1] and cut[0] == full[0]  # the same events, the cost read as the limit
