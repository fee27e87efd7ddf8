"""The `Annotation` contract: the pattern events of one trace.

An annotation holds, per pattern label (library order), the events its
detector emitted: ``pattern_events[label]`` is an `EventList`, a list of
``(frame, params)`` sorted by frame (stable: events of one frame keep the
detector's order). That is the shape detectors return, the shape
`simpatterns.detectors` passes to the detectors that depend on a pattern, and
the shape fitness and the reward DSL read (`Annotation.events_of`): nothing is
converted on the way. ``params`` name bodies with the trace's body names
(``{"object_a": "red ball", "object_b": "ground"}``) and carry values
(numbers, strings, lists).

Views on top of it, computed on demand:

- ``events``: every event as a `PatternEvent(pattern, frame, params)`, sorted by
  (frame, pattern, params) (cached);
- ``by_pattern(label)``: one pattern's `PatternEvent`s in that order;
- ``frames(label)``: the frames at which a pattern is active;
- ``matrix()``: the sparse ``[T, L]`` boolean matrix the paper uses (row =
  frame, column = pattern in library order).

File format (``.jsonl``, one JSON object per line): a header line
``{"format": "simpatterns-annotation", "version": 1, "trace": ..., "num_frames":
T, "dt": ..., "patterns": [...], "timings": {...}, "errors": {...}, "episode":
{...}, "bodies": [{"name", "color", "shape", "dynamic", "role"}, ...]}`` then one
line per event ``{"pattern": ..., "frame": ..., "params": {...}}`` in the
order of ``events``.

This module also holds what every layer shares about labels and events:
`normalize_label` (how labels are compared everywhere) and `EventList`.
"""

from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write
from simpatterns.trace import Body, Episode
from simpatterns.trace import _json_default as _jsonable

if TYPE_CHECKING:
    import scipy.sparse as sp

ANNOTATION_FORMAT = "simpatterns-annotation"
ANNOTATION_VERSION = 1

EventList = list[tuple[int, dict[str, Any]]]
"""One pattern's events on one trace: ``[(frame, params), ...]`` sorted by frame."""


def normalize_label(label: str) -> str:
    """'Lever_Launch ' -> 'lever launch': how pattern labels (and, in the reward DSL,
    body names) are compared everywhere."""
    return " ".join(label.replace("_", " ").lower().split())


class AnnotationFormatError(SimpatternsError, ValueError):
    """An annotation file is malformed; the message names file, line and field."""


def params_key(params: dict[str, Any]) -> str:
    """Canonical text of a params dict (sorted keys), for sorting and hashing."""
    return _PARAMS_ENCODER.encode(params)


# json.dumps(params, sort_keys=True, separators=(",", ":"), default=str), without building an encoder per call
_PARAMS_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class PatternEvent:
    pattern: str
    frame: int
    params: dict[str, Any] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, str, str]:
        return (self.frame, self.pattern, params_key(self.params))

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "frame": self.frame, "params": self.params}


def sort_events(events: Iterable[PatternEvent]) -> list[PatternEvent]:
    """``sorted(events, key=PatternEvent.sort_key)``, computing the params' JSON text only for
    events that tie on (frame, pattern): the same order (both sorts are stable), at a fraction
    of the cost."""
    out = sorted(events, key=_FRAME_PATTERN)
    keys = list(map(_FRAME_PATTERN, out))
    start = 0
    for k in [k for k in range(1, len(out)) if keys[k] != keys[k - 1]] + [len(out)]:  # ends of equal-key runs
        if k - start > 1:
            out[start:k] = sorted(out[start:k], key=_params_text)
        start = k
    return out


_FRAME_PATTERN = operator.attrgetter("frame", "pattern")
_FRAME = operator.itemgetter(0)


def _params_text(e: PatternEvent) -> str:
    return params_key(e.params)


def _frame_and_params(e: tuple[int, dict[str, Any]]) -> tuple[int, str]:
    return e[0], params_key(e[1])


