"""What a compiled program reads while it runs: the annotation indexed by
pattern and params, rollout-fraction windows, and the trace's bodies,
positions and contacts. One `EvalContext` per evaluated (annotation, trace).

Frame ``f`` of a rollout with ``T`` frames is at fraction ``f / (T -
1)``; ``t=1.0`` is the last frame and ``t`` maps to ``round(t * (T - 1))``.
A window ``(start, end)`` holds the frames whose fraction lies in
``[start, end]`` (both ends included). A narrow window on a short rollout
may hold no frame: events and counts then see nothing, and ALWAYS / NEVER
hold vacuously.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any

import numpy as np

from simpatterns.dsl.errors import DSLEvaluationError, close_matches, error_at
from simpatterns.dsl.matching import normalize_text

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation, EventList
    from simpatterns.trace import Trace

PARTIAL_MAX = 0.999999  # a node that fails never scores above this, so score == 1 <=> success
FRACTION_EPS = 1e-9
DEFAULT_RADIUS_FRACTION = 0.05  # NEARBY_AT radius: 5% of the world's larger side


def inverse_log(x: float) -> float:
    """``1 / (1 + ln(1 + x))`` for an excess ``x >= 0``: 1 at 0, 0.59 at 1, 0.29 at 10."""
    if not x > 0:
        return 1.0 if x == 0 else (0.0 if x != x else 1.0)
    if x == math.inf:
        return 0.0
    return 1.0 / (1.0 + math.log1p(x))


def failed(score: float) -> float:
    """Clamp a failing node's score into ``[0, PARTIAL_MAX]`` (NaN -> 0)."""
    if not score > 0:
        return 0.0
    return score if score < PARTIAL_MAX else PARTIAL_MAX


class Where:
    """Source position of a compiled node, for evaluation errors."""

    __slots__ = ("span", "source", "filename")

    def __init__(self, span, source: str, filename: str):
        self.span, self.source, self.filename = span, source, filename

    def error(self, code: str, message: str, suggestions=(), hint: str = "") -> DSLEvaluationError:
        return error_at(code, message, self.span, self.source, self.filename, suggestions=suggestions,
                        hint=hint, cls=DSLEvaluationError)  # type: ignore[return-value]


