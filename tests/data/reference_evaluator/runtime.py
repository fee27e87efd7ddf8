# Frozen reference: simpatterns/dsl/runtime.py before issue 32's speed-up (imports made relative). Do not edit.
"""What a compiled program reads while it runs: the annotation indexed by
pattern and params, windows on the episode's horizon, and the trace's
bodies, positions and contacts. One `EvalContext` per evaluated (annotation,
trace).

Time is measured on the episode, not on the stored rollout: an episode of
``H`` frames (its horizon: ``trace.meta["horizon"]``, PHYRE's 1001 frames of
1000 steps; the stored frames when the trace does not say) runs from
fraction 0 (frame 0) to 1 (frame ``H - 1``); ``t`` maps to frame
``round(t (H - 1))``. A window ``(start, end)`` holds the frames whose
fraction lies in ``[start, end]`` (both ends included). So a rollout that
stopped at success and the same rollout run in full give every frame the
same time. A narrow window may hold no frame: events and counts then see
nothing, and ALWAYS / NEVER hold vacuously.

After an early stop, the frames between the last stored one and the
horizon were never simulated. What is known about them is what the trace
says (`simpatterns.trace.Episode`): after a stop at success, the success
pair keeps touching; after a "settled" stop, nothing moves and no contact
changes; nothing else. A program is evaluated on the *frozen* completion
(the last stored frame holds to the horizon: its positions and contacts,
and the interval events running at it; no new event starts), which is
exact for what is known; a verdict that another completion could change is
marked *undetermined* (`EvalResult.determined`), and the explanation names
the frames that were not simulated.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any

import numpy as np

from simpatterns.dsl.errors import DSLEvaluationError, close_matches, error_at
from .matching import ParamMatcher, normalize_text
from simpatterns.dsl.references import SceneBodies
from simpatterns.trace import STOPPED_SETTLED, STOPPED_SUCCESS, Episode

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation, EventList
    from simpatterns.trace import Trace

PARTIAL_MAX = 0.999999  # a node that fails never scores above this, so score == 1 <=> success
FRACTION_EPS = 1e-9
DEFAULT_RADIUS_FRACTION = 0.05  # NEARBY_AT radius: 5% of the world's larger side
# patterns whose events are a pair starting or stopping touching: after a stop at success none
# involves the success pair, after a settled stop none happens at all
CONTACT_PATTERNS = frozenset({"collision start", "collision end", "touch start", "touch end"})

Span = tuple[int, int, int]  # (start, end in the frozen completion, end as stored), frames inclusive


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


class SceneView:
    """A scene's bodies (names, colours, shapes, roles) and the param matchers bound to
    it, shared by the evaluations of one trace or annotation (cached by the compiled program)."""

    __slots__ = ("scene", "names", "_bound", "_bodies")

    def __init__(self, bodies):
        self.scene = SceneBodies(bodies)
        self.names = self.scene.names
        self._bound: dict[Any, ParamMatcher] = {}
        self._bodies: dict[str, tuple[int, ...]] = {}

    def bodies(self, name: str, where: Where) -> tuple[int, ...]:
        """Indices of the bodies ``name`` names here: one for a name, the members of a
        class phrase ("green object", "the goal object"; possibly none). Raises
        ``unknown-body`` when it is neither."""
        out = self._bodies.get(name)
        if out is not None:
            return out
        out = self.scene.resolve(name)
        if out is None:
            raise where.error(
                "unknown-body", f'the trace has no body "{name}"',
                suggestions=[f'"{s}"' for s in close_matches(name, self.names)],
                hint=f"bodies are {', '.join(self.names)}",
            )
        self._bodies[name] = out
        return out

    def bind(self, matcher: ParamMatcher) -> ParamMatcher:
        """``matcher`` with its class phrases resolved to this scene's body names."""
        out = self._bound.get(matcher.key)
        if out is None:
            out = matcher.bind(self.scene.resolve_names)
            self._bound[matcher.key] = out
        return out


