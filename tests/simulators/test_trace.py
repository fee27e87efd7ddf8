"""Trace contract: save/load round trip, corrupt files, helpers."""

import json
import zipfile

import numpy as np
import pytest

from simpatterns.simulators.phyre import get_template, simulate
from simpatterns.trace import FORMAT_VERSION, Trace, TraceFormatError, runs_of_true


@pytest.fixture(scope="module")
def trace() -> Trace:
    t = get_template("00000")
    params = next(iter(t.valid_param_sets()))
    rollout = simulate(t.scene(params), (0.5, 0.9, 0.2), max_steps=400)
    assert rollout.trace is not None
    return rollout.trace


def test_round_trip_is_exact(trace, tmp_path):
    path = trace.save(tmp_path / "t.npz")
    back = Trace.load(path)
    assert back.equals(trace)
    for name in ("position", "velocity", "angle", "contact_frame", "contact_impulse"):
        a, b = getattr(trace, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert back.events == trace.events
    assert back.meta == json.loads(json.dumps(trace.meta))
    assert [b.name for b in back.bodies] == trace.names


def test_truncated_file_raises(trace, tmp_path):
    raw = trace.save(tmp_path / "t.npz").read_bytes()
    bad = tmp_path / "cut.npz"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TraceFormatError, match="cut.npz"):
        Trace.load(bad)


def test_foreign_files_raise(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("hello")
    with pytest.raises(TraceFormatError, match="not a simpatterns trace"):
        Trace.load(text)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(TraceFormatError, match="header"):
        Trace.load(other)


def test_newer_version_raises(trace, tmp_path):
    path = trace.save(tmp_path / "t.npz")
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    header["version"] = FORMAT_VERSION + 1
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    newer = tmp_path / "newer.npz"
    np.savez_compressed(newer, **arrays)
    with pytest.raises(TraceFormatError, match="newer"):
        Trace.load(newer)


def test_corrupt_member_raises(trace, tmp_path):
    path = trace.save(tmp_path / "t.npz")
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["position.npy"] = members["position.npy"][:40]
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    with pytest.raises(TraceFormatError):
        Trace.load(bad)


def test_missing_field_names_the_field(trace, tmp_path):
    path = trace.save(tmp_path / "t.npz")
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files if k != "velocity"}
    bad = tmp_path / "novel.npz"
    np.savez_compressed(bad, **arrays)
    with pytest.raises(TraceFormatError, match="velocity"):
        Trace.load(bad)


def test_helpers_agree_with_contact_rows(trace):
    g, b = trace.body_index("ground"), trace.body_index("green ball")
    touch = trace.pair_touching("ground", "green ball")
    rows = (trace.contact_a == min(g, b)) & (trace.contact_b == max(g, b))
    assert set(np.nonzero(touch)[0]) == set(trace.contact_frame[rows].tolist())
    intervals = trace.contact_intervals(g, b)
    assert sum(e - s + 1 for s, e in intervals) == int(touch.sum())
    f = int(trace.contact_frame[rows][0])
    assert ("ground", "green ball") in trace.touching(f)
    assert trace.speed("green ball").shape == (trace.num_frames,)
    assert np.allclose(trace.speed()[:, b], np.linalg.norm(trace.velocity[:, b], axis=1))
    assert trace.body_index("GREEN BALL") == b
    with pytest.raises(KeyError, match="no body named"):
        trace.body_index("purple unicorn")


def test_runs_of_true():
    assert runs_of_true(np.array([0, 1, 1, 0, 1], bool)) == [(1, 2), (4, 4)]
    assert runs_of_true(np.zeros(0, bool)) == []
    assert runs_of_true(np.ones(3, bool)) == [(0, 2)]


def test_duplicate_body_names_rejected(trace):
    from dataclasses import replace

    bodies = list(trace.bodies)
    bodies[1] = replace(bodies[1], name=bodies[0].name)
    with pytest.raises(ValueError, match="unique"):
        Trace(bodies=bodies, **{k: getattr(trace, k) for k in (
            "time", "position", "angle", "velocity", "angular_velocity", "contact_frame", "contact_a",
            "contact_b", "contact_point", "contact_normal", "contact_impulse")})


def test_loads_the_npz_variants_numpy_writes(trace, tmp_path):
    # compressed or stored members, .npy format 1.0 or 2.0, headers longer than the usual 128
    # bytes: every array read back bit for bit, writable, and the reader agrees with np.load
    import io

    arrays = {n: getattr(trace, n) for n in ("time", "position", "angle", "velocity", "angular_velocity",
                                             "contact_frame", "contact_a", "contact_b", "contact_point",
                                             "contact_normal", "contact_impulse")}
    header = np.frombuffer(json.dumps(trace.header(), default=str).encode(), dtype=np.uint8)
    for save in (np.savez, np.savez_compressed):
        buf = io.BytesIO()
        save(buf, header=header, **arrays)
        for version in ((1, 0), (2, 0)):
            raw = buf.getvalue()
            if version == (2, 0):  # rewrite every member in .npy 2.0 (a 4-byte header length)
                out = io.BytesIO()
                with zipfile.ZipFile(io.BytesIO(raw)) as zin, zipfile.ZipFile(out, "w", zin.infolist()[0].compress_type) as zout:
                    for name in zin.namelist():
                        member = io.BytesIO()
                        np.lib.format.write_array(member, np.load(io.BytesIO(zin.read(name))), version=(2, 0))
                        zout.writestr(name, member.getvalue())
                raw = out.getvalue()
            back = Trace.from_bytes(raw, "variant.npz")
            assert back.equals(trace), (save.__name__, version)
            assert back.position.flags.writeable and back.contact_point.flags.writeable
    # a long .npy header (a shape with many dimensions pads past 128 bytes) is still one stream
    from simpatterns.trace import _NpzArrays

    deep = np.arange(64, dtype=np.float64).reshape((2,) * 6)
    wide = np.zeros((1,) * 40)
    buf = io.BytesIO()
    np.savez_compressed(buf, deep=deep, wide=wide)
    npz = _NpzArrays(buf.getvalue())
    assert npz.declared("wide") == (wide.shape, wide.dtype)
    assert np.array_equal(npz["deep"], deep) and np.array_equal(npz["wide"], wide) and np.array_equal(npz["deep"], deep)
