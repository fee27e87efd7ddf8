"""The event schema on both sides of the sandbox boundary, and its canonical encoding.

A candidate's events are checked twice: in the confined child, on the Python
objects ``detect`` returned (`check_events`: the contract's `validate_events`
plus the declared params and body names), and in the parent, on the JSON the
child sent (`check_plain_events`: the same schema at JSON speed, since the
child is not trusted to have run the first check). `encode_events` is the
one canonical JSON both the sandbox's and the fitness's event hashes are
computed from.
"""

from __future__ import annotations

import json
from typing import Any

from simpatterns.annotation import EventList
from simpatterns.detectors.contract import DetectorError, default_body_params, interval_problem, validate_events
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Reason


def check_events(
    raw: Any, pattern: str, num_frames: int, params: frozenset[str], names: frozenset[str] | set[str],
    max_events: int, idx: int, body_params: frozenset[str] | None = None, interval: bool = False,
) -> EventList | dict[str, str]:
    """Schema-check one trace's events: the contract's `validate_events` (with ``interval``:
    an integer ``frames`` >= 1 on each) plus the declared PARAMS keys and body names in
    the ``body_params`` keys (the detector's BODY_PARAMS; default: the contract's).
    Returns the plain events, or a reason dict."""
    bodies = frozenset(default_body_params(params)) if body_params is None else body_params
    body_keys = sorted(bodies)  # checked in a fixed order: the same detail in every run
    if isinstance(raw, (list, tuple)) and len(raw) > max_events:
        return {"reason": "too_many_events", "detail": f"{len(raw)} events on trace {idx}, limit {max_events}"}
    try:
        events = validate_events(raw, pattern, num_frames, max_events=max_events)
    except DetectorError as exc:
        return {"reason": "invalid_events", "detail": f"trace {idx}: {str(exc).split(': ', 1)[-1]}"}
    for i, (_, p) in enumerate(events):
        keys = p.keys()
        if keys - params:
            return {"reason": "unknown_params",
                    "detail": f"trace {idx} event {i}: keys {sorted(keys - params)} not in PARAMS {sorted(params)}"}
        if params - keys:
            return {"reason": "missing_params", "detail": f"trace {idx} event {i}: missing keys {sorted(params - keys)}"}
        for key in body_keys:
            bad = not_a_body(p[key], names)
            if bad is not None:
                return {"reason": "unknown_object", "detail": f"trace {idx} event {i}: {key}={bad!r} is not a body name"}
    bad = interval_problem(events) if interval else ""
    if bad:
        return {"reason": "invalid_events", "detail": f"trace {idx} {bad}"}
    return events


def not_a_body(value: Any, names: frozenset[str] | set[str]) -> Any:
    """None when ``value`` names a body (or is a list of body names), else the offending value."""
    if isinstance(value, str):
        return None if value in names else value
    if isinstance(value, list):
        for v in value:
            if not isinstance(v, str) or v not in names:
                return v
        return None
    return value


def check_plain_events(
    items: Any, num_frames: int, params: frozenset[str], names: set[str], max_events: int, idx: int,
    body_params: frozenset[str] | None = None, interval: bool = False,
) -> EventList | Reason:
    """The parent's check of one trace's events as parsed from the child's JSON (so every
    value is already plain: no NaN, no objects): shape, frame range, exactly the PARAMS
    keys, body names in the ``body_params`` keys (the detector's declared BODY_PARAMS;
    default: the contract's), an integer ``frames`` >= 1 when ``interval``. The child ran
    `check_events`; this is the same schema again on the other side of the boundary."""
    bodies = frozenset(default_body_params(params)) if body_params is None else body_params
    body_keys = sorted(bodies)  # checked in a fixed order: the same detail in every run
    if not isinstance(items, list):
        return Reason(R.INVALID_EVENTS, f"trace {idx}: events are not a list")
    if len(items) > max_events:
        return Reason(R.TOO_MANY_EVENTS, f"{len(items)} events on trace {idx}, limit {max_events}")
    out = []
    for i, item in enumerate(items):
        if type(item) is not list or len(item) != 2:
            return Reason(R.INVALID_EVENTS, f"trace {idx} event {i}: not a (frame, params) pair")
        f, p = item
        if type(f) is not int or not 0 <= f < num_frames:
            return Reason(R.INVALID_EVENTS, f"trace {idx} event {i}: frame {f!r} outside [0, {num_frames})")
        if type(p) is not dict:
            return Reason(R.INVALID_EVENTS, f"trace {idx} event {i}: params are not a dict")
        if p.keys() != params:
            extra, missing = sorted(p.keys() - params), sorted(params - p.keys())
            code = R.UNKNOWN_PARAMS if extra else R.MISSING_PARAMS
            return Reason(code, f"trace {idx} event {i}: keys {extra or missing} " +
                          ("not in PARAMS" if extra else "missing"))
        for key in body_keys:
            bad = not_a_body(p[key], names)
            if bad is not None:
                return Reason(R.UNKNOWN_OBJECT, f"trace {idx} event {i}: {key}={bad!r} is not a body name")
        out.append((f, p))
    if interval:
        bad = interval_problem(out)
        if bad:
            return Reason(R.INVALID_EVENTS, f"trace {idx} {bad}")
    return out


def encode_events(events: EventList) -> str:
    """Canonical JSON of one trace's events: sorted by frame (stable, so events of one
    frame keep the detector's order), params with sorted keys. One ``json.dumps`` per
    trace: a per-event canonical sort would cost more than the detector."""
    ordered = sorted(([int(f), p] for f, p in events), key=lambda e: e[0])
    return json.dumps(ordered, sort_keys=True, separators=(",", ":"), allow_nan=False)
