from __future__ import annotations

import numpy as np
import pytest

from simpatterns.annotation import Annotation
from simpatterns.annotate.annotator import TRACE_ERROR_KEY, annotate, annotate_iter, annotate_many, run_detector
from simpatterns.detectors.contract import DetectorError, load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.trace import TraceFormatError


def test_events_follow_the_trace_contacts(drop_trace, small_library):
    ann = annotate(drop_trace, small_library, trace_id="drop")
    assert ann.patterns == ["touching", "first touch", "moving"]
    touching = ann.by_pattern("touching")
    assert len(touching) == drop_trace.num_contacts > 0
    # first touch: exactly one event per touching pair, at the pair's first contact frame
    pairs = {(e.params["object_a"], e.params["object_b"]) for e in touching}
    first = {(e.params["object_a"], e.params["object_b"]): e.frame for e in ann.by_pattern("first touch")}
    assert set(first) == pairs
    for (a, b), frame in first.items():
        assert frame == drop_trace.contact_intervals(a, b)[0][0]
    assert set(ann.timings) == set(ann.patterns) and all(v >= 0 for v in ann.timings.values())
    assert not ann.errors


def test_annotating_twice_is_identical(drop_trace, small_library, tmp_path):
    a = annotate(drop_trace, small_library, trace_id="x")
    b = annotate(drop_trace, small_library, trace_id="x")
    assert a.equals(b)
    assert [e.params for e in a.events] == [e.params for e in b.events]
    a.timings = b.timings = {}
    assert a.save(tmp_path / "a.jsonl").read_bytes() == b.save(tmp_path / "b.jsonl").read_bytes()
    loaded = Annotation.load(tmp_path / "a.jsonl")
    assert loaded.equals(a)


def test_detector_errors_are_recorded_not_raised(drop_trace, sources):
    lib = PatternLibrary.from_detectors(
        [load_detector(sources[k]) for k in ("touching", "broken", "after broken", "late", "moving")]
    )
    ann = annotate(drop_trace, lib, trace_id="scene-7")
    assert set(ann.errors) == {"broken", "after broken", "late"}
    assert "'broken'" in ann.errors["broken"] and "scene-7" in ann.errors["broken"]
    line = sources["broken"].splitlines().index("    return x / 0") + 1
    assert "ZeroDivisionError" in ann.errors["broken"] and f":{line})" in ann.errors["broken"]
    assert "skipped" in ann.errors["after broken"] and "'broken'" in ann.errors["after broken"]
    assert "outside" in ann.errors["late"]
    assert ann.by_pattern("touching") and ann.by_pattern("moving")  # the rest still ran


def test_detectors_cannot_modify_the_trace(drop_trace, sources, small_library):
    before = drop_trace.position.copy()
    lib = small_library.copy()
    lib.add(sources["vandal"], provenance="hand-written")
    ann = annotate(drop_trace, lib)
    assert "vandal" in ann.errors and "read-only" in ann.errors["vandal"]
    assert np.array_equal(drop_trace.position, before)
    assert drop_trace.position.flags.writeable  # restored afterwards


def test_run_detector_passes_only_declared_dependencies(drop_trace, sources):
    det = load_detector(sources["first touch"])
    touching = run_detector(load_detector(sources["touching"]), drop_trace, {})
    extra = {"touching": touching, "moving": [(0, {"object": "red ball"})]}
    assert run_detector(det, drop_trace, extra)  # the detector asserts it sees only 'touching'
    with pytest.raises(DetectorError, match="dependency 'touching'"):
        run_detector(det, drop_trace, {})
    # the caller's lists are not handed over: a detector mutating its input changes nothing outside
    greedy = load_detector(
        'PATTERN = "greedy"\nDESCRIPTION = "d"\nDEPENDS = ["touching"]\nPARAMS = []\n'
        'def detect(trace, events):\n'
        '    events["touching"][0][1]["object_a"] = "nobody"\n'
        '    events["touching"].clear()\n'
        '    return []\n'
    )
    kept = [(f, dict(p)) for f, p in touching]
    assert run_detector(greedy, drop_trace, extra) == []
    assert extra["touching"] == kept
    # nor, in a library, what the annotation keeps and what later detectors read
    lib = PatternLibrary.from_detectors([load_detector(sources["touching"]), greedy, load_detector(sources["first touch"])])
    ann = annotate(drop_trace, lib)
    assert not ann.errors and ann.events_of("touching") == kept and ann.events_of("first touch")