class TraceView:
    """Per-trace lookups shared by all evaluations of that trace (cached by the
    compiled program): normalised body names and the default NEARBY_AT radius."""

    __slots__ = ("trace", "index", "names", "radius", "_radii", "_bodies", "_contacts")

    def __init__(self, trace: "Trace"):
        self.trace = trace
        self.names = list(trace.names)
        self.index = {normalize_text(n): i for i, n in enumerate(self.names)}
        world = trace.meta.get("world_size") if isinstance(trace.meta, dict) else None
        extent = 0.0
        try:
            extent = float(max(world)) if world else 0.0
        except (TypeError, ValueError):
            extent = 0.0
        if not extent > 0 and trace.num_frames and trace.num_bodies:
            p0 = np.asarray(trace.position[0], dtype=float)
            extent = float(np.nanmax(p0.max(axis=0) - p0.min(axis=0))) if p0.size else 0.0
        self.radius = DEFAULT_RADIUS_FRACTION * extent if extent > 0 else 1.0
        self._radii: np.ndarray | None = None
        self._bodies: dict[str, int] = {}
        self._contacts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def contacts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Contact columns (frame, a, b) in frame order: the trace's own arrays
        when already sorted (simulators write them so), else a sorted copy."""
        if self._contacts is None:
            tr = self.trace
            cf = tr.contact_frame
            if cf.size < 2 or bool(np.all(cf[1:] >= cf[:-1])):
                self._contacts = (cf, tr.contact_a, tr.contact_b)
            else:
                order = np.argsort(cf, kind="stable")
                self._contacts = (cf[order], tr.contact_a[order], tr.contact_b[order])
        return self._contacts

    def rows_at(self, frame: int) -> tuple[int, int]:
        """Rows ``[lo, hi)`` of `contacts` at one frame (binary search)."""
        cf = self.contacts()[0]
        return int(cf.searchsorted(frame, "left")), int(cf.searchsorted(frame, "right"))

    @property
    def radii(self) -> np.ndarray:
        """Bounding radius of each body (for TOUCHING's partial credit)."""
        if self._radii is None:
            self._radii = np.array([b.bounding_radius for b in self.trace.bodies], dtype=float)
        return self._radii

    def body(self, name: str, where: Where) -> int:
        i = self._bodies.get(name)
        if i is not None:
            return i
        i = self.index.get(normalize_text(name))
        if i is None:
            raise where.error(
                "unknown-body", f'the trace has no body "{name}"',
                suggestions=[f'"{s}"' for s in close_matches(name, self.names)],
                hint=f"bodies are {', '.join(self.names)}",
            )
        self._bodies[name] = i
        return i

    def frame(self, t: float) -> int:
        n = self.trace.num_frames
        return min(n - 1, max(0, int(round(t * (n - 1)))))

    def window(self, w: tuple[float, float]) -> tuple[int, int]:
        return window_frames(w, self.trace.num_frames)


def window_frames(w: tuple[float, float] | None, num_frames: int) -> tuple[int, int]:
    """Inclusive frame range ``(lo, hi)`` of a fraction window (empty if lo > hi)."""
    last = num_frames - 1
    if w is None:
        return 0, last
    lo = max(0, math.ceil(w[0] * last - FRACTION_EPS))
    hi = min(last, math.floor(w[1] * last + FRACTION_EPS))
    return lo, hi


class EvalContext:
    """One evaluation: memoised event frames per (pattern, params), windows,
    and the trace view."""

    __slots__ = ("annotation", "trace", "view", "num_frames", "labels", "memo")

    def __init__(self, annotation: "Annotation | None", view: TraceView | None, labels: dict[str, str]):
        self.annotation = annotation
        self.view = view
        self.trace = view.trace if view is not None else None
        if annotation is not None:
            self.num_frames = int(annotation.num_frames)
        elif view is not None:
            self.num_frames = view.trace.num_frames
        else:
            self.num_frames = 0
        self.labels = labels
        self.memo: dict[Any, Any] = {}

    def events(self, label: str, where: Where) -> "EventList":
        """Pattern events ``(frame, params)`` of a (normalised) label, in frame order."""
        if self.annotation is None:
            raise where.error("needs-annotation", "this predicate reads pattern events; pass an annotation")
        return self.annotation.events_of(self.labels.get(label, label))

    def frames(self, label: str, matcher, where: Where) -> list[int]:
        """Frames (one per matching event, sorted) of ``label`` events whose
        params satisfy ``matcher``; memoised per (label, params)."""
        key = (label, matcher.key)
        out = self.memo.get(key)
        if out is None:
            evs = self.events(label, where)
            out = [f for f, _ in evs] if matcher.empty else [f for f, p in evs if matcher(p)]
            self.memo[key] = out
        return out

    def intervals(self, label: str, matcher, where: Where) -> list[tuple[int, int]]:
        """Inclusive frame intervals of matching events: an event with a
        whole-number ``frames`` param lasts that many frames, others one."""
        key = ("intervals", label, matcher.key)
        out = self.memo.get(key)
        if out is None:
            out = []
            for f, p in self.events(label, where):
                if matcher.empty or matcher(p):
                    n = p.get("frames", 1)
                    length = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1 else 1
                    out.append((f, f + length - 1))
            self.memo[key] = out
        return out

    def window(self, w: tuple[float, float] | None) -> tuple[int, int]:
        return window_frames(w, self.num_frames)

    def in_window(self, frames: list[int], w: tuple[float, float] | None) -> list[int]:
        if w is None or not frames:
            return frames
        lo, hi = window_frames(w, self.num_frames)
        return frames[bisect_left(frames, lo) : bisect_right(frames, hi)]

    def need_view(self, where: Where, what: str) -> TraceView:
        if self.view is None:
            raise where.error("needs-trace", f"{what} reads body positions; pass the trace as well as the annotation",
                              hint="evaluate(annotation, trace=trace)")
        return self.view

    def fraction(self, frame: int) -> float:
        return frame / (self.num_frames - 1) if self.num_frames > 1 else 0.0
