"""Export to Parquet and import back: traces and annotations equal after the round trip."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from simpatterns.annotate import annotate  # noqa: E402
from simpatterns.annotate.exchange import read_parquet  # noqa: E402
from simpatterns.annotation import Annotation  # noqa: E402
from simpatterns.cli import app  # noqa: E402
from simpatterns.detectors import PatternLibrary  # noqa: E402
from simpatterns.simulators.phyre import load_scene, simulate  # noqa: E402
from simpatterns.trace import Trace  # noqa: E402


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    lib = PatternLibrary.builtin()
    for i, (tid, variant, action) in enumerate([("00000", 1, None), ("00007", 3, [0.5, 0.8, 0.3])]):
        scene = load_scene(tid, variant)
        rollout = simulate(scene, action or [0.4, 0.9, 0.2], stride=3)
        folder = root / ("sub" if i else "")
        rollout.trace.save(folder / f"t{i}.npz")
        annotate(rollout.trace, lib, trace_id=f"t{i}").save(folder / f"t{i}.annotation.jsonl")
    Trace.load(root / "t0.npz").save(root / "no_annotation.npz")  # a trace without an annotation
    return root


def test_round_trip_keeps_traces_and_annotations_equal(dataset, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["export", str(dataset), "--format", "parquet", "-o", str(tmp_path / "pq")])
    assert res.exit_code == 0, res.output
    assert "3 traces, 2 annotations" in res.stderr
    res = runner.invoke(app, ["import", str(tmp_path / "pq"), "-o", str(tmp_path / "back")])
    assert res.exit_code == 0, res.output
    for rel in ("t0", "sub/t1", "no_annotation"):
        assert Trace.load(tmp_path / "back" / f"{rel}.npz") == Trace.load(dataset / f"{rel}.npz")
    for rel in ("t0", "sub/t1"):
        back = Annotation.load(tmp_path / "back" / f"{rel}.annotation.jsonl")
        orig = Annotation.load(dataset / f"{rel}.annotation.jsonl")
        assert back == orig and back.pattern_events == orig.pattern_events and back.errors == orig.errors
    assert not (tmp_path / "back" / "no_annotation.annotation.jsonl").exists()


def test_the_files_are_plain_tables(dataset, tmp_path):
    CliRunner().invoke(app, ["export", str(dataset), "-o", str(tmp_path)])
    traces = pq.read_table(tmp_path / "traces.parquet")
    assert traces.num_rows == 3 and set(traces.column("trace_id").to_pylist()) == {"t0", "sub/t1", "no_annotation"}
    row = {r["trace_id"]: r for r in traces.to_pylist()}["sub/t1"]
    original = Trace.load(dataset / "sub" / "t1.npz")
    assert row["template"] == "00007" and row["variant"] == 3 and row["action"] == [0.5, 0.8, 0.3]
    assert row["frames"] == original.num_frames == len(row["position"]) and row["bodies"] == list(original.names)
    assert row["success"] == original.success
    events = pq.read_table(tmp_path / "events.parquet").to_pylist()
    ann = Annotation.load(dataset / "sub" / "t1.annotation.jsonl")
    mine = [e for e in events if e["trace_id"] == "sub/t1"]
    assert len(mine) == len(ann.events)
    first = mine[0]
    assert first["time"] == pytest.approx(first["frame"] * ann.dt) and isinstance(json.loads(first["params"]), dict)
    texts = pq.read_table(tmp_path / "annotations.parquet").column("text").to_pylist()
    assert all(t and "red ball" in t for t in texts)


def test_pandas_reads_them(dataset, tmp_path):
    pd = pytest.importorskip("pandas")
    CliRunner().invoke(app, ["export", str(dataset), "-o", str(tmp_path)])
    assert len(pd.read_parquet(tmp_path / "traces.parquet")) == 3


def test_read_parquet_names_a_missing_or_bad_file(tmp_path):
    res = CliRunner().invoke(app, ["import", str(tmp_path)])
    assert res.exit_code == 2 and "no traces.parquet" in res.stderr
    (tmp_path / "traces.parquet").write_text("junk")
    res = CliRunner().invoke(app, ["import", str(tmp_path)])
    assert res.exit_code == 2 and "traces.parquet: cannot read Parquet" in res.stderr
    with pytest.raises(Exception, match="traces.parquet"):
        read_parquet(tmp_path)


def test_import_checks_each_trace_header_like_load(dataset, tmp_path):
    """A header edited inside traces.parquet is refused as `Trace.load` refuses it, naming the row and field."""
    from simpatterns.annotate.exchange import ExchangeError

    res = CliRunner().invoke(app, ["export", str(dataset), "-o", str(tmp_path / "pq")])
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "pq" / "traces.parquet")
    rows = table.to_pylist()
    header = json.loads(rows[0]["header"])
    header["meta"]["stride"] = 1.5
    rows[0]["header"] = json.dumps(header)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), tmp_path / "pq" / "traces.parquet")
    with pytest.raises(ExchangeError, match=rf"traces.parquet: trace '{rows[0]['trace_id']}': header field "
                                            r"'meta.stride' is 1.5 \(a number\), expected an integer >= 1"):
        read_parquet(tmp_path / "pq")
    res = CliRunner().invoke(app, ["import", str(tmp_path / "pq"), "-o", str(tmp_path / "back")])
    assert res.exit_code == 2 and "meta.stride" in res.stderr and len(res.stderr.strip().splitlines()) == 1
