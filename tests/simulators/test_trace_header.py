"""Every field of a trace file's header is checked on load, like the arrays.

The damaged files are real saved traces (a PHYRE rollout, a MuJoCo table scene and a
MuJoCo rope) whose ``header`` entry is rewritten: one field
given a wrong type, a NaN/Infinity literal or an out-of-range value. Loading must raise
`TraceFormatError` naming the file and the field by its path (``meta.dt``,
``bodies[3].size.radius``, ``events[2].frame``); saving such a trace must refuse the same way.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from simpatterns.simulators.phyre import get_template, simulate
from simpatterns.trace import Trace, TraceFormatError
from simpatterns.trace_header import EVENT_ENTRIES, META

ROOT = Path(__file__).resolve().parents[2]
V1_FILE = ROOT / "tests" / "data" / "trace_v1" / "phyre_00000_v1.npz"
DELETE = object()  # `put` removes the field


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    t = get_template("00000")
    rollout = simulate(t.scene(next(iter(t.valid_param_sets()))), (0.5, 0.9, 0.2), max_steps=300)
    trace = rollout.trace
    assert trace is not None and trace.events and trace.meta["goal"] and trace.meta["horizon"] == 301
    return trace.save(tmp_path_factory.mktemp("good") / "good.npz")


def header_of(path: Path) -> dict[str, Any]:
    with np.load(path) as npz:
        return json.loads(npz["header"].tobytes())


def rewrite(src: Path, dst: Path, header: dict[str, Any]) -> Path:
    """``src`` with its header entry replaced by ``header`` (json writes NaN and Infinity literals)."""
    with np.load(src) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez_compressed(dst, **arrays)
    return dst


def steps(path: str) -> list[str | int]:
    """``bodies[3].size.radius`` -> ["bodies", 3, "size", "radius"]."""
    return [int(i) if i else k for k, i in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)]


def put(header: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``header`` with the field at ``path`` set to ``value`` (or removed: `DELETE`)."""
    out = json.loads(json.dumps(header))
    *parents, last = steps(path)
    node = out
    for k in parents:
        node = node[k]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


def refused(src: Path, tmp_path: Path, header: dict[str, Any], name: str = "damaged.npz") -> str:
    bad = rewrite(src, tmp_path / name, header)
    with pytest.raises(TraceFormatError) as err:
        Trace.load(bad)
    msg = str(err.value)
    assert msg.startswith(f"{bad}: "), msg
    return msg


def leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) of a JSON tree's numbers and strings."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, node


def _first(header: dict[str, Any], pred) -> int:
    return next(i for i, x in enumerate(header["bodies"]) if pred(x))


