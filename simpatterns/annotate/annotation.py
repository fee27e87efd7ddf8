"""The `Annotation` contract: the pattern events of one trace.

An annotation is the sorted list of `PatternEvent(pattern, frame, params)` a
pattern library emitted on one trace, plus the sparse ``[T, L]`` boolean
matrix view the paper uses (row = frame, column = pattern in library order).
``params`` name bodies with the trace's body names (``{"object_a": "red
ball", "object_b": "ground"}``) and carry values (numbers, strings, lists).

File format (``.jsonl``, one JSON object per line): a header line
``{"format": "simpatterns-annotation", "version": 1, "trace": ..., "num_frames":
T, "dt": ..., "patterns": [...], "timings": {...}, "errors": {...}}`` then one
line per event ``{"pattern": ..., "frame": ..., "params": {...}}``.
"""

from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import scipy.sparse as sp

from simpatterns.trace import _json_default as _jsonable

ANNOTATION_FORMAT = "simpatterns-annotation"
ANNOTATION_VERSION = 1


class AnnotationFormatError(ValueError):
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


def _params_text(e: PatternEvent) -> str:
    return params_key(e.params)


@dataclass
class Annotation:
    """Sorted pattern events of one trace; see the module docstring."""

    events: list[PatternEvent]
    num_frames: int
    patterns: list[str]
    dt: float = 1.0 / 60.0
    trace_id: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds per pattern
    errors: dict[str, str] = field(default_factory=dict)  # pattern -> error text

    def __post_init__(self) -> None:
        self.events = sort_events(self.events)
        self._by_pattern: dict[str, list[PatternEvent]] | None = None

    @property
    def duration(self) -> float:
        return self.num_frames * self.dt

    def by_pattern(self, pattern: str) -> list[PatternEvent]:
        """Events of one pattern label, in frame order."""
        if self._by_pattern is None:
            index: dict[str, list[PatternEvent]] = {p: [] for p in self.patterns}
            for e in self.events:
                index.setdefault(e.pattern, []).append(e)
            self._by_pattern = index
        return self._by_pattern.get(pattern, [])

    def frames(self, pattern: str) -> np.ndarray:
        """Frames at which ``pattern`` is active (sorted, unique)."""
        return np.unique(np.fromiter((e.frame for e in self.by_pattern(pattern)), dtype=np.int64))

    def matrix(self) -> sp.csr_matrix:
        """Sparse boolean ``[T, L]``: pattern l active at frame t."""
        col = {p: i for i, p in enumerate(self.patterns)}
        rows, cols = [], []
        for e in self.events:
            if e.pattern in col and 0 <= e.frame < self.num_frames:
                rows.append(e.frame)
                cols.append(col[e.pattern])
        data = np.ones(len(rows), dtype=bool)
        m = sp.coo_matrix((data, (rows, cols)), shape=(self.num_frames, len(self.patterns)), dtype=bool)
        return m.tocsr()

    # ------------------------------------------------------------- file IO
    def save(self, path: str | os.PathLike) -> Path:
        """Write JSON lines atomically."""
        path = Path(path)
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
        lines = [json.dumps(header, default=_jsonable)]
        lines += [json.dumps(e.to_json(), default=_jsonable) for e in self.events]
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)
        return path

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
        events = []
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
            events.append(PatternEvent(d["pattern"], d["frame"], d["params"]))
        try:
            return Annotation(
                events=events,
                num_frames=int(header["num_frames"]),
                patterns=list(header["patterns"]),
                dt=float(header.get("dt", 1 / 60)),
                trace_id=str(header.get("trace", "")),
                timings={k: float(v) for k, v in header.get("timings", {}).items()},
                errors=dict(header.get("errors", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AnnotationFormatError(f"{path}:1: header field missing or malformed ({exc!r})") from exc

    def equals(self, other: "Annotation") -> bool:
        """Same events, frames, patterns (timings are not compared)."""
        return (
            self.num_frames == other.num_frames
            and self.patterns == other.patterns
            and [e.sort_key() for e in self.events] == [e.sort_key() for e in other.events]
        )


def merge_events(groups: Iterable[Iterable[PatternEvent]]) -> list[PatternEvent]:
    out: list[PatternEvent] = []
    for g in groups:
        out.extend(g)
    return sort_events(out)
