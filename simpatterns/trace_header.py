"""The schema of a trace file's JSON header: what ``bodies``, ``events`` and each ``meta`` key may hold.

`check_header` is the one place a header is checked, on the parsed JSON (before
`Body.from_json` or anything else reads it): `Trace.load` runs it on every file and
`Trace.save` on what it is about to write. A wrong field raises `HeaderError` naming
it by its path (``meta.dt``, ``bodies[3].size.radius``, ``events[2].frame``).

Meta keys are checked when present (every key the code reads has a rule in `META`);
other keys a user writes are kept unchecked, except that no number anywhere in the
header may be NaN or infinite. Ranges that depend on the arrays (frame indices, the
horizon, vector lengths, body indices) are checked against a `Scope` taken from them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from simpatterns.errors import SimpatternsError

HORIZON_KEY = "horizon"
STOPPED_KEY = "stopped"
STOPPED_SUCCESS = "success"
STOPPED_SETTLED = "settled"
STOP_REASONS = (STOPPED_SUCCESS, STOPPED_SETTLED)
COLLISION_START = "CollisionStart"
COLLISION_END = "CollisionEnd"
TASK_COMPLETE = "TaskComplete"
RAW_EVENT_KINDS = (COLLISION_START, COLLISION_END, TASK_COMPLETE)


class HeaderError(SimpatternsError, ValueError):
    """One header field is wrong; ``field`` is its path (``meta.dt``, ``bodies[3].size.radius``)."""

    def __init__(self, field: str, why: str):
        super().__init__(f"header field {field!r} {why}")
        self.field = field


@dataclass(frozen=True)
class Scope:
    """What the header is checked against: the arrays' ``frames`` (T) and ``dim`` (D), and
    the bodies' names in index order (filled in once ``bodies`` has been checked)."""

    frames: int
    dim: int
    names: tuple[str, ...] = ()
    known: frozenset[str] = frozenset()  # the names in lower case, for lookups


Check = Callable[[Any, str, Scope], None]  # raises HeaderError(path, why)


def _shown(value: Any) -> str:
    """``value`` as the file spells it, with its JSON type."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None:
        return "null"
    kind = ("a boolean" if isinstance(value, bool) else "an integer" if isinstance(value, int) else "a number"
            if isinstance(value, float) else "a string" if isinstance(value, str) else "a list"
            if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__)
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # a value nested past what json writes
        shown = f"<{kind[kind.index(' ') + 1:]}>"
    return f"{shown if len(shown) <= 60 else shown[:57] + '...'} ({kind})"


def _wrong(path: str, value: Any, expected: str) -> HeaderError:
    return HeaderError(path, f"is {_shown(value)}, expected {expected}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(low: float | None = None, *, above: bool = False) -> Check:
    """A finite number, ``> low`` when ``above`` else ``>= low``."""
    expected = "a finite number" + ("" if low is None else f" {'>' if above else '>='} {low:g}")

    def check(value: Any, path: str, scope: Scope) -> None:
        if not _is_number(value) or not math.isfinite(value) or (
                low is not None and (value <= low if above else value < low)):
            raise _wrong(path, value, expected)
    return check


def integer(low: int | Callable[[Scope], int] | None = None, below: Callable[[Scope], int] | None = None,
            what: str = "") -> Check:
    """An integer (not a boolean, not 2.0) in ``[low, below)``; bounds may come from the scope."""

    def check(value: Any, path: str, scope: Scope) -> None:
        lo = low(scope) if callable(low) else low
        hi = below(scope) if below is not None else None
        if not isinstance(value, int) or isinstance(value, bool) or (lo is not None and value < lo) or (
                hi is not None and value >= hi):
            bounds = (f" in [{lo}, {hi})" if lo is not None and hi is not None else f" >= {lo}" if lo is not None
                      else "")
            raise _wrong(path, value, f"an integer{bounds}{what}")
    return check


frame_index: Check = integer(0, lambda s: s.frames, " (a stored frame)")


def text(empty: bool = False) -> Check:
    expected = "a string" if empty else "a non-empty string"

    def check(value: Any, path: str, scope: Scope) -> None:
        if not isinstance(value, str) or not (empty or value.strip()):
            raise _wrong(path, value, expected)
    return check


def flag(value: Any, path: str, scope: Scope) -> None:
    if not isinstance(value, bool):
        raise _wrong(path, value, "true or false")


def choice(*options: str) -> Check:
    def check(value: Any, path: str, scope: Scope) -> None:
        if not isinstance(value, str) or value not in options:
            raise _wrong(path, value, "one of " + ", ".join(repr(o) for o in options))
    return check


def nullable(inner: Check) -> Check:
    def check(value: Any, path: str, scope: Scope) -> None:
        if value is not None:
            inner(value, path, scope)
    return check


def body_name(value: Any, path: str, scope: Scope) -> None:
    """The name of one of the trace's bodies (any case, as `Trace.body_index` finds it)."""
    if not isinstance(value, str) or value.lower() not in scope.known:
        raise _wrong(path, value, "the name of one of the trace's bodies")