def test_annotate_many_in_a_pool_matches_serial(drop_traces, small_library, tmp_path):
    paths = []
    for k, t in enumerate(drop_traces[:2]):
        paths.append(t.save(tmp_path / f"t{k}.npz"))
    items = [paths[0], drop_traces[2], paths[1], drop_traces[3]]
    serial = annotate_many(items, small_library, workers=1)
    pooled = annotate_many(items, small_library, workers=2)
    assert [a.trace_id for a in pooled] == [str(paths[0]), "#1", str(paths[1]), "#3"]
    for s, p in zip(serial, pooled):
        assert s.equals(p) and s.trace_id == p.trace_id


def test_unreadable_trace_files(tmp_path, small_library, drop_trace):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    good = drop_trace.save(tmp_path / "good.npz")
    with pytest.raises(TraceFormatError, match="bad.npz"):
        annotate_many([good, bad], small_library)
    anns = annotate_many([good, bad], small_library, on_error="record")
    assert not anns[0].errors and anns[0].events
    assert TRACE_ERROR_KEY in anns[1].errors and "bad.npz" in anns[1].errors[TRACE_ERROR_KEY]


def test_annotate_iter_yields_each_trace_as_it_is_done(drop_traces, small_library):
    items = list(drop_traces[:4])
    many = annotate_many(items, small_library)
    for workers in (1, 2):
        seen = dict(annotate_iter(items, small_library, workers=workers))
        assert sorted(seen) == [0, 1, 2, 3]
        assert all(seen[i].equals(many[i]) and seen[i].trace_id == many[i].trace_id for i in seen)
    # stopping early stops the workers; what was yielded is whole
    it = annotate_iter(items, small_library, workers=2)
    i, first = next(it)
    it.close()
    assert first.equals(many[i])
    # the arguments are checked at the call, before anything runs
    with pytest.raises(ValueError, match="on_error"):
        annotate_iter(items, small_library, on_error="ignore")
    with pytest.raises(ValueError, match="trace_ids"):
        annotate_iter(items, small_library, trace_ids=["a"])


def test_annotate_iter_saves_each_annotation_where_it_is_made(drop_traces, small_library, tmp_path):
    from simpatterns.files import WriteError

    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    items = [drop_traces[0], bad, drop_traces[1], drop_traces[2]]
    for workers in (1, 2):
        dest = [tmp_path / f"w{workers}" / f"a{k}.annotation.jsonl" for k in range(len(items))]
        seen = dict(annotate_iter(items, small_library, workers=workers, on_error="record", save_to=dest))
        for k, ann in seen.items():
            if k == 1:  # an unreadable trace's empty annotation is not written
                assert TRACE_ERROR_KEY in ann.errors and not dest[k].exists()
            else:
                assert Annotation.load(dest[k]).equals(ann)
        assert sorted(p.name for p in (tmp_path / f"w{workers}").iterdir()) == ["a0.annotation.jsonl",
                                                                               "a2.annotation.jsonl",
                                                                               "a3.annotation.jsonl"]
    # a write that fails names the file, from a worker as from this process
    (tmp_path / "taken").write_text("a file where a folder should be")
    for workers in (1, 2):
        with pytest.raises(WriteError, match="taken"):
            list(annotate_iter([items[0], items[2]], small_library, workers=workers,
                               save_to=[tmp_path / "taken" / "x.jsonl", tmp_path / "taken" / "y.jsonl"]))
    with pytest.raises(ValueError, match="save_to"):
        annotate_iter(items, small_library, save_to=[tmp_path / "one"])
