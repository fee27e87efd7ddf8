"""The recorder's traces equal, bit for bit, those of its frozen reference
(`phyre_recorder_reference.py`, the recorder before issue 32's speed-up): every array's
dtype, shape and bytes, the bodies, the events and the metadata, on every template."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import phyre_recorder_reference as reference  # noqa: E402  (tests/simulators is on sys.path)
from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate
from simpatterns.simulators.phyre import physics
from simpatterns.simulators.phyre.physics import merge_contacts
from simpatterns.trace import ARRAY_FIELDS, OPTIONAL_ARRAY_FIELDS, Trace, collision_events

ACTIONS_PER_TEMPLATE = 2


def first_scene(tid: str):
    t = get_template(tid)
    return t.variant_scene(0) if t.num_variants else t.scene(next(iter(t.valid_param_sets())))


def valid_actions(scene, seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    while len(out) < count:
        a = rng.random(3)
        if check_action(scene, a) is None:
            out.append(a)
    return out


def differences(new: Trace, ref: Trace) -> list[str]:
    """Every way ``new`` differs from ``ref`` (types of metadata values included)."""
    out = []
    for name in ARRAY_FIELDS + OPTIONAL_ARRAY_FIELDS:
        a, b = getattr(new, name), getattr(ref, name)
        if a is None or b is None:
            if (a is None) != (b is None):
                out.append(f"{name}: {a is None=} {b is None=}")
        elif a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            out.append(f"{name}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
    for what in ("bodies", "events", "meta"):
        if repr(getattr(new, what)) != repr(getattr(ref, what)):
            out.append(what)
    return out


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, object, np.ndarray]]:
    out = []
    for tid in TEMPLATES:
        scene = first_scene(tid)
        out += [(tid, scene, a) for a in valid_actions(scene, int(tid), ACTIONS_PER_TEMPLATE)]
    return out


def test_traces_equal_the_reference_on_every_template(cases):
    assert len({tid for tid, _, _ in cases}) == 25
    for tid, scene, action in cases:
        new, ref = simulate(scene, action).trace, reference.simulate(scene, action).trace
        assert differences(new, ref) == [], (tid, action.tolist())


def test_options_equal_the_reference(cases):
    """Stride, settling, runs longer than the recorder reserves for, no steps at all, a scene
    without the agent's ball, and one where no body moves."""
    for i, (tid, scene, action) in enumerate(cases[::9]):
        kwargs = [{"stride": 3}, {"stop_when_settled": True}, {"max_steps": 1200, "stop_on_success": False}][i % 3]
        new, ref = simulate(scene, action, **kwargs).trace, reference.simulate(scene, action, **kwargs).trace
        assert differences(new, ref) == [], (tid, kwargs)
    scene = cases[0][1]
    assert differences(simulate(scene, None).trace, reference.simulate(scene, None).trace) == []
    still = dataclasses.replace(scene, bodies=[b for b in scene.bodies if not b.dynamic], goal=None)  # nothing moves
    for kwargs in ({"stop_when_settled": True, "max_steps": 60}, {"max_steps": 5}):
        assert differences(simulate(still, None, **kwargs).trace, reference.simulate(still, None, **kwargs).trace) == []
    assert (
        differences(
            simulate(scene, cases[0][2], max_steps=0).trace, reference.simulate(scene, cases[0][2], max_steps=0).trace
        )
        == []
    )


def test_traces_equal_the_reference_when_no_buffers_are_kept(cases, monkeypatch):
    """Each rollout reuses its thread's C buffers; with none kept, every one starts afresh."""
    monkeypatch.setattr(physics, "_SPARE_FLOATS", 0)
    for tid, scene, action in cases[:4]:
        new, ref = simulate(scene, action, max_steps=90).trace, reference.simulate(scene, action, max_steps=90).trace
        assert differences(new, ref) == [], tid


def test_a_solved_rollout_equals_the_reference():
    """Stopping at success (the goal callback, `solved_frame`, the run cut short)."""
    scene, action = first_scene("00007"), [0.5939242016131683, 0.84829120827506, 0.14547353818653175]
    new, ref = simulate(scene, action).trace, reference.simulate(scene, action).trace
    assert ref.success and ref.meta["steps"] < 1000  # else pick another action: this one solved 00007 at frame 878
    assert differences(new, ref) == []


