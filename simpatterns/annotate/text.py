"""Annotated traces as compact text for language models (and the ``ansi`` render mode).

`annotation_text` = `scene_header` (bodies, colours, shapes, initial
positions, the action, the outcome) + `timeline_text`. In the timeline,
activations of one pattern with the same objects on consecutive frames merge
into one interval line, ``"1.20–3.45  touching: red ball, ground"``; numeric
params that vary over the interval show their range. An event with an integer
``frames`` param is an interval of that length (see `activation_span`); with
``until_s`` such intervals are cut at that time, so nothing later leaks. When the text would
exceed ``budget_chars``, patterns are replaced one at a time by a one-line
summary (count, time span, objects involved), the pattern whose lines cost the
most beyond their summary first, until it fits; then the latest lines are cut
with a note saying how many; then the "Not observed" list goes. The result
never exceeds the budget.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simpatterns.annotation import Annotation, PatternEvent, sort_events
from simpatterns.trace import Trace

DASH = "–"
MIN_SUMMARY_LINES = 3  # fewer lines than this are never worth a summary
DURATION_KEY = "frames"  # an int param: the activation lasts this many frames from its frame


def activation_span(frame: int, params: dict[str, Any], num_frames: int) -> tuple[int, int]:
    """First and last frame of one activation: a single frame, or ``frame .. frame +
    frames - 1`` when it carries an integer ``frames`` param (the built-in detectors'
    convention for interval patterns: one event at the start, with its length)."""
    if _spans(params):
        return frame, min(frame + params[DURATION_KEY] - 1, max(num_frames - 1, frame))
    return frame, frame


def _spans(params: dict[str, Any]) -> bool:
    """True for an interval event (an integer ``frames`` param of at least 1)."""
    n = params.get(DURATION_KEY)
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def _fmt_num(v: float) -> str:
    if float(v).is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def _fmt_xy(p: np.ndarray, digits: int = 1) -> str:
    return "(" + ", ".join(f"{float(c):.{digits}f}" for c in p) + ")"


def _size_text(size: dict[str, float], digits: int = 1) -> str:
    return ", ".join(f"{k} {_fmt_num(round(v, digits))}" for k, v in size.items())


def scene_header(trace: Trace) -> str:
    """Scene, goal, action, outcome and every body's initial state, one body per line."""
    meta = trace.meta
    lines = []
    scene = []
    if meta.get("template"):
        scene.append(f"template {meta['template']}")
    if meta.get("variant") is not None:
        scene.append(f"variant {meta['variant']}")
    title = meta.get("description") or ""
    sim = meta.get("simulator", "simulation")
    lines.append(f"Scene: {sim}{' ' + ', '.join(scene) if scene else ''}{f' ({title})' if title else ''}")
    goal = meta.get("goal")
    if isinstance(goal, (list, tuple)) and len(goal) == 2:
        lines.append(f"Goal: make the {goal[0]} touch the {goal[1]}")
    elif isinstance(meta.get("task_goal"), str) and meta["task_goal"]:
        lines.append(f"Goal: {meta['task_goal']}")
    px = meta.get("action_px")
    if isinstance(px, dict) and {"x", "y", "radius"} <= set(px):
        act = meta.get("action") or []
        raw = f" [action x={act[0]:.3f} y={act[1]:.3f} r={act[2]:.3f}]" if len(act) == 3 else ""
        lines.append(
            f"Action: red ball of radius {px['radius']:.1f} placed at ({px['x']:.1f}, {px['y']:.1f}){raw}"
        )
    elif meta.get("action") is not None:
        lines.append(f"Action: {meta['action']}")
    else:
        lines.append("Action: none (the scene runs as built)")
    world = meta.get("world_size")
    units = meta.get("units", "")
    rate = 1.0 / trace.dt if trace.dt > 0 else float("nan")
    digits = 3 if units == "m" else 1  # metre-scale (MuJoCo) scenes need millimetres, pixel scenes do not
    up = "z up" if trace.dim == 3 else "y up"
    world_text = (
        " x ".join(_fmt_num(float(w)) for w in world) + f" {units}".rstrip() + f", {up}, gravity down; "
        if world else ""
    )
    duration = float(trace.time[-1] - trace.time[0]) if trace.num_frames else 0.0
    outcome = ""
    if "success" in meta:
        solved = meta.get("solved_frame")
        if meta.get("success"):
            when = f" at {solved * float(meta.get('dt', trace.dt)):.2f} s" if isinstance(solved, int) else ""
            outcome = f"; outcome: goal reached{when}"
        else:
            outcome = "; outcome: goal not reached" if meta.get("goal") else ""
    lines.append(
        f"World: {world_text}{duration:.2f} s recorded ({trace.num_frames} frames at {rate:.0f} per second){outcome}"
    )
    lines.append(f"Bodies (initial centre position{', ' + units if units else ''}):")
    walls = []
    for i, body in enumerate(trace.bodies):
        if body.role == "wall":
            walls.append(body.name)
            continue
        kind = body.shape if body.color in body.name else f"{body.color} {body.shape}"
        desc = [kind, "dynamic" if body.dynamic else "static"]
        if body.size:
            desc.append(_size_text(body.size, digits))
        if trace.dim == 2:
            ang = math.degrees(float(trace.angle[0, i]))
            if abs(ang) > 0.05:
                desc.append(f"angle {ang:.0f} deg")
        speed = float(np.linalg.norm(trace.velocity[0, i]))
        if speed > 1e-6:
            desc.append(f"initial velocity {_fmt_xy(trace.velocity[0, i], digits)}")
        lines.append(f"- {body.name}: {', '.join(desc)}, at {_fmt_xy(trace.position[0, i], digits)}")
    if walls:
        lines.append(f"- walls (static, scene border): {', '.join(walls)}")
    return "\n".join(lines)