def cases(h: dict[str, Any]) -> dict[str, tuple[str, Any, str]]:
    """(field, damaged value, what the message says) for the real header ``h``."""
    ball = _first(h, lambda b: "radius" in b["size"])
    poly = _first(h, lambda b: any("vertices" in p for p in b["parts"]))
    circle = _first(h, lambda b: any("radius" in p for p in b["parts"]))
    done = next(i for i, e in enumerate(h["events"]) if e[0] == "TaskComplete")
    collide = next(i for i, e in enumerate(h["events"]) if e[0] == "CollisionStart")
    return {
        "dt a string": ("meta.dt", "0.0166", "a finite number > 0"),
        "dt NaN": ("meta.dt", math.nan, "is NaN"),
        "dt Infinity": ("meta.dt", math.inf, "is Infinity"),
        "dt -Infinity": ("meta.dt", -math.inf, "is -Infinity"),
        "dt zero": ("meta.dt", 0, "> 0"),
        "dt negative": ("meta.dt", -0.01, "> 0"),
        "dt a boolean": ("meta.dt", True, "a finite number"),
        "stride zero": ("meta.stride", 0, "an integer >= 1"),
        "stride 2.0": ("meta.stride", 2.0, "an integer >= 1"),
        "stride a string": ("meta.stride", "2", "an integer >= 1"),
        "steps negative": ("meta.steps", -1, "an integer >= 0"),
        "max_steps a string": ("meta.max_steps", "300", "an integer >= 0"),
        "horizon below the stored frames": ("meta.horizon", 5, "at least the stored frames"),
        "horizon a string": ("meta.horizon", "301", "an integer"),
        "horizon Infinity": ("meta.horizon", math.inf, "is Infinity"),
        "stopped unknown": ("meta.stopped", "crashed", "one of 'success', 'settled'"),
        "goal one name": ("meta.goal", [h["bodies"][0]["name"]], "two body names"),
        "goal not a body": ("meta.goal", ["nobody", h["bodies"][0]["name"]], "the name of one of the trace's bodies"),
        "goal one body twice": ("meta.goal", [h["bodies"][0]["name"], h["bodies"][0]["name"].upper()],
                                "expected no repeats"),
        "goal a string": ("meta.goal", "green ball", "two body names"),
        "world_size one axis": ("meta.world_size", [256.0], "a list of finite numbers of 2"),
        "world_size negative": ("meta.world_size", [256.0, -1.0], "> 0"),
        "world_size NaN": ("meta.world_size", [256.0, math.nan], "is NaN"),
        "units a number": ("meta.units", 5, "a string"),
        "success a string": ("meta.success", "false", "true or false"),
        "success 1": ("meta.success", 1, "true or false"),
        "solved_frame past the end": ("meta.solved_frame", 10 ** 6, "(a stored frame)"),
        "solved_frame negative": ("meta.solved_frame", -1, "(a stored frame)"),
        "settled_frame 2.5": ("meta.settled_frame", 2.5, "(a stored frame)"),
        "truncated_at_frame past the end": ("meta.truncated_at_frame", 10 ** 6, "(a stored frame)"),
        "action a string": ("meta.action", "0.5 0.9 0.2", "a list of finite numbers"),
        "action empty": ("meta.action", [], "at least 1"),
        "action with a string": ("meta.action", [0.5, "x", 0.2], "a finite number"),
        "action with Infinity": ("meta.action", [0.5, math.inf, 0.2], "is Infinity"),
        "action_px negative radius": ("meta.action_px", {"x": 1.0, "y": 2.0, "radius": -8.0}, "> 0"),
        "action_kind a number": ("meta.action_kind", 3, "a non-empty string"),
        "seed a string": ("meta.seed", "7", "an integer"),
        "seed a boolean": ("meta.seed", True, "an integer"),
        "template a number": ("meta.template", 0, "a string"),
        "variant negative": ("meta.variant", -1, "an integer >= 0"),
        "variant 1.0": ("meta.variant", 1.0, "an integer >= 0"),
        "params a list": ("meta.params", [1], "an object"),
        "description a number": ("meta.description", 7, "a string"),
        "task_goal a list": ("meta.task_goal", ["red", "green"], "a non-empty string"),
        "simulator empty": ("meta.simulator", "", "a non-empty string"),
        "mujoco_version a number": ("meta.mujoco_version", 3, "a non-empty string"),
        "gravity 3D in a 2D trace": ("meta.gravity", [0.0, 0.0, -9.81], "a list of finite numbers of 2"),
        "gravity a string": ("meta.gravity", "down", "a list of finite numbers"),
        "start_time NaN": ("meta.start_time", math.nan, "is NaN"),
        "ropes bead past the bodies": ("meta.ropes", [{"bodies": [0, 999]}], "(a body index)"),
        "ropes one bead": ("meta.ropes", [{"bodies": [0]}], "at least 2"),
        "ropes bead repeated": ("meta.ropes", [{"bodies": [0, 1, 0]}], "expected no repeats"),
        "rope a number": ("meta.rope", 3, "an object"),
        "trace_id a number": ("meta.trace_id", 5, "a non-empty string"),
        "a user's key NaN": ("meta.my_weight", math.nan, "is NaN"),
        "a user's nested Infinity": ("meta.extra.a[1]", math.inf, "is Infinity"),
        "size negative": (f"bodies[{ball}].size.radius", -1.0, ">= 0"),
        "size a string": (f"bodies[{ball}].size.radius", "big", "a finite number"),
        "size NaN": (f"bodies[{ball}].size.radius", math.nan, "is NaN"),
        "name a number": ("bodies[0].name", 5, "a non-empty string"),
        "name empty": ("bodies[0].name", "", "a non-empty string"),
        "name missing": ("bodies[0].name", DELETE, "is missing"),
        "name repeated": ("bodies[1].name", h["bodies"][0]["name"], "must be unique"),
        "color a number": ("bodies[0].color", 3, "a string"),
        "shape null": ("bodies[0].shape", None, "a string"),
        "dynamic a string": ("bodies[0].dynamic", "false", "true or false"),
        "dynamic 0": ("bodies[0].dynamic", 0, "true or false"),
        "dynamic missing": ("bodies[0].dynamic", DELETE, "is missing"),
        "role a number": ("bodies[0].role", 2, "a non-empty string"),
        "size a list": ("bodies[0].size", [1.0], "an object"),
        "parts an object": ("bodies[0].parts", {}, "a list"),
        "vertex one coordinate": (f"bodies[{poly}].parts[0].vertices[0]", [1.0], "of 2"),
        "vertex NaN": (f"bodies[{poly}].parts[0].vertices[0][1]", math.nan, "is NaN"),
        "part radius negative": (f"bodies[{circle}].parts[0].radius", -1.0, ">= 0"),
        "part kind missing": (f"bodies[{circle}].parts[0].kind", DELETE, "is missing"),
        "part centre 3D in 2D": (f"bodies[{circle}].parts[0].center", [0.0, 0.0, 0.0], "of 2"),
        "bodies not a list": ("bodies", {"a": 1}, "a list"),
        "bodies missing": ("bodies", DELETE, "is missing"),
        "events missing": ("events", DELETE, "is missing"),
        "event frame past the end": (f"events[{collide}].frame", 10 ** 6, "(a stored frame)"),
        "event frame negative": (f"events[{collide}].frame", -1, "(a stored frame)"),
        "event frame 1.5": (f"events[{collide}].frame", 1.5, "(a stored frame)"),
        "event frame a string": (f"events[{collide}].frame", "3", "(a stored frame)"),
        "event kind a number": (f"events[{collide}].kind", 5, "a non-empty string"),
        "event of two entries": (f"events[{collide}]", ["CollisionStart", 0], "[kind, frame, params]"),
        "collision names no body": (f"events[{collide}].params.object_a", "nobody", "the trace's bodies"),
        "collision without object_b": (f"events[{collide}].params.object_b", DELETE, "is missing"),
        "success event a string": (f"events[{done}].params.success", "yes", "true or false"),
        "events not a list": ("events", 7, "a list"),
        "meta not an object": ("meta", [1, 2], "an object"),
        "meta missing": ("meta", DELETE, "is missing"),
    }


