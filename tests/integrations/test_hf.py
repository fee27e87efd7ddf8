"""`simpatterns export --format hf`: a folder `datasets.load_dataset` loads (features declared, frames
as Image features, a dataset card), and `simpatterns import` rebuilds traces and annotations bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

datasets = pytest.importorskip("datasets")

from simpatterns.annotate import annotate
from simpatterns.annotation import Annotation
from simpatterns.cli import app
from simpatterns.detectors import PatternLibrary
from simpatterns.simulators.phyre import load_scene, simulate
from simpatterns.trace import Trace

RELS = ("t0", "sub/t1", "sub/t2", "no_annotation")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    lib = PatternLibrary.builtin()
    for rel, (tid, variant, action) in zip(RELS[:3], [("00000", 1, [0.4, 0.9, 0.2]), ("00007", 3, [0.5, 0.8, 0.3]),
                                                      ("00002", 0, [0.3, 0.7, 0.25])]):
        trace = simulate(load_scene(tid, variant), action, stride=3).trace
        trace.save(root / f"{rel}.npz")
        annotate(trace, lib, trace_id=rel).save(root / f"{rel}.annotation.jsonl")
    Trace.load(root / "t0.npz").save(root / "no_annotation.npz")
    return root


def _export(traces, out, *extra):
    res = CliRunner().invoke(app, ["export", str(traces), "--format", "hf", "-o", str(out), "--shard-rows", "2",
                                   "--images", "2", "--image-size", "64", *extra])
    assert res.exit_code == 0, res.output
    return res


def test_load_dataset_reads_every_config_with_declared_features(traces, tmp_path):
    out = tmp_path / "hf"
    res = _export(traces, out)
    assert "4 traces, 3 annotations" in res.stderr and "8 frames" in res.stderr
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["train-00000-of-00002.parquet",
                                                                  "train-00001-of-00002.parquet"]
    tr = datasets.load_dataset(str(out), split="train")  # the default config: traces
    assert tr.num_rows == 4 and set(tr["trace_id"]) == set(RELS)
    row = tr[[r for r in tr["trace_id"]].index("sub/t1")]
    original = Trace.load(traces / "sub" / "t1.npz")
    assert np.array_equal(np.asarray(row["position"], dtype=original.position.dtype), original.position)
    assert row["template"] == "00007" and row["bodies"] == list(original.names)

    frames = datasets.load_dataset(str(out), "frames", split="train")
    assert isinstance(frames.features["image"], datasets.Image) and frames.num_rows == 8
    img = frames[0]["image"]
    assert img.size == (64, 64) and len(img.getcolors(4096) or ()) > 2  # a drawing, not a blank
    ann = datasets.load_dataset(str(out), "annotations", split="train")
    assert ann.num_rows == 3 and all("red ball" in t for t in ann["text"])
    ev = datasets.load_dataset(str(out), "events", split="train")
    assert ev.num_rows == sum(len(Annotation.load(traces / f"{r}.annotation.jsonl").events) for r in RELS[:3])

    card = (out / "README.md").read_text()
    head = card.split("---")[1]
    assert "license: mit" in head and "config_name: frames" in head and "dtype: image" in head
    assert "## Generation settings" in card and "seeds:" in card and "00007" in card


def test_import_rebuilds_traces_and_annotations_bit_for_bit(traces, tmp_path):
    _export(traces, tmp_path / "hf", "--no-text")
    res = CliRunner().invoke(app, ["import", str(tmp_path / "hf"), "-o", str(tmp_path / "back")])
    assert res.exit_code == 0, res.output
    for rel in RELS:
        back, orig = Trace.load(tmp_path / "back" / f"{rel}.npz"), Trace.load(traces / f"{rel}.npz")
        assert back == orig
        for name in ("time", "position", "velocity", "angle", "contact_impulse"):
            a, b = getattr(back, name), getattr(orig, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    for rel in RELS[:3]:
        back = Annotation.load(tmp_path / "back" / f"{rel}.annotation.jsonl")
        orig = Annotation.load(traces / f"{rel}.annotation.jsonl")
        assert back == orig and back.pattern_events == orig.pattern_events
    assert not (tmp_path / "back" / "no_annotation.annotation.jsonl").exists()


def test_a_second_export_with_fewer_shards_leaves_no_stale_one(traces, tmp_path):
    _export(traces, tmp_path / "hf")
    res = CliRunner().invoke(app, ["export", str(traces), "--format", "hf", "-o", str(tmp_path / "hf"),
                                   "--images", "0"])
    assert res.exit_code == 0, res.output
    assert [p.name for p in (tmp_path / "hf" / "traces").iterdir()] == ["train-00000-of-00001.parquet"]
    assert datasets.load_dataset(str(tmp_path / "hf"), split="train").num_rows == 4
    assert not (tmp_path / "hf" / "frames").exists() and "config_name: frames" not in (tmp_path / "hf" / "README.md").read_text()


def test_bad_input_is_one_line(tmp_path):
    res = CliRunner().invoke(app, ["export", str(tmp_path), "--format", "hf", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no .npz traces found" in res.stderr
    res = CliRunner().invoke(app, ["export", str(tmp_path), "--format", "arrow"])
    assert res.exit_code == 2 and "--format 'arrow'" in res.stderr
    (tmp_path / "hf" / "traces").mkdir(parents=True)
    (tmp_path / "hf" / "README.md").write_text("---\n---\n")
    res = CliRunner().invoke(app, ["import", str(tmp_path / "hf")])
    assert res.exit_code == 2 and "no train-*.parquet shards" in res.stderr and len(res.stderr.splitlines()) == 1