def items(item: Check, length: int | Callable[[Scope], int] | None = None, least: int = 0,
          distinct: bool = False, what: str = "a list") -> Check:
    """A list of ``length`` (or at least ``least``) entries, each checked by ``item`` (path ``[i]``)."""

    def check(value: Any, path: str, scope: Scope) -> None:
        n = length(scope) if callable(length) else length
        if not isinstance(value, list) or (n is not None and len(value) != n) or len(value) < least:
            size = f" of {n}" if n is not None else f" of at least {least}" if least else ""
            raise _wrong(path, value, f"{what}{size}")
        for i, v in enumerate(value):
            item(v, f"{path}[{i}]", scope)
        if distinct:
            seen: dict[str, int] = {}
            for i, v in enumerate(value):
                first = seen.setdefault(json.dumps(v, sort_keys=True), i)
                if first != i:
                    raise HeaderError(f"{path}[{i}]", f"is {_shown(v)}, which {path}[{first}] already is; "
                                                      "expected no repeats")
    return check


def vector(length: int | Callable[[Scope], int] | None, each: Check | None = None, least: int = 0) -> Check:
    """A list of finite numbers (one per axis when ``length`` is the trace's dimension)."""
    return items(each or number(), length, least, what="a list of finite numbers")


def per_axis(scope: Scope) -> int:
    return scope.dim