@dataclass
class Annotation:
    """Per-pattern events of one trace; see the module docstring.

    ``pattern_events`` gets one entry per label of ``patterns`` (empty when the
    pattern never fired or failed), in that order; labels beyond ``patterns``
    are kept after them. Each list is sorted by frame (stable) on construction.
    Build one from a flat list of `PatternEvent` with `Annotation.from_events`.
    """

    pattern_events: dict[str, EventList]
    num_frames: int
    patterns: list[str]
    dt: float = 1.0 / 60.0
    trace_id: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds per pattern
    errors: dict[str, str] = field(default_factory=dict)  # pattern -> error text
    # the trace's `Episode` (horizon, why it stopped, the success pair), so time in a reward
    # program means the same with or without the trace; None: the stored frames are the episode
    episode: Episode | None = None
    # the trace's bodies as words (name, colour, shape, dynamic, role; no geometry), so a reward
    # program can resolve "green object" or "the goal object" without the trace; None: unknown
    bodies: list[Body] | None = None

    def __post_init__(self) -> None:
        given = self.pattern_events
        ordered: dict[str, EventList] = {p: _by_frame(given.get(p, [])) for p in self.patterns}
        for p, evs in given.items():
            if p not in ordered:
                ordered[p] = _by_frame(evs)
        self.pattern_events = ordered
        self._clear_views()

    def _clear_views(self) -> None:
        self._events: list[PatternEvent] | None = None
        self._by_pattern: dict[str, list[PatternEvent]] = {}

    def __getstate__(self) -> dict[str, Any]:  # the views are rebuilt on demand, not shipped
        state = dict(self.__dict__)
        state["_events"], state["_by_pattern"] = None, {}
        return state

    @classmethod
    def from_events(
        cls,
        events: Iterable[PatternEvent],
        num_frames: int,
        patterns: list[str],
        dt: float = 1.0 / 60.0,
        trace_id: str = "",
        timings: dict[str, float] | None = None,
        errors: dict[str, str] | None = None,
        episode: Episode | None = None,
        bodies: list[Body] | None = None,
    ) -> "Annotation":
        """An annotation from a flat list of `PatternEvent` (any order), e.g. built by hand."""
        grouped: dict[str, EventList] = {p: [] for p in patterns}
        for e in events:
            grouped.setdefault(e.pattern, []).append((e.frame, e.params))
        return cls(grouped, num_frames, list(patterns), dt, trace_id, dict(timings or {}), dict(errors or {}),
                   episode, bodies)

    @property
    def duration(self) -> float:
        return self.num_frames * self.dt

    def events_of(self, pattern: str) -> EventList:
        """One pattern's events as stored, ``[(frame, params), ...]`` sorted by frame: the raw
        accessor for code that reads many events (fitness, the reward DSL). Do not modify it."""
        evs = self.pattern_events.get(pattern)
        return evs if evs is not None else []

    @property
    def events(self) -> list[PatternEvent]:
        """Every event, sorted by (frame, pattern, params); built on first use and cached."""
        if self._events is None:
            self._events = sort_events(
                [PatternEvent(p, f, q) for p, evs in self.pattern_events.items() for f, q in evs])
        return self._events

    @property
    def num_events(self) -> int:
        return sum(len(evs) for evs in self.pattern_events.values())

    def by_pattern(self, pattern: str) -> list[PatternEvent]:
        """Events of one pattern label as `PatternEvent`s, sorted by (frame, params)."""
        out = self._by_pattern.get(pattern)
        if out is None:
            out = sort_events([PatternEvent(pattern, f, p) for f, p in self.events_of(pattern)])
            self._by_pattern[pattern] = out
        return out

    def frames(self, pattern: str) -> np.ndarray:
        """Frames at which ``pattern`` is active (sorted, unique)."""
        evs = self.events_of(pattern)
        return np.unique(np.fromiter((f for f, _ in evs), dtype=np.int64, count=len(evs)))

    def matrix(self) -> "sp.csr_matrix":
        """Sparse boolean ``[T, L]``: pattern l active at frame t."""
        import scipy.sparse as sp  # only here: the sandbox's fork server imports this module

        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        for c, p in enumerate(self.patterns):
            f = self.frames(p)
            f = f[(f >= 0) & (f < self.num_frames)]
            rows.append(f)
            cols.append(np.full(f.size, c, dtype=np.int64))
        r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        m = sp.coo_matrix((np.ones(r.size, dtype=bool), (r, c)), shape=(self.num_frames, len(self.patterns)),
                          dtype=bool)
        return m.tocsr()

    # ------------------------------------------------------------- file IO
    def save(self, path: str | os.PathLike) -> Path:
        """Write JSON lines atomically."""
        header = {
            "format": ANNOTATION_FORMAT,
            "version": ANNOTATION_VERSION,
            "trace": self.trace_id,
            "num_frames": self.num_frames,
            "dt": self.dt,
            "patterns": self.patterns,
            "timings": self.timings,
            "errors": self.errors,
        }
        if self.episode is not None:
            header["episode"] = self.episode.to_json()
        if self.bodies is not None:
            header["bodies"] = [{"name": b.name, "color": b.color, "shape": b.shape, "dynamic": b.dynamic,
                                 "role": b.role} for b in self.bodies]
        lines = [json.dumps(header, default=_jsonable)]
        lines += [json.dumps(e.to_json(), default=_jsonable) for e in self.events]
        return atomic_write(path, "\n".join(lines) + "\n")

    @staticmethod
    def load(path: str | os.PathLike) -> "Annotation":
        path = Path(path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise AnnotationFormatError(f"{path}: cannot read annotation ({exc})") from exc
        lines = text.splitlines()
        if not lines:
            raise AnnotationFormatError(f"{path}:1: empty file, expected a header line")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError as exc:
            raise AnnotationFormatError(f"{path}:1:{exc.colno}: header is not JSON ({exc.msg})") from exc
        if not isinstance(header, dict) or header.get("format") != ANNOTATION_FORMAT:
            raise AnnotationFormatError(f"{path}:1: field 'format' must be {ANNOTATION_FORMAT!r}")
        if not isinstance(header.get("version"), int) or header["version"] > ANNOTATION_VERSION:
            raise AnnotationFormatError(
                f"{path}:1: field 'version' is {header.get('version')!r}; this simpatterns reads <= {ANNOTATION_VERSION}"
            )
        grouped: dict[str, EventList] = {}
        for lineno, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AnnotationFormatError(f"{path}:{lineno}:{exc.colno}: not JSON ({exc.msg})") from exc
            for key, typ in (("pattern", str), ("frame", int), ("params", dict)):
                if not isinstance(d.get(key), typ):
                    raise AnnotationFormatError(
                        f"{path}:{lineno}: field {key!r} must be {typ.__name__}, got {d.get(key)!r}"
                    )
            grouped.setdefault(d["pattern"], []).append((d["frame"], d["params"]))
        try:
            return Annotation(
                pattern_events=grouped,
                num_frames=int(header["num_frames"]),
                patterns=list(header["patterns"]),
                dt=float(header.get("dt", 1 / 60)),
                trace_id=str(header.get("trace", "")),
                timings={k: float(v) for k, v in header.get("timings", {}).items()},
                errors=dict(header.get("errors", {})),
                episode=Episode.from_json(header["episode"]) if header.get("episode") else None,
                bodies=[Body.from_json(b) for b in header["bodies"]] if header.get("bodies") is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AnnotationFormatError(f"{path}:1: header field missing or malformed ({exc!r})") from exc

    def __eq__(self, other: object) -> bool:
        # `equals`: timings differ from run to run, the events do not
        return self.equals(other) if isinstance(other, Annotation) else NotImplemented

    def equals(self, other: "Annotation") -> bool:
        """Same events, frames, patterns (timings are not compared; also ``==``)."""
        if self.num_frames != other.num_frames or self.patterns != other.patterns:
            return False
        for p in self.pattern_events.keys() | other.pattern_events.keys():
            a, b = self.events_of(p), other.events_of(p)
            if len(a) != len(b) or sorted(map(_frame_and_params, a)) != sorted(map(_frame_and_params, b)):
                return False
        return True


def _by_frame(events: Iterable[tuple[int, dict[str, Any]]]) -> EventList:
    """``events`` as a new list sorted by frame (stable; linear time when already sorted)."""
    return sorted(events, key=_FRAME)