class TraceView(SceneView):
    """Per-trace lookups shared by all evaluations of that trace (cached by the
    compiled program): the scene's bodies (names, colour classes, roles), the
    default NEARBY_AT radius, contact columns and bound param matchers."""

    __slots__ = ("trace", "radius", "episode", "_contacts", "_geometry")

    def __init__(self, trace: "Trace"):
        super().__init__(trace.bodies)
        self.trace = trace
        self.episode = trace.episode
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
        self._contacts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._geometry: Any = None

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

    def geometry(self):
        """The bodies' outlines, for surface distances (`simpatterns.dsl.geometry`), built once."""
        if self._geometry is None:
            from .geometry import Outlines

            self._geometry = Outlines(self.trace)
        return self._geometry



def window_frames(w: tuple[float, float] | None, horizon: int) -> tuple[int, int]:
    """Inclusive frame range ``(lo, hi)`` of a fraction window on an episode of
    ``horizon`` frames (empty if lo > hi)."""
    last = horizon - 1
    if w is None:
        return 0, last
    lo = max(0, math.ceil(w[0] * last - FRACTION_EPS))
    hi = min(last, math.floor(w[1] * last + FRACTION_EPS))
    return lo, hi


class EvalContext:
    """One evaluation: the episode (simulated frames and horizon), memoised
    event spans per (pattern, params), windows, and the trace view."""

    __slots__ = ("annotation", "trace", "view", "scene", "num_frames", "horizon", "last", "episode", "labels",
                 "memo")

    def __init__(self, annotation: "Annotation | None", view: TraceView | None, labels: dict[str, str],
                 scene: SceneView | None = None):
        self.annotation = annotation
        self.view = view
        self.scene = view if view is not None else scene  # the bodies: the trace's, else the annotation's
        self.trace = view.trace if view is not None else None
        if view is not None:
            episode = view.episode
        elif annotation is not None:
            episode = annotation.episode or Episode(int(annotation.num_frames), int(annotation.num_frames))
            if episode.frames != annotation.num_frames:
                episode = Episode(int(annotation.num_frames), episode.horizon, episode.stopped, episode.goal)
        else:
            episode = Episode(0, 0)
        self.episode = episode
        self.num_frames = episode.frames
        self.horizon = max(episode.horizon, episode.frames)
        self.last = episode.frames - 1
        self.labels = labels
        self.memo: dict[Any, Any] = {}

    # ---------------------------------------------------------------- time
    @property
    def complete(self) -> bool:
        """Every frame of the episode was simulated."""
        return self.horizon <= self.num_frames

    def frame(self, t: float) -> int:
        """The episode frame at fraction ``t``."""
        last = self.horizon - 1
        return min(last, max(0, int(round(t * last))))

    def window(self, w: tuple[float, float] | None) -> tuple[int, int]:
        return window_frames(w, self.horizon)

    def is_open(self, lo: int, hi: int) -> bool:
        """True when frames ``lo..hi`` include frames that were never simulated."""
        return lo <= hi and hi > self.last

    def fraction(self, frame: int) -> float:
        return frame / (self.horizon - 1) if self.horizon > 1 else 0.0

    @property
    def settled(self) -> bool:
        """The rollout stopped because nothing moved: its last frame holds to the horizon."""
        return not self.complete and self.episode.stopped == STOPPED_SETTLED

    def goal_pair(self) -> tuple[int, int] | None:
        """Body indices of the pair known to keep touching after a stop at success."""
        if self.complete or self.episode.stopped != STOPPED_SUCCESS or len(self.episode.goal) != 2 or \
                self.scene is None:
            return None
        idx = [self.scene.scene.index.get(normalize_text(n)) for n in self.episode.goal]
        return (idx[0], idx[1]) if None not in idx else None  # type: ignore[return-value]

    def unsimulated(self) -> str:
        """Why some frames are unknown, for explanations."""
        why = {STOPPED_SUCCESS: "it stopped at success: only the success pair's contact is known after that",
               STOPPED_SETTLED: "it stopped when everything was at rest"}.get(self.episode.stopped or "",
                                                                             "nothing is known about them")
        return (f"undetermined: frames {self.num_frames}-{self.horizon - 1} of the episode were not simulated "
                f"({why}); this verdict assumes the last frame held")

    # -------------------------------------------------------------- events
    def events(self, label: str, where: Where) -> "EventList":
        """Pattern events ``(frame, params)`` of a (normalised) label, in frame order."""
        if self.annotation is None:
            raise where.error("needs-annotation", "this predicate reads pattern events; pass an annotation")
        return self.annotation.events_of(self.labels.get(label, label))

    def bind(self, matcher: ParamMatcher, where: Where) -> ParamMatcher:
        """The matcher resolved in this scene (class phrases need the trace's bodies)."""
        if not matcher.refs:
            return matcher
        if self.scene is None:
            raise where.error("needs-trace", f"{', '.join(sorted(matcher.refs))} name bodies by colour or role; "
                              "pass the trace, or an annotation that lists its bodies",
                              hint="evaluate(annotation, trace=trace)")
        return self.scene.bind(matcher)

    def frames(self, label: str, matcher: ParamMatcher, where: Where) -> list[int]:
        """Start frames (one per matching event, sorted) of ``label`` events whose
        params satisfy ``matcher``; memoised per (label, params)."""
        key = (label, matcher.key)
        out = self.memo.get(key)
        if out is None:
            m = self.bind(matcher, where)
            evs = self.events(label, where)
            out = [f for f, _ in evs] if m.empty else [f for f, p in evs if m(p)]
            self.memo[key] = out
        return out

    def spans(self, label: str, matcher: ParamMatcher, where: Where) -> list[Span]:
        """``(start, end, stored end)`` of the matching events of an interval pattern
        (declared ``DURATION = "interval"``: its ``frames`` param says how long); an
        interval running at the last simulated frame lasts to the horizon in the
        frozen completion. Memoised per (label, params)."""
        key = ("spans", label, matcher.key)
        out = self.memo.get(key)
        if out is None:
            m = self.bind(matcher, where)
            out = []
            extend = self.horizon - 1 if not self.complete else None
            for f, p in self.events(label, where):
                if m.empty or m(p):
                    n = p.get("frames", 1)
                    length = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1 else 1
                    end = f + length - 1
                    out.append((f, extend if extend is not None and end >= self.last else end, end))
            self.memo[key] = out
        return out

    def may_start(self, label: str, matcher: ParamMatcher, where: Where) -> bool:
        """Could a matching event start in the frames that were never simulated?"""
        if self.complete:
            return False
        if label not in CONTACT_PATTERNS:
            return True
        if self.settled:
            return False
        pair = self.goal_pair()
        if pair is None or self.scene is None:
            return True
        m = self.bind(matcher, where)
        names = self.scene.names
        goal = {names[pair[0]], names[pair[1]]}
        for i, a in enumerate(names):  # only the success pair is known not to start or stop touching
            for b in names[i + 1:]:
                if {a, b} != goal and (m({"object_a": a, "object_b": b}) or m({"object_a": b, "object_b": a})):
                    return True
        return False

    def need_view(self, where: Where, what: str) -> TraceView:
        if self.view is None:
            raise where.error("needs-trace", f"{what} reads body positions; pass the trace as well as the annotation",
                              hint="evaluate(annotation, trace=trace)")
        return self.view


def in_window(frames: list[int], lo: int, hi: int) -> list[int]:
    """The sorted ``frames`` within ``[lo, hi]``."""
    if not frames:
        return frames
    return frames[bisect_left(frames, lo): bisect_right(frames, hi)]