def test_differences_sees_one_bit():
    """The comparison itself catches a one-bit change in an array and a changed metadata type."""
    scene = first_scene("00000")
    action = valid_actions(scene, 0, 1)[0]
    tr = simulate(scene, action, max_steps=60, stop_on_success=False).trace
    other = simulate(scene, action, max_steps=60, stop_on_success=False).trace
    assert differences(other, tr) == []
    other.position = other.position.copy()
    other.position.view(np.uint64)[-1, -1, -1] ^= 1
    other.meta["steps"] = float(other.meta["steps"])
    assert [d.split(":")[0] for d in differences(other, tr)] == ["position", "meta"]


def test_collision_events_equal_the_reference_on_any_rows():
    """Unsorted rows, repeated rows, runs at the first and last frames, frames not from 0."""
    rng = np.random.default_rng(7)
    names = [f"body {i}" for i in range(6)]
    for trial in range(40):
        k = int(rng.integers(1, 200))
        frame = rng.integers(0, 30, k) + (5 if trial % 4 == 3 else 0)
        a = rng.integers(0, 5, k)
        b = a + 1 + rng.integers(0, 5 - a)
        if trial % 2:
            order = np.lexsort((b, a, frame))  # as traces store them: by frame
            frame, a, b = frame[order], a[order], b[order]
        args = frame.astype(np.int32), a.astype(np.int16), b.astype(np.int16), 30, names
        assert repr(collision_events(*args)) == repr(reference.collision_events(*args)), trial


def test_merge_contacts_equals_the_reference_on_any_rows():
    """Groups of 1 to 5 rows per key, rows that tie in every column but one (as a jar's parts
    give), zeros of both signs, unsorted keys."""
    rng = np.random.default_rng(3)
    for trial in range(30):
        key = np.sort(rng.integers(0, 40, int(rng.integers(1, 120)))).astype(np.int64)
        values = rng.normal(size=(key.size, 5)) * 10.0 ** rng.integers(-3, 4, size=(key.size, 5))
        values[rng.random(values.shape) < 0.1] = -0.0
        same = np.flatnonzero((key[1:] == key[:-1]) & (rng.random(key.size - 1) < 0.6)) + 1
        tied = int(rng.integers(1, 5))  # columns a row shares with the one before it
        values[same, :tied] = values[same - 1, :tied]
        if trial % 3 == 0:
            order = rng.permutation(key.size)
            key, values = key[order], values[order]
        columns = [values[:, j].copy() for j in range(5)]
        new, ref = merge_contacts(key, columns, 4), reference.merge_contacts(key, columns, 4)
        assert new.keys() == ref.keys()
        for name in ref:
            assert new[name].dtype == ref[name].dtype and new[name].tobytes() == ref[name].tobytes(), (trial, name)


def test_static_bodies_go_back_after_a_run(cases, monkeypatch):
    """The run sets static bodies aside (the per-step copy skips them); afterwards chipmunk lists
    every body again, in its order, also when the run is cut short by an exception."""
    tid, scene, action = next(c for c in cases if c[0] == "00013")  # 37 static bodies

    def listed(world) -> list[int]:
        ids, _ = physics._BatchRecorder(world.space, 1, 0).record_first()
        return ids.tolist()

    specs, world, _ = physics._place_agent(scene, action)
    before = listed(world)
    assert len(before) == len(specs)
    physics._run(world, specs, scene, 20, stop_on_success=False)
    assert listed(world) == before

    def failing_damper(_bodies):
        def damp() -> None:
            raise KeyboardInterrupt

        return damp

    monkeypatch.setattr(physics, "damper", failing_damper)  # raises at the first damping, inside the loop
    specs, world, _ = physics._place_agent(scene, action)
    before = listed(world)
    with pytest.raises(KeyboardInterrupt):
        physics._run(world, specs, scene, 50, stop_on_success=False)
    assert listed(world) == before
