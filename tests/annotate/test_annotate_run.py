"""`simpatterns.annotate.run.annotate_paths`: the annotate command's work, from Python."""

from __future__ import annotations

import pytest

from simpatterns.annotate.run import (
    AnnotateError,
    Extras,
    annotate_paths,
    annotation_file,
)
from simpatterns.annotation import Annotation
from simpatterns.detectors.library import PatternLibrary
from simpatterns.simulators.phyre import get_template, simulate


@pytest.fixture(scope="module")
def traces_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    (root / "sub").mkdir()
    for k, (path, x) in enumerate(((root / "a.npz", 0.3), (root / "sub" / "b.npz", 0.7))):
        simulate(get_template("00000").variant_scene(k), [x, 0.9, 0.5], max_steps=120).trace.save(path)
    return root


def test_annotates_skips_what_is_up_to_date_and_redoes_with_force(traces_dir, tmp_path):
    lib = PatternLibrary.builtin()
    lines: list[str] = []
    first = annotate_paths(traces_dir, lib, out=tmp_path, log=lines.append)
    assert sorted(r.file.name for r in first.rows.values()) == ["a.npz", "b.npz"]
    assert first.skipped == 0 and first.exit_code == 0 and not first.interrupted and first.written == 2
    saved = Annotation.load(annotation_file(tmp_path / "sub", "b"))  # out keeps the folder layout
    row = next(r for r in first.rows.values() if r.file.name == "b.npz")
    assert (row.frames, row.events, row.patterns) == (saved.num_frames, len(saved.events), len(lib))
    assert row.cells()[0] == str(traces_dir / "sub" / "b.npz")

    again = annotate_paths(traces_dir, lib, out=tmp_path, log=lines.append)
    assert again.skipped == 2 and not again.rows
    assert lines == ["2 of 2 annotation(s) up to date, skipped (--force redoes them)"]
    kept = {p: Annotation.load(p) for p in tmp_path.rglob("*.annotation.jsonl")}
    forced = annotate_paths(traces_dir, lib, out=tmp_path, force=True, workers=2)
    assert len(forced.rows) == 2 and forced.skipped == 0
    # 2 workers write the same files and send back the same rows (bar the detectors' times)
    assert all(Annotation.load(p).equals(a) for p, a in kept.items()) and len(kept) == 2
    assert all(forced.rows[i].cells()[:4] == first.rows[i].cells()[:4] for i in first.rows)


def test_extras_are_rendered_also_for_skipped_traces(traces_dir, tmp_path):
    lib = PatternLibrary.builtin()
    annotate_paths(traces_dir, lib, out=tmp_path)
    report = annotate_paths(traces_dir, lib, out=tmp_path, extras=Extras(text=True, max_chars=500))
    assert report.skipped == 2 and report.renders == report.rendered == 2
    text = (tmp_path / "a.txt").read_text()
    assert "red ball" in text and "cut to fit the size budget" in text  # max_chars reached the text


def test_a_single_trace_shows_its_text(traces_dir, tmp_path):
    shown: list[str] = []
    report = annotate_paths(traces_dir / "a.npz", PatternLibrary.builtin(), out=tmp_path,
                            extras=Extras(text=True), show_text=shown.append)
    assert len(report.rows) == 1 and report.renders == 0
    assert shown == [(tmp_path / "a.txt").read_text().rstrip("\n")]


def test_unreadable_traces_are_counted_and_reported(traces_dir, tmp_path):
    bad = tmp_path / "in"
    bad.mkdir()
    (bad / "broken.npz").write_bytes(b"not a trace")
    (bad / "a.npz").write_bytes((traces_dir / "a.npz").read_bytes())
    lines: list[str] = []
    report = annotate_paths(bad, PatternLibrary.builtin(), log=lines.append)
    assert report.unreadable == 1 and len(report.rows) == 1 and report.exit_code == 1
    assert len(lines) == 1 and lines[0].startswith("unreadable ") and "broken.npz" in lines[0]


def test_bad_input_is_refused_before_any_work(traces_dir, tmp_path):
    with pytest.raises(AnnotateError, match="no .npz traces found"):
        annotate_paths(tmp_path, PatternLibrary.builtin())
    (tmp_path / "a.annotation.jsonl").mkdir()  # a folder where an annotation goes
    with pytest.raises(AnnotateError, match="a.annotation.jsonl"):
        annotate_paths(traces_dir, PatternLibrary.builtin(), out=tmp_path)
    assert not (tmp_path / "sub").exists()
