"""The 3D Trace contract: quaternions, [T, N, 3] angular velocity, format version 2, old files."""

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from simpatterns.trace import FORMAT_VERSION, Trace, TraceFormatError

V1_FILE = Path(__file__).resolve().parents[1] / "data" / "trace_v1" / "phyre_00000_v1.npz"


def test_version_1_file_still_loads(tmp_path):
    with zipfile.ZipFile(V1_FILE) as zf:
        header = json.loads(np.frombuffer(np.lib.format.read_array(zf.open("header.npy")), np.uint8).tobytes())
    assert header["version"] == 1 and FORMAT_VERSION == 2
    old = Trace.load(V1_FILE)
    assert old.dim == 2 and old.quaternion is None
    assert old.angular_velocity.shape == (old.num_frames, old.num_bodies)
    assert old.num_frames == 61 and old.num_contacts > 0 and old.names[0]
    back = Trace.load(old.save(tmp_path / "resaved.npz"))  # written as version 2, same content
    assert back.equals(old)


def test_3d_round_trip(table_trace, tmp_path):
    tr = table_trace
    T, N = tr.num_frames, tr.num_bodies
    assert tr.dim == 3
    assert tr.quaternion.shape == (T, N, 4) and tr.angular_velocity.shape == (T, N, 3)
    assert np.allclose(np.linalg.norm(tr.quaternion, axis=2), 1.0)
    back = Trace.load(tr.save(tmp_path / "t3.npz"))
    assert back.equals(tr)
    for name in ("position", "velocity", "angle", "angular_velocity", "quaternion", "contact_point",
                 "contact_normal", "contact_impulse"):
        a, b = getattr(tr, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert back.meta["simulator"] == "mujoco" and back.meta["gravity"] == [0.0, 0.0, -9.81]


def test_3d_angle_is_the_tilt_of_the_body_z_axis(table_trace):
    q = table_trace.quaternion
    w, x, y, z = np.moveaxis(q, -1, 0)
    # the third column of the rotation matrix is the body's z axis in world coordinates; its z is cos(tilt)
    zz = 1 - 2 * (x * x + y * y)
    assert np.allclose(np.cos(table_trace.angle), zz, atol=1e-9)


def test_quaternion_is_read_only_and_the_callers_array_untouched(table_trace):
    q = np.array(table_trace.quaternion)
    assert not table_trace.quaternion.flags.writeable
    tr = Trace(**{**{k: getattr(table_trace, k) for k in (
        "bodies", "time", "position", "angle", "velocity", "angular_velocity", "contact_frame", "contact_a",
        "contact_b", "contact_point", "contact_normal", "contact_impulse", "events", "meta")}, "quaternion": q})
    assert q.flags.writeable and not tr.quaternion.flags.writeable


def _arrays(trace):
    return {k: getattr(trace, k) for k in ("time", "position", "angle", "velocity", "angular_velocity",
                                           "contact_frame", "contact_a", "contact_b", "contact_point",
                                           "contact_normal", "contact_impulse")}


def test_validation_names_the_3d_fields(table_trace):
    tr = table_trace
    with pytest.raises(TraceFormatError, match="'quaternion' is missing"):
        Trace(bodies=tr.bodies, events=[], meta={}, **_arrays(tr)).validate()
    with pytest.raises(TraceFormatError, match="'quaternion' has shape"):
        Trace(bodies=tr.bodies, quaternion=tr.quaternion[:, :, :3], **_arrays(tr)).validate()
    bad = _arrays(tr)
    bad["angular_velocity"] = tr.angular_velocity[..., 0]
    with pytest.raises(TraceFormatError, match="'angular_velocity' has shape"):
        Trace(bodies=tr.bodies, quaternion=tr.quaternion, **bad).validate()
    old = Trace.load(V1_FILE)
    with pytest.raises(TraceFormatError, match="only 3D traces"):
        Trace(bodies=old.bodies, quaternion=np.zeros((old.num_frames, old.num_bodies, 4)), **_arrays(old)).validate()


def test_3d_file_missing_its_quaternion_is_refused(table_trace, tmp_path):
    path = table_trace.save(tmp_path / "t3.npz")
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files if k != "quaternion"}
    cut = tmp_path / "cut.npz"
    np.savez_compressed(cut, **arrays)
    with pytest.raises(TraceFormatError, match="cut.npz.*quaternion"):
        Trace.load(cut)