@dataclass
class _Line:
    start: int
    end: int
    pattern: str
    order: int
    objects: list[str]
    text_params: list[str]
    count: int
    # texts made before, by (dt,) and (dt, width): lines kept over an episode's steps
    # (`TimelineLines`) are rendered again at every step
    _made: dict[tuple[float, ...], str] | None = field(default=None, compare=False, repr=False)

    def time_text(self, dt: float) -> str:
        if self._made is None:
            self._made = {}
        text = self._made.get((dt,))
        if text is None:
            a = f"{self.start * dt:.2f}"
            text = self._made[(dt,)] = a if self.end == self.start else f"{a}{DASH}{self.end * dt:.2f}"
        return text

    def render(self, dt: float, width: int) -> str:
        text = self._made.get((dt, width)) if self._made is not None else None
        if text is None:
            what = ", ".join(self.objects + self.text_params)
            text = f"{self.time_text(dt):<{width}}  {self.pattern}{': ' + what if what else ''}"
            self._made[(dt, width)] = text  # time_text made the dict
        return text


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _group_key(frame: int, params: dict[str, Any], num_frames: int) -> Any:
    """Events of one pattern with the same key share lines: equal non-numeric params (names as
    a rule: a tuple of them, not JSON); an interval event stands alone."""
    fixed = {k: v for k, v in params.items() if not _is_number(v)}
    key: Any = (tuple(sorted(fixed.items())) if all(type(v) is str for v in fixed.values())
                else json.dumps(fixed, sort_keys=True, default=str))
    if activation_span(frame, params, num_frames)[1] > frame:
        key = (key, frame)
    return key


def _group_lines(pattern: str, order: int, evs: list[tuple[int, dict[str, Any]]], body_names: set[str],
                 num_frames: int, last_frame: int) -> list[_Line]:
    """The lines of one group's events (in the order `Annotation.events` gives them)."""
    evs = sorted(evs, key=lambda x: x[0])
    # runs of consecutive frames, one line each (most groups hold an event or two: plain
    # Python, since numpy's fixed cost per call would be paid for every group)
    chunks = [[evs[0]]]
    for before, ev in zip(evs, evs[1:]):
        if ev[0] - before[0] > 1:
            chunks.append([ev])
        else:
            chunks[-1].append(ev)
    lines = []
    for chunk in chunks:
        params = chunk[0][1]
        end = max(activation_span(int(f), p, num_frames)[1] for f, p in chunk)
        end = max(int(chunk[-1][0]), min(end, last_frame))
        objects = [v for v in params.values() if isinstance(v, str) and v in body_names]
        text_params = []
        for k, v in params.items():
            if isinstance(v, str) and v in body_names:
                continue
            if k == DURATION_KEY and _spans(params):
                continue  # shown as the interval
            if _is_number(v):
                vals = [p.get(k) for _, p in chunk]
                nums = [float(x) for x in vals if _is_number(x)]
                lo, hi = min(nums), max(nums)
                text_params.append(f"{k} {_fmt_num(lo)}" if lo == hi else f"{k} {_fmt_num(lo)}{DASH}{_fmt_num(hi)}")
            else:
                text_params.append(f"{k} {v if isinstance(v, str) else json.dumps(v)}")
        lines.append(_Line(int(chunk[0][0]), end, pattern, order, objects, text_params, len(chunk)))
    return lines


def _sorted_lines(lines: list[_Line]) -> list[_Line]:
    return sorted(lines, key=lambda ln: (ln.start, ln.order, ln.objects, ln.text_params))