def fields(schema: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    """A JSON object: ``required`` keys present, every key of ``schema`` that is present
    checked (path ``.key``); other keys pass (their numbers are checked by `finite`)."""

    def check(value: Any, path: str, scope: Scope) -> None:
        if not isinstance(value, dict):
            raise _wrong(path, value, "an object")
        for key in required:
            if key not in value:
                raise HeaderError(f"{path}.{key}", "is missing")
        for key, rule in schema.items():
            if key in value:
                rule(value[key], f"{path}.{key}", scope)
    return check


def mapping(each: Check) -> Check:
    """A JSON object whose every value is checked by ``each``."""

    def check(value: Any, path: str, scope: Scope) -> None:
        if not isinstance(value, dict):
            raise _wrong(path, value, "an object")
        for key, v in value.items():
            each(v, f"{path}.{key}", scope)
    return check


def _goal(value: Any, path: str, scope: Scope) -> None:
    items(body_name, 2, what="a list of two body names")(value, path, scope)
    if value[0].lower() == value[1].lower():
        raise HeaderError(f"{path}[1]", f"is {_shown(value[1])}, which {path}[0] already is; expected no repeats")


def _part(value: Any, path: str, scope: Scope) -> None:
    """2D: a circle (``center``, ``radius``) or a polygon (``vertices``); 3D: ``center``,
    ``radius`` (bounding sphere), optional ``quat`` and the shape's own sizes."""
    fields({"kind": text()}, ("kind",))(value, path, scope)
    if "vertices" in value:
        items(vector(per_axis), least=1, what="a list of points")(value["vertices"], f"{path}.vertices", scope)
        return
    fields({
        "center": vector(per_axis),
        "radius": number(0),
        "quat": vector(4),
        "half_size": vector(3, number(0)),
        "half_length": number(0),
        "radius_cross": number(0),
    }, ("center", "radius"))(value, path, scope)


BODY: Check = fields({
    "name": text(),
    "color": text(empty=True),
    "shape": text(empty=True),
    "dynamic": flag,
    "role": text(),
    "size": mapping(number(0)),  # radius, length, thickness, width, height, depth
    "parts": items(_part),
}, ("name", "color", "shape", "dynamic"))

ROPE: Check = fields({
    "name": text(empty=True),
    "bodies": items(integer(0, lambda s: len(s.names), " (a body index)"), least=2, distinct=True),
    "closed": flag,
}, ("bodies",))

# Every meta key the code reads, and the ones our simulators write. Absent keys are fine.
META: dict[str, Check] = {
    "simulator": text(),
    "mujoco_version": text(),
    "template": nullable(text(empty=True)),  # "" for a scene built by hand
    "variant": nullable(integer(0)),
    "params": nullable(fields({})),  # the scene's parameters
    "description": nullable(text(empty=True)),
    "goal": nullable(_goal),
    "task_goal": text(),  # a goal in words (the rope world: the Gauss code to reach)
    "dt": number(0, above=True),  # physics step, seconds
    "stride": integer(1),
    "steps": integer(0),
    "max_steps": nullable(integer(0)),
    HORIZON_KEY: nullable(integer(lambda s: s.frames, what=" (at least the stored frames)")),
    STOPPED_KEY: nullable(choice(*STOP_REASONS)),
    "world_size": vector(per_axis, number(0, above=True)),
    "units": text(empty=True),
    "success": flag,
    "solved_frame": nullable(frame_index),
    "settled_frame": nullable(frame_index),
    "truncated_at_frame": frame_index,
    "action": nullable(vector(None, least=1)),
    "action_px": nullable(fields({"x": number(), "y": number(), "radius": number(0, above=True)})),
    "action_kind": text(),
    "seed": nullable(integer()),
    "gravity": vector(per_axis),
    "start_time": number(),
    "ropes": items(ROPE),
    "rope": fields({}),  # the rope's build settings
    "trace_id": text(),
}


EVENT_ENTRIES = ("kind", "frame", "params")  # an event is written as [kind, frame, params]


def _event(value: Any, path: str, scope: Scope) -> None:
    """``[kind, frame, params]``; collision events name two bodies, TaskComplete says ``success``."""
    if not isinstance(value, list) or len(value) != 3:
        raise _wrong(path, value, "[kind, frame, params]")
    kind, frame, params = value
    text()(kind, f"{path}.kind", scope)
    frame_index(frame, f"{path}.frame", scope)
    if kind in (COLLISION_START, COLLISION_END):
        fields({"object_a": body_name, "object_b": body_name}, ("object_a", "object_b"))(params, f"{path}.params", scope)
    elif kind == TASK_COMPLETE:
        fields({"success": flag}, ("success",))(params, f"{path}.params", scope)
    else:
        fields({})(params, f"{path}.params", scope)


def finite(value: Any, path: str) -> None:
    """No NaN or infinite number anywhere in ``value`` (JSON has neither; Python's json
    reads and writes ``NaN``/``Infinity`` unless told not to). A loop, not recursion:
    a file decides how deep its JSON nests."""
    todo = [(value, path)]
    while todo:
        v, at = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise HeaderError(at, f"is {_shown(v)}, expected a finite number")
        if isinstance(v, dict):
            todo.extend((x, f"{at}.{k}") for k, x in reversed(list(v.items())))  # reversed: the first is reported
        elif isinstance(v, list):
            todo.extend((x, f"{at}[{i}]") for i, x in reversed(list(enumerate(v))))


def body_list(header: dict[str, Any]) -> list[Any]:
    """The header's ``bodies``, a list (its entries are checked by `check_header`)."""
    if "bodies" not in header:
        raise HeaderError("bodies", "is missing")
    if not isinstance(header["bodies"], list):
        raise _wrong("bodies", header["bodies"], "a list")
    return header["bodies"]


def check_header(header: dict[str, Any], frames: int, dim: int) -> None:
    """Check a parsed header's ``bodies``, ``events`` and ``meta`` against the schema for
    arrays of ``frames`` stored frames in ``dim`` dimensions; raises `HeaderError`."""
    for key in ("bodies", "events", "meta"):
        if key not in header:
            raise HeaderError(key, "is missing")
    finite(header["bodies"], "bodies")
    finite(header["meta"], "meta")
    events = header["events"]
    for i, event in enumerate(events if isinstance(events, list) else ()):
        if isinstance(event, list) and len(event) == len(EVENT_ENTRIES):
            for name, value in zip(EVENT_ENTRIES, event):
                finite(value, f"events[{i}].{name}")
    bodies = header["bodies"]
    items(BODY)(bodies, "bodies", Scope(frames, dim))
    names = tuple(b["name"] for b in bodies)
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if first.setdefault(name, i) != i:
            raise HeaderError(f"bodies[{i}].name", f"is {_shown(name)}, which bodies[{first[name]}] already has; "
                                                   "body names must be unique")
    scope = Scope(frames, dim, names, frozenset(n.lower() for n in names))
    items(_event)(header["events"], "events", scope)
    fields(META)(header["meta"], "meta", scope)
