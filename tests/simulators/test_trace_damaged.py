"""Damaged trace files: every one is refused before anything uses it, with the file and the field.

Each case rewrites a real trace's archive (arrays or header) the way a damaged or hostile file
would differ; loading must raise `TraceFormatError` naming the file and the field at fault, and
a file that declares more data than a trace may hold is refused before it is read.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from simpatterns.simulators.phyre import get_template, simulate
from simpatterns.trace import MAX_TRACE_BYTES, Trace, TraceFormatError


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    t = get_template("00000")
    rollout = simulate(t.scene(next(iter(t.valid_param_sets()))), (0.5, 0.9, 0.2), max_steps=300)
    assert rollout.trace is not None and len(rollout.trace.contact_frame) and rollout.trace.events
    return rollout.trace.save(tmp_path_factory.mktemp("good") / "good.npz")


def _rewrite(src: Path, dst: Path, arrays: Callable[[dict[str, np.ndarray]], None] | None = None,
             header: Callable[[dict[str, Any]], None] | None = None) -> Path:
    with np.load(src) as npz:
        a = {k: npz[k] for k in npz.files}
    h = json.loads(a["header"].tobytes())
    if header:
        header(h)
    if arrays:
        arrays(a)
    a["header"] = np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)
    np.savez_compressed(dst, **a)
    return dst


def _set(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[dict[str, np.ndarray]], None]:
    def apply(a: dict[str, np.ndarray]) -> None:
        a[name] = fn(a[name].copy())
    return apply


def _nan_at_end(x: np.ndarray) -> np.ndarray:
    x = x.astype(float)
    x.flat[-1] = np.nan
    return x


def _backwards(t: np.ndarray) -> np.ndarray:
    t[len(t) // 2] = t[0]
    return t


ARRAY_DAMAGE = {
    "position int dtype": ("position", _set("position", lambda x: x.astype(np.int32)), "dtype"),
    "position extra dimension": ("position", _set("position", lambda x: x[..., None]), "shape"),
    "velocity NaN": ("velocity", _set("velocity", _nan_at_end), "non-finite"),
    "angle infinite": ("angle", _set("angle", lambda x: x + np.inf), "non-finite"),
    "time not increasing": ("time", _set("time", _backwards), "does not increase"),
    "time 2D": ("time", _set("time", lambda x: x[:, None]), "shape"),
    "negative contact index": ("contact_a", _set("contact_a", lambda x: x * 0 - 1), "outside"),
    "contact index past the bodies": ("contact_b", _set("contact_b", lambda x: x * 0 + 999), "outside"),
    "float contact frames": ("contact_frame", _set("contact_frame", lambda x: x + 0.5), "dtype"),
    "contact frame past the end": ("contact_frame", _set("contact_frame", lambda x: x + 10_000), "outside"),
    "contact rows disagree": ("contact_impulse", _set("contact_impulse", lambda x: x[:-1]), "rows"),
    "contact point 3D in 2D": ("contact_point", _set("contact_point", lambda x: np.pad(x, ((0, 0), (0, 1)))), "shape"),
    "quaternion in 2D": ("quaternion", lambda a: a.update(quaternion=np.zeros(a["angle"].shape + (4,))), "2D"),
    "missing velocity": ("velocity", lambda a: a.pop("velocity"), "missing"),
}
HEADER_DAMAGE = {  # every field, value by value: tests/simulators/test_trace_header.py
    "bodies not a list": ("bodies", lambda h: h.update(bodies={"a": 1}), "expected a list"),
    "body without a name": ("bodies[0].name", lambda h: h["bodies"][0].pop("name"), "missing"),
    "repeated body names": ("bodies[1].name", lambda h: h["bodies"][1].update(name=h["bodies"][0]["name"]), "unique"),
    "events not a list": ("events", lambda h: h.update(events=7), "expected a list"),
    "event frame out of range": ("events[0].frame", lambda h: h["events"][0].__setitem__(1, 10 ** 6), "stored frame"),
    "event frame negative": ("events[0].frame", lambda h: h["events"][0].__setitem__(1, -1), "stored frame"),
    "meta not an object": ("meta", lambda h: h.update(meta=[1, 2]), "expected an object"),
}


@pytest.mark.parametrize("case", sorted(ARRAY_DAMAGE))
def test_damaged_arrays_name_the_file_and_field(saved, tmp_path, case):
    field, damage, what = ARRAY_DAMAGE[case]
    bad = _rewrite(saved, tmp_path / "damaged.npz", arrays=damage)
    with pytest.raises(TraceFormatError) as err:
        Trace.load(bad)
    msg = str(err.value)
    assert msg.startswith(str(bad)) and field in msg and what in msg, msg


@pytest.mark.parametrize("case", sorted(HEADER_DAMAGE))
def test_damaged_headers_name_the_file_and_field(saved, tmp_path, case):
    field, damage, what = HEADER_DAMAGE[case]
    bad = _rewrite(saved, tmp_path / "damaged.npz", header=damage)
    with pytest.raises(TraceFormatError) as err:
        Trace.load(bad)
    msg = str(err.value)
    assert msg.startswith(str(bad)) and f"'{field}'" in msg and what in msg, msg


def test_a_npy_renamed_npz_is_refused(tmp_path):
    bad = tmp_path / "array.npz"
    with open(bad, "wb") as fh:
        np.save(fh, np.arange(10))
    with pytest.raises(TraceFormatError, match="array.npz: not a simpatterns trace"):
        Trace.load(bad)


def test_declared_sizes_are_checked_before_anything_is_read(saved, tmp_path):
    """A small file whose 'time' member declares 1.6 GB: refused from its .npy header alone."""
    with zipfile.ZipFile(saved) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (200_000_000,)})
    members["time.npy"] = head.getvalue() + b"\0" * 4096  # far less data than declared
    bad = tmp_path / "huge.npz"
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    assert bad.stat().st_size < 200_000
    with pytest.raises(TraceFormatError, match=r"huge.npz: field 'time' declares 1600000000 bytes"):
        Trace.load(bad)
    assert MAX_TRACE_BYTES < 1_600_000_000


def test_the_undamaged_file_still_loads(saved):
    trace = Trace.load(saved)
    assert trace.num_frames > 1 and len(trace.events)