def _merged_lines(annotation: Annotation, body_names: set[str], until_frame: int | None) -> list[_Line]:
    order = {p: i for i, p in enumerate(annotation.patterns)}
    groups: dict[tuple[str, Any], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for e in annotation.events:
        if until_frame is not None and e.frame > until_frame:
            continue
        groups[(e.pattern, _group_key(e.frame, e.params, annotation.num_frames))].append((e.frame, e.params))
    last_frame = annotation.num_frames - 1 if until_frame is None else min(until_frame, annotation.num_frames - 1)
    lines: list[_Line] = []
    for (pattern, _), evs in groups.items():
        lines += _group_lines(pattern, order.get(pattern, len(order)), evs, body_names, annotation.num_frames,
                              last_frame)
    return _sorted_lines(lines)


@dataclass
class _PatternLines:
    """One pattern's events seen so far, grouped, and each group's lines, made for a trace of
    ``num_frames`` frames. ``open``: the groups whose lines depend on where the trace ends (an
    interval running past its last frame is cut there); ``rekey``: an interval event on the last
    frame, whose group would change on a longer trace."""

    order: int
    seen: list[tuple[int, dict[str, Any]]]
    groups: dict[Any, list[tuple[int, dict[str, Any]]]]
    lines: dict[Any, list[_Line]]
    num_frames: int = 0
    open: set[Any] = field(default_factory=set)
    rekey: bool = False


def _cut(frame: int, params: dict[str, Any], num_frames: int) -> bool:
    """True for an interval event running past the trace's last frame (cut there)."""
    return _spans(params) and frame + params[DURATION_KEY] > num_frames


class TimelineLines:
    """The lines of `timeline_text` for the annotation of a trace that grows (an episode's,
    after every step), kept from one call to the next: a pattern whose events extend the
    ones seen before with events at later frames has only the groups its new events join
    made again, and the groups holding an interval that ran past the trace's previous end
    (their lines end where the trace does). The text equals the one made afresh. One per
    episode (or trace): `clear` when it starts."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._names: set[str] | None = None
        self._patterns: dict[str, _PatternLines] = {}

    def lines(self, annotation: Annotation, body_names: set[str]) -> list[_Line]:
        """`_merged_lines(annotation, body_names, None)`, from what earlier calls kept."""
        order = {p: i for i, p in enumerate(annotation.patterns)}
        if any(p not in order for p in annotation.pattern_events):  # patterns ordered alike: no shortcut
            self.clear()
            return _merged_lines(annotation, body_names, None)
        if body_names != self._names:
            self.clear()
            self._names = set(body_names)
        T = annotation.num_frames
        lines: list[_Line] = []
        for pattern, events in annotation.pattern_events.items():
            kept = self._patterns.get(pattern)
            n = len(kept.seen) if kept is not None else 0
            new = events[n:]
            changed = set()
            if (kept is None or kept.order != order[pattern] or len(events) < n or T < kept.num_frames
                    or kept.rekey or events[:n] != kept.seen or (n and new and new[0][0] <= kept.seen[-1][0])):
                kept = self._patterns[pattern] = _PatternLines(order[pattern], [], {}, {})
                new = events
            elif T != kept.num_frames:
                changed |= kept.open  # their intervals were cut at the previous end
            for e in sort_events([PatternEvent(pattern, f, q) for f, q in new]):
                key = _group_key(e.frame, e.params, T)
                kept.groups.setdefault(key, []).append((e.frame, e.params))
                changed.add(key)
            for key in changed:
                group = kept.groups[key]
                kept.lines[key] = _group_lines(pattern, kept.order, group, body_names, T, T - 1)
                if any(_cut(f, q, T) for f, q in group):
                    kept.open.add(key)
                else:
                    kept.open.discard(key)
            kept.seen = list(events)
            kept.num_frames = T
            # an interval starting on the last frame is grouped as an instant until the trace grows
            kept.rekey = any(_spans(q) and q[DURATION_KEY] > 1 and f >= T - 1 for f, q in new)
            for key in kept.groups:
                lines += kept.lines[key]
        return _sorted_lines(lines)


def _summary(pattern: str, lines: list[_Line], dt: float) -> str:
    n_act = sum(ln.count for ln in lines)
    start, end = min(ln.start for ln in lines), max(ln.end for ln in lines)
    objs = Counter(name for ln in lines for name in dict.fromkeys(ln.objects))  # lines per object
    # ties by name: Counter order would follow set iteration, which differs between processes
    top = sorted(objs.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    who = ", ".join(f"{name} x{k}" for name, k in top)
    more = f", +{len(objs) - 6} more" if len(objs) > 6 else ""
    frames = f" ({n_act} active frames)" if n_act != len(lines) else ""
    return (
        f"{pattern}: {len(lines)} times{frames} between {start * dt:.2f} and "
        f"{end * dt:.2f} s{'; ' + who + more if who else ''}"
    )


def timeline_text(
    trace: Trace,
    annotation: Annotation,
    budget_chars: int = 4000,
    *,
    until_s: float | None = None,
    timeline: TimelineLines | None = None,
) -> str:
    """The annotation as time-ordered lines within ``budget_chars`` characters.

    ``until_s`` keeps only what happened up to that time (for questions asked
    about a partially observed rollout). ``timeline``: the lines kept from the
    previous call on the same growing trace (an episode's), so that only what
    its new events change is made again (the same text).
    """
    dt = annotation.dt or trace.dt
    until_frame = None if until_s is None else int(math.floor(until_s / dt + 1e-9))
    if timeline is not None and until_frame is None:
        lines = timeline.lines(annotation, set(trace.names))
    else:
        lines = _merged_lines(annotation, set(trace.names), until_frame)
    fired = {ln.pattern for ln in lines}
    quiet = [p for p in annotation.patterns if p not in fired and p not in annotation.errors]
    width = max((len(ln.time_text(dt)) for ln in lines), default=4)
    span = f" up to {until_frame * dt:.2f} s" if until_frame is not None else ""
    head = (
        f"Timeline{span} (seconds; a{DASH}b = active over that interval): "
        f"{sum(ln.count for ln in lines)} activations of {len(fired)} patterns"
    )
    tail = []
    if quiet:
        tail.append("Not observed: " + ", ".join(quiet))
    if annotation.errors:
        tail.append("Detector errors (no data): " + ", ".join(sorted(k or "<trace>" for k in annotation.errors)))

    by_pattern: dict[str, list[_Line]] = defaultdict(list)
    for ln in lines:
        by_pattern[ln.pattern].append(ln)
    summarised: dict[str, str] = {}
    shown = [(ln.pattern, ln.render(dt, width)) for ln in lines]  # rendered once, composed many times

    def compose(limit: int | None = None) -> tuple[str, int]:
        body = [text for pattern, text in shown if pattern not in summarised]
        dropped = 0
        if limit is not None and limit < len(body):
            dropped = len(body) - limit
            body = body[:limit] + [f"... {dropped} later lines cut to fit the size budget"]
        parts = [head] + body
        if summarised:
            parts.append("Frequent patterns (summarised):")
            parts += [f"- {summarised[p]}" for p in annotation.patterns if p in summarised]
        return "\n".join(parts + tail), dropped

    text, _ = compose()
    rendered: dict[str, int] = defaultdict(int)
    for pattern, line in shown:
        rendered[pattern] += len(line) + 1
    summaries: dict[str, str] = {}
    while len(text) > budget_chars:
        # summarise the pattern whose lines cost the most beyond their summary line
        gains = []
        for p, v in by_pattern.items():
            if p not in summarised and len(v) >= MIN_SUMMARY_LINES:
                if p not in summaries:
                    summaries[p] = _summary(p, v, dt)
                summary = summaries[p]
                gains.append((rendered[p] - len(summary) - 3, p, summary))
        gains = [g for g in gains if g[0] > 0]
        if not gains:
            break
        _, worst, summary = max(gains)
        summarised[worst] = summary
        text, _ = compose()
    if len(text) > budget_chars:
        n = sum(1 for ln in lines if ln.pattern not in summarised)
        lo, hi = 0, n
        while lo < hi:  # most timeline lines that fit, earliest first
            mid = (lo + hi + 1) // 2
            if len(compose(mid)[0]) <= budget_chars:
                lo = mid
            else:
                hi = mid - 1
        text, _ = compose(lo)
        if len(text) > budget_chars and tail:  # the lists of quiet or failed patterns go next
            tail.clear()
            text, _ = compose(0)
    if len(text) > budget_chars:  # even the summaries do not fit: keep the whole lines that do
        cut = text[:budget_chars]
        text = cut.rsplit("\n", 1)[0] if "\n" in cut else cut
    return text


def annotation_text(
    trace: Trace, annotation: Annotation, budget_chars: int = 6000, *, until_s: float | None = None
) -> str:
    """`scene_header` followed by `timeline_text`; the budget covers both (the header is kept whole)."""
    header = scene_header(trace)
    rest = max(200, budget_chars - len(header) - 2)
    return header + "\n\n" + timeline_text(trace, annotation, rest, until_s=until_s)
