"""The annotator's fast paths give exactly what the general code gives.

`validate_events` takes a shortcut for (int, dict of plain values) events, `sort_events`
computes params text only for ties, and `Trace` caches derived arrays (speed, touching
matrix, contact row lookup): each is checked here against the plain definition it replaces.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simpatterns.annotation import PatternEvent, params_key, sort_events
from simpatterns.detectors.contract import DetectorError, validate_events
from simpatterns.simulators.phyre import SceneBuilder, simulate

# ------------------------------------------------------------- validate_events
plain_scalar = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none(),
                         st.floats(allow_nan=False, allow_infinity=False, width=64))
plain_value = st.recursive(plain_scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=8)
plain_params = st.dictionaries(st.text(max_size=5), plain_value, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), plain_params), max_size=6))
def test_plain_events_come_back_equal_and_unshared(raw):
    out = validate_events(raw, "p", 10)
    assert json.dumps(out) == json.dumps([list(e) for e in raw])
    for (_, p_in), (_, p_out) in zip(raw, out):
        assert p_out is not p_in
        for k, v in p_in.items():  # lists are copied too: changing the result cannot change the input
            if isinstance(v, list):
                assert p_out[k] is not v
                assert type(p_out[k]) is list


def test_values_the_fast_path_does_not_take_are_still_converted_or_rejected():
    out = validate_events([(np.int64(2), {"a": np.float64(1.5), "b": (1, 2), "c": {"d": [np.int32(3)]}})], "p", 5)
    assert out == [(2, {"a": 1.5, "b": [1, 2], "c": {"d": [3]}})]
    assert type(out[0][0]) is int and type(out[0][1]["a"]) is float and type(out[0][1]["c"]["d"][0]) is int
    assert validate_events([[1, {"x": True, "y": None}]], "p", 5) == [(1, {"x": True, "y": None})]
    for bad, match in [
        ((1, {"x": math.nan}), "not finite"),
        ((1, {"x": [1.0, [math.inf]]}), "not finite"),
        ((1, {3: "x"}), "not a string"),
        ((1, {"x": object()}), "not JSON-like"),
        ((5, {}), "outside"),
        ((True, {}), "not an integer"),
        ((1, [1]), "not a dict"),
    ]:
        with pytest.raises(DetectorError, match=match):
            validate_events([bad], "p", 5)


# ----------------------------------------------------------------- sort_events
events_st = st.lists(
    st.builds(PatternEvent, st.sampled_from(["bounce", "a b", "bounce x"]), st.integers(0, 3),
              st.dictionaries(st.sampled_from(["object", "object_a", "x"]),
                              st.one_of(st.sampled_from(["red ball", "red ball 2", "red", "b\"q"]),
                                        st.integers(-2, 2), st.lists(st.integers(0, 2), max_size=2)),
                              max_size=2)),
    max_size=25)


@settings(max_examples=300, deadline=None)
@given(events_st)
def test_sort_events_is_the_full_key_sort(events):
    # ties on (frame, pattern) are ordered by the params' JSON text, which does not order names the way
    # Python strings do ('"red ball"' sorts after '"red ball 2"'); equal keys keep their input order
    expected = sorted(events, key=lambda e: (e.frame, e.pattern, json.dumps(e.params, sort_keys=True,
                                                                          separators=(",", ":"), default=str)))
    assert [id(e) for e in sort_events(events)] == [id(e) for e in expected]


def test_params_key_is_the_canonical_json_text():
    p = {"b": [1, 2.5], "a": "red ball", "c": None, "d": np.int64(4)}
    assert params_key(p) == json.dumps(p, sort_keys=True, separators=(",", ":"), default=str)


# ------------------------------------------------------------- Trace caches
@pytest.fixture(scope="module")
def trace():
    B = SceneBuilder()
    B.add("ball", scale=0.1, center_x=60, bottom=120).color = "green"
    B.add("ball", scale=0.1, center_x=140, bottom=0).color = "gray"
    B.add("bar", scale=0.5, angle=-10, left=90, bottom=40, dynamic=False)
    return simulate(B.build(require_goal=False), None, max_steps=200, stop_on_success=False).trace


def test_speed_is_the_norm_of_the_velocity_and_a_fresh_array(trace):
    assert np.array_equal(trace.speed(), np.linalg.norm(trace.velocity, axis=-1))
    assert np.array_equal(trace.speed("green ball"), np.linalg.norm(trace.velocity[:, trace.body_index("green ball")], axis=-1))
    s = trace.speed()
    s[:] = -1  # a caller may write into what it gets; the cache is not shared with it
    assert (trace.speed() >= 0).all()


def test_touching_matrix_is_shared_and_read_only(trace):
    m = trace.touching_matrix()
    assert m is trace.touching_matrix() and not m.flags.writeable
    expected = np.zeros_like(m)
    expected[trace.contact_frame, trace.contact_a, trace.contact_b] = True
    expected[trace.contact_frame, trace.contact_b, trace.contact_a] = True
    assert np.array_equal(m, expected)
    with pytest.raises(ValueError):
        m[0, 0, 0] = True


def test_dynamic_mask_and_names_are_fresh_copies(trace):
    mask, names = trace.dynamic_mask, trace.names
    mask[:] = False
    names.append("x")
    assert trace.dynamic_mask.tolist() == [b.dynamic for b in trace.bodies]
    assert trace.names == [b.name for b in trace.bodies]


def test_contact_row_finds_each_row_in_either_body_order(trace):
    K = trace.num_contacts
    assert K > 0
    rows = np.arange(K)
    assert np.array_equal(trace.contact_row(trace.contact_frame, trace.contact_a, trace.contact_b), rows)
    assert np.array_equal(trace.contact_row(trace.contact_frame, trace.contact_b, trace.contact_a), rows)
    k = K // 2
    assert int(trace.contact_row(int(trace.contact_frame[k]), int(trace.contact_b[k]), int(trace.contact_a[k]))) == k
    assert int(trace.contact_row(trace.num_frames + 3, 0, 1)) == -1  # no such frame
    assert int(trace.contact_row(0, 0, 0)) == -1  # a body does not touch itself


def test_contact_row_on_rows_out_of_the_documented_order(trace):
    perm = np.random.default_rng(0).permutation(trace.num_contacts)
    shuffled = dataclasses.replace(trace, **{f: getattr(trace, f)[perm] for f in (
        "contact_frame", "contact_a", "contact_b", "contact_point", "contact_normal", "contact_impulse")})
    rows = shuffled.contact_row(shuffled.contact_frame, shuffled.contact_a, shuffled.contact_b)
    assert np.array_equal(rows, np.arange(trace.num_contacts))


def test_contact_row_without_contacts(trace):
    empty = dataclasses.replace(trace, **{f: getattr(trace, f)[:0] for f in (
        "contact_frame", "contact_a", "contact_b", "contact_point", "contact_normal", "contact_impulse")})
    assert empty.contact_row([1, 2], [0, 1], [1, 0]).tolist() == [-1, -1]


def _touch_runs_by_scan(trace, gap):
    """`Trace.touch_runs` the plain way: each pair's contact frames walked in order."""
    frames = {}
    for f, a, b in zip(trace.contact_frame.tolist(), trace.contact_a.tolist(), trace.contact_b.tolist()):
        frames.setdefault((a, b), set()).add(f)
    out = []
    for (a, b), fs in sorted(frames.items()):
        fs = sorted(fs)
        first = fs[0]
        for prev, f in zip(fs, fs[1:] + [None]):
            if f is None or f - prev > gap + 1:
                out.append((a, b, first, prev))
                first = f
    return out


@pytest.mark.parametrize("gap", [0, 2, 40])
def test_touch_runs_are_each_pairs_runs_shared_and_read_only(trace, gap):
    runs = trace.touch_runs(gap)
    assert runs is trace.touch_runs(gap) and not any(r.flags.writeable for r in runs)
    assert [tuple(r) for r in zip(*(x.tolist() for x in runs))] == _touch_runs_by_scan(trace, gap)
    assert len(runs[0]) > 1  # the ball rolls off the bar and lands: more than one touch
    perm = np.random.default_rng(1).permutation(trace.num_contacts)  # rows in any order: the same runs
    shuffled = dataclasses.replace(trace, **{f: getattr(trace, f)[perm] for f in (
        "contact_frame", "contact_a", "contact_b", "contact_point", "contact_normal", "contact_impulse")})
    assert all(np.array_equal(x, y) for x, y in zip(shuffled.touch_runs(gap), runs))
    empty = dataclasses.replace(trace, **{f: getattr(trace, f)[:0] for f in (
        "contact_frame", "contact_a", "contact_b", "contact_point", "contact_normal", "contact_impulse")})
    assert all(x.size == 0 for x in empty.touch_runs(gap))