def json_path(field: str) -> str:
    """An event's ``.kind``/``.frame``/``.params`` are the entries of its list: ``events[2].frame`` -> ``events[2][1]``."""
    return re.sub(r"(events\[\d+\])\.(kind|frame|params)", lambda m: f"{m.group(1)}[{EVENT_ENTRIES.index(m.group(2))}]",
                  field)


def field_name(path: str) -> str:
    """The inverse of `json_path`: how messages name a JSON path."""
    return re.sub(r"(events\[\d+\])\[(\d)\]", lambda m: f"{m.group(1)}.{EVENT_ENTRIES[int(m.group(2))]}", path)


def _set_by_case(h: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    if field.startswith("meta.extra."):
        h = put(h, "meta.extra", {"a": [1, 2]})
    return put(h, json_path(field), value)


def test_every_case_names_the_file_the_field_and_what_is_wrong(saved, tmp_path):
    h = header_of(saved)
    table = cases(h)
    failures = []
    for name, (field, value, what) in table.items():
        msg = refused(saved, tmp_path, _set_by_case(h, field, value))
        named = re.search(r"header field '([^']+)' ", msg)
        # the field itself, or the entry inside it that is wrong (meta.action[1])
        if not named or not re.fullmatch(re.escape(field) + r"([.\[].*)?", named.group(1)) or what not in msg:
            failures.append(f"{name}: {msg}")
    assert not failures, "\n".join(failures)
    # every meta key the code reads has a case
    covered = {f.split(".")[1] for f, _, _ in table.values() if f.startswith("meta.")}
    assert set(META) <= covered, sorted(set(META) - covered)


def test_a_wrong_type_in_every_field_of_the_real_header_is_refused(saved, tmp_path):
    """Each value of the saved header (meta keys, body fields, event entries, down to the
    numbers in body parts) replaced by a value of another JSON type: every one is refused,
    naming that field or the field that holds it (params, a user's meta key, are free-form)."""
    h = header_of(saved)
    free = ("meta.params.",)  # a scene's parameters are any JSON
    checked = 0
    for path, value in leaves({k: h[k] for k in ("bodies", "events", "meta")}):
        if path.startswith(free) or value is None:
            continue
        wrong = ["wrong"] if isinstance(value, str) else "wrong"
        msg = refused(saved, tmp_path, put(h, path, wrong))
        named, field = re.search(r"header field '([^']+)'", msg), field_name(path)
        assert named and (field == named.group(1) or field.startswith(named.group(1) + "[")), (path, msg)
        checked += 1
    assert checked > 100  # bodies' geometry included


def test_every_number_in_the_header_refuses_nan_and_infinity(saved, tmp_path):
    h = header_of(saved)
    numbers = [(p, v) for p, v in leaves({k: h[k] for k in ("bodies", "events", "meta")})
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert len(numbers) > 50
    for k, (path, _) in enumerate(numbers):
        bad = (math.nan, math.inf, -math.inf)[k % 3]
        msg = refused(saved, tmp_path, put(h, path, bad))
        assert f"header field '{field_name(path)}' is {('NaN', 'Infinity', '-Infinity')[k % 3]}, expected a finite number" in msg


@pytest.mark.parametrize("literal, shown", [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
                                            ("1e999", "Infinity")])
def test_the_literals_are_refused_as_written(saved, tmp_path, literal, shown):
    """NaN, Infinity and -Infinity as Python's json.dumps writes them, and a number too large
    for a float (json reads 1e999 as infinity)."""
    h = header_of(saved)
    raw = json.dumps(h).replace('"dt": 0.016666666666666666', f'"dt": {literal}')
    assert f'"dt": {literal}' in raw
    with np.load(saved) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["header"] = np.frombuffer(raw.encode(), dtype=np.uint8)
    np.savez_compressed(tmp_path / "bad.npz", **arrays)
    with pytest.raises(TraceFormatError, match=f"bad.npz: header field 'meta.dt' is {shown}, expected a finite number"):
        Trace.load(tmp_path / "bad.npz")


def test_version_must_be_a_positive_integer(saved, tmp_path):
    h = header_of(saved)
    for bad in (True, 0, "2", 1.0):
        msg = refused(saved, tmp_path, put(h, "version", bad))
        assert "header field 'version'" in msg, msg


def test_body_names_in_the_header_are_found_in_any_case(saved, tmp_path):
    """As `Trace.body_index` finds them: a goal written "Green Ball" names the green ball."""
    h = header_of(saved)
    goal = [n.title() for n in h["meta"]["goal"]]
    assert goal != h["meta"]["goal"]
    trace = Trace.load(rewrite(saved, tmp_path / "case.npz", put(h, "meta.goal", goal)))
    assert [trace.names[trace.body_index(n)] for n in trace.episode.goal] == h["meta"]["goal"]


def test_extra_meta_keys_of_a_user_still_load(saved, tmp_path):
    h = put(header_of(saved), "meta.lab_notes", {"operator": "ann", "runs": [1, 2.5], "ok": True, "none": None})
    trace = Trace.load(rewrite(saved, tmp_path / "extra.npz", h))
    assert trace.meta["lab_notes"]["runs"] == [1, 2.5]


def test_saving_a_trace_with_a_bad_field_refuses_and_writes_nothing(saved, tmp_path):
    trace = Trace.load(saved)
    for field, value, what in (("dt", float("nan"), "is NaN"), ("dt", "0.01", "a finite number > 0"),
                               ("stride", np.int64(0), "an integer >= 1"), ("horizon", 1, "stored frames"),
                               ("goal", ("nobody", "ground"), "the trace's bodies")):
        bad = Trace.load(saved)
        bad.meta[field] = value
        out = tmp_path / "out" / "bad.npz"
        with pytest.raises(TraceFormatError, match=re.escape(f"{out}: header field 'meta.{field}")) as err:
            bad.save(out)
        assert what in str(err.value)
        assert not out.exists()
    # numpy numbers and tuples are written as JSON numbers and lists, and load back
    trace.meta.update(stride=np.int64(1), seed=np.int32(7), world_size=(256.0, np.float32(256.0)))
    back = Trace.load(trace.save(tmp_path / "numpy.npz"))
    assert back.meta["stride"] == 1 and back.meta["seed"] == 7 and back.meta["world_size"] == [256.0, 256.0]


def test_saving_refuses_a_nan_in_the_arrays_too(saved, tmp_path):
    bad = Trace.load(saved)
    bad.velocity = bad.velocity.copy()
    bad.velocity[3, 1, 0] = np.nan
    with pytest.raises(TraceFormatError, match=r"bad.npz: field 'velocity' has a non-finite value at \(3, 1, 0\)"):
        bad.save(tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists()


def test_traces_of_our_simulators_and_the_shipped_file_load(saved, tmp_path):
    """A settled, thinned rollout (settled_frame counts stored frames), a successful one
    and the version-1 file in tests/data."""
    t = get_template("00000")
    scene = t.scene(next(iter(t.valid_param_sets())))
    for kwargs in ({"stride": 7, "stop_when_settled": True}, {"stride": 3}):
        trace = simulate(scene, (0.5, 0.9, 0.2), max_steps=600, **kwargs).trace
        back = Trace.load(trace.save(tmp_path / "t.npz"))
        assert back.equals(trace)
        for key in ("solved_frame", "settled_frame"):
            assert back.meta[key] is None or 0 <= back.meta[key] < back.num_frames
    assert Trace.load(V1_FILE).num_frames == 61
    assert Trace.load(saved).episode.horizon == 301


@pytest.fixture(scope="module")
def saved_3d(tmp_path_factory) -> dict[str, Path]:
    """A MuJoCo table scene (boxes, a plane, contacts) and a small rope loop (meta ropes, rope)."""
    from simpatterns.simulators.mujoco import simulate
    from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld

    folder = tmp_path_factory.mktemp("good3d")
    table = simulate(ROOT / "examples" / "mujoco" / "table_drop.xml", 400, stride=4)
    world = RopeWorld(RopeConfig(beads=8, spacing=0.03))
    world.start_recording(4)
    world.push(2, [0.05, 0.0, 0.0], 48)
    rope = world.trace({"action": [0.1, 0.2, 0.0, 1.0, 0.0, 0.0]})
    assert table.events and rope.meta["ropes"][0]["bodies"] and table.meta["gravity"] == [0.0, 0.0, -9.81]
    return {"table": table.save(folder / "table.npz"), "rope": rope.save(folder / "rope.npz")}


def test_3d_fields_are_checked_against_three_axes(saved_3d, tmp_path):
    table, rope = header_of(saved_3d["table"]), header_of(saved_3d["rope"])
    box = _first(table, lambda b: b["shape"] == "box")
    ball = next(i for i, b in enumerate(table["bodies"]) if b["parts"] and b["parts"][0]["kind"] == "ball")
    bad = {
        "table": {
            "meta.gravity": ([0.0, -9.81], "a list of finite numbers of 3"),
            "meta.world_size": ([2.0, 2.0], "of 3"),
            "meta.world_size[2]": (0.0, "> 0"),
            "meta.start_time": ("0", "a finite number"),
            "meta.mujoco_version": (4.0, "a non-empty string"),
            f"bodies[{box}].parts[0].quat": ([1.0, 0.0, 0.0], "of 4"),
            f"bodies[{box}].parts[0].half_size[1]": (-0.4, ">= 0"),
            f"bodies[{box}].parts[0].center": ([0.0, 0.0], "of 3"),
            f"bodies[{box}].size.height": (-0.05, ">= 0"),
            f"bodies[{ball}].parts[0].radius": (math.inf, "is Infinity"),
            "bodies[0].role": ("", "a non-empty string"),
        },
        "rope": {
            "meta.ropes[0].bodies[3]": (99, "(a body index)"),
            "meta.ropes[0].bodies[1]": (0, "which meta.ropes[0].bodies[0] already is"),
            "meta.ropes[0].bodies[0]": (0.5, "(a body index)"),
            "meta.ropes[0].closed": ("yes", "true or false"),
            "meta.ropes[0].name": (1, "a string"),
            "meta.ropes[0]": ({"name": "rope"}, "is missing"),
            "meta.rope": ([8], "an object"),
            "meta.rope.spacing": (math.nan, "is NaN"),
            "meta.action[5]": (-math.inf, "is -Infinity"),
            "meta.stride": (0, "an integer >= 1"),
        },
    }
    for which, table_of_cases in bad.items():
        h = table if which == "table" else rope
        for field, (value, what) in table_of_cases.items():
            msg = refused(saved_3d[which], tmp_path, put(h, field, value))
            assert f"header field '{field}" in msg and what in msg, (which, field, msg)
    # the undamaged ones load, as written
    assert Trace.load(saved_3d["rope"]).meta["ropes"][0]["closed"] is True
    assert Trace.load(saved_3d["table"]).dim == 3


def _damaged_copy(saved: Path, folder: Path) -> Path:
    folder.mkdir()
    return rewrite(saved, folder / "damaged.npz", put(header_of(saved), "meta.dt", "0.01"))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}  # narrow: a wrapped line would show
    return subprocess.run([sys.executable, "-m", "simpatterns.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_annotate_reports_the_damaged_file_on_one_line_exit_1(saved, tmp_path):
    bad = _damaged_copy(saved, tmp_path / "in")
    res = _cli("annotate", str(bad), "--out", str(tmp_path / "out"))
    assert res.returncode == 1, res.stdout + res.stderr  # docs: an item failed (an unreadable trace)
    lines = [ln for ln in res.stderr.splitlines() if "meta.dt" in ln]
    assert len(lines) == 1 and str(bad) in lines[0] and "expected a finite number > 0" in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert not list((tmp_path / "out").rglob("*.jsonl"))


def test_cli_reward_eval_reports_the_damaged_file_on_one_line_exit_1(saved, tmp_path):
    bad = _damaged_copy(saved, tmp_path / "in")
    program = ROOT / "simpatterns" / "examples" / "goals" / "a04_green_touches_both.rwd"
    res = _cli("reward", "eval", str(program), str(bad), "--json")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1, res.stdout + res.stderr  # docs: an item (this trace) failed
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: header field 'meta.dt' is \"0.01\" (a string)"), \
        res.stderr
    assert res.stdout == ""  # no score for it


def test_a_deeply_nested_user_key_is_walked_without_recursion(saved, tmp_path):
    """The NaN check walks the whole header in a loop: a file decides how deep it nests."""
    h = header_of(saved)
    deep: Any = [math.nan]
    for _ in range(500):
        deep = [deep]
    msg = refused(saved, tmp_path, put(h, "meta.deep", deep))
    assert "header field 'meta.deep" + "[0]" * 501 + "' is NaN, expected a finite number" in msg
    # deeper than Python's json reads (or writes: the text is built by hand): unreadable, not a crash
    raw = '{"format": "simpatterns-trace", "version": 2, "bodies": [], "events": [], "meta": {"x": ' + \
        "[" * 200_000 + "]" * 200_000 + "}}"
    with np.load(saved) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["header"] = np.frombuffer(raw.encode(), dtype=np.uint8)
    np.savez_compressed(tmp_path / "deep.npz", **arrays)
    with pytest.raises(TraceFormatError, match="deep.npz: trace header is unreadable"):
        Trace.load(tmp_path / "deep.npz")
