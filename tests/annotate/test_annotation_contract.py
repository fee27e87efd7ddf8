"""The `Annotation` contract: events stored per pattern, the flat views on top, the file format."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from simpatterns.annotate import Annotation as ReExported
from simpatterns.annotate.annotator import annotate, run_detector
from simpatterns.annotation import Annotation, PatternEvent, params_key
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import get_template, simulate

# Written by the implementation that stored the flat, sorted event list (before events were
# stored per pattern), for the trace below with timings set to 0, with the library of then: the
# format must not change, except for the header's "episode" (the rollout's horizon) and "bodies"
# (their names, colours and roles), added since.
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "annotation_t00000_v3.jsonl"


@pytest.fixture(scope="module")
def reference_case():
    t = get_template("00000")
    trace = simulate(t.variant_scene(3), np.array([0.508, 0.780, 0.251])).trace
    labels = json.loads(REFERENCE.read_text().splitlines()[0])["patterns"]
    lib = PatternLibrary.builtin().subset(labels)
    ann = annotate(trace, lib, trace_id="t00000_v3")
    ann.timings = {k: 0.0 for k in ann.patterns}
    return trace, lib, ann


def test_save_is_byte_identical_to_the_flat_format(reference_case, tmp_path):
    trace, _, ann = reference_case
    saved = ann.save(tmp_path / "a.jsonl").read_text().splitlines()
    reference = REFERENCE.read_text().splitlines()
    header = json.loads(saved[0])
    assert header.pop("episode") == trace.episode.to_json() == {
        "frames": 770, "horizon": 1001, "stopped": "success", "goal": ["green ball", "blue ball"]}
    assert header.pop("bodies")[-1] == {"name": "red ball", "color": "red", "shape": "ball", "dynamic": True,
                                        "role": "agent"}
    assert json.dumps(header) == reference[0] and saved[1:] == reference[1:]
    loaded = Annotation.load(REFERENCE)
    assert loaded.equals(ann) and loaded.patterns == ann.patterns and loaded.episode is None
    assert loaded.save(tmp_path / "b.jsonl").read_bytes() == REFERENCE.read_bytes()
    again = Annotation.load(tmp_path / "a.jsonl")
    assert again.episode == trace.episode and [b.name for b in again.bodies] == trace.names


def test_annotator_stores_what_detectors_return(reference_case):
    trace, lib, ann = reference_case
    assert list(ann.pattern_events) == lib.order() == ann.patterns
    events = {}
    for label in lib.order():
        events[label] = run_detector(lib.get(label), trace, events)
        assert ann.events_of(label) == events[label]  # the detector's own (frame, params), no conversion
        assert ann.events_of(label) is ann.pattern_events[label]


def test_flat_views_agree_with_the_stored_events(reference_case):
    _, _, ann = reference_case
    flat = ann.events
    assert len(flat) == ann.num_events == sum(len(v) for v in ann.pattern_events.values()) > 50
    keys = [e.sort_key() for e in flat]
    assert keys == sorted(keys)
    assert ann.events is flat  # cached
    for label in ann.patterns:
        mine = ann.by_pattern(label)
        assert mine == [e for e in flat if e.pattern == label]
        assert sorted((f, params_key(p)) for f, p in ann.events_of(label)) == [(e.frame, params_key(e.params))
                                                                             for e in mine]
        assert ann.frames(label).tolist() == sorted({f for f, _ in ann.events_of(label)})
    m = ann.matrix().toarray()
    assert m.shape == (ann.num_frames, len(ann.patterns))
    for col, label in enumerate(ann.patterns):
        assert np.flatnonzero(m[:, col]).tolist() == ann.frames(label).tolist()


def test_from_events_rebuilds_the_same_annotation(reference_case):
    _, _, ann = reference_case
    again = Annotation.from_events(reversed(ann.events), ann.num_frames, list(ann.patterns), ann.dt, ann.trace_id)
    assert again.equals(ann) and again.events == ann.events
    assert pickle.loads(pickle.dumps(ann)).equals(ann)
    assert ReExported is Annotation


def test_lists_are_sorted_by_frame_stably_and_every_pattern_has_one():
    ann = Annotation({"p": [(5, {"k": 1}), (2, {}), (5, {"k": 0})], "extra": [(1, {})]}, 10, ["q", "p"])
    assert list(ann.pattern_events) == ["q", "p", "extra"]
    assert ann.events_of("p") == [(2, {}), (5, {"k": 1}), (5, {"k": 0})]  # one frame keeps the detector's order
    assert ann.events_of("q") == [] and ann.events_of("unknown") == []
    assert [e.params for e in ann.by_pattern("p")] == [{}, {"k": 0}, {"k": 1}]  # ties by params text
    assert [(e.pattern, e.frame) for e in ann.events] == [("extra", 1), ("p", 2), ("p", 5), ("p", 5)]
    assert ann.matrix().shape == (10, 2)  # columns: the patterns only


def test_equals_ignores_order_within_a_frame_but_not_content():
    a = Annotation({"p": [(5, {"k": 1}), (5, {"k": 0})]}, 10, ["p"])
    b = Annotation({"p": [(5, {"k": 0}), (5, {"k": 1})]}, 10, ["p"])
    c = Annotation({"p": [(5, {"k": 0}), (5, {"k": 2})]}, 10, ["p"])
    assert a.equals(b) and not a.equals(c)
    assert not a.equals(Annotation({"p": [(5, {"k": 1}), (5, {"k": 0})], "x": [(1, {})]}, 10, ["p"]))
    assert a.equals(Annotation.from_events([PatternEvent("p", 5, {"k": 0}), PatternEvent("p", 5, {"k": 1})], 10,
                                           ["p"]))
