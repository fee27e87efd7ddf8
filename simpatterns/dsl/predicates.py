"""The predicates of the reward DSL: signature, meaning, score rule and a
runnable implementation each.

Every predicate class documents itself (docstring = meaning, ``SCORE`` =
partial-credit rule, ``EXAMPLES``); `simpatterns.dsl.reference` builds the
language reference the LLM reads from these, so the prose and the code
cannot drift apart.

A compiled node answers ``eval(ctx) -> (success, score)`` and ``neg(ctx)``,
the result of ``NOT(node)``; both keep ``score == 1.0`` exactly when
``success`` (a failure scores at most `PARTIAL_MAX`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from simpatterns.dsl.matching import ParamMatcher, is_wildcard, normalize_text
from simpatterns.dsl.runtime import EvalContext, TraceView, Where, failed, inverse_log, window_frames

REQUIRED = object()
COLLISION_START = "collision start"
COLLISION_END = "collision end"


@dataclass(frozen=True)
class Arg:
    """One parameter of a predicate: ``kind`` says what the checker accepts."""

    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""
    of: str | None = None  # params: the pattern argument whose keys they use
    shown: str | None = None  # the default as the reference prints it, when not the kind's usual one

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


KIND_DOCS = {
    "pattern": 'a pattern label string, e.g. "collision start" (spaces or underscores)',
    "params": 'a dict of param constraints, e.g. {"object_a": "red ball"}',
    "window": "(start, end): fractions of the rollout, 0 <= start <= end <= 1",
    "fraction": "a number in [0, 1]: fraction of the rollout (1.0 = last frame)",
    "number": "a number",
    "positive": "a number > 0",
    "body": 'a body name, e.g. "green ball"',
    "body_or_any": 'a body name or a wildcard ("*", "object X")',
    "clause": "a predicate call or a COUNT comparison",
    "pattern_or_state": "a pattern label, or TOUCHING(a, b) / NEARBY_AT(body, ...) without t or window",
}


@dataclass
class ClauseResult:
    """Outcome of one clause; ``detail`` and ``children`` are filled when explaining."""

    text: str
    success: bool
    score: float
    detail: str = ""
    children: list["ClauseResult"] = field(default_factory=list)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"text": self.text, "success": self.success, "score": self.score}
        if self.detail:
            d["detail"] = self.detail
        if self.children:
            d["children"] = [c.to_json() for c in self.children]
        return d


def _frames_text(frames: list[int], ctx: EvalContext, limit: int = 6) -> str:
    if not frames:
        return "none"
    shown = ", ".join(f"{f} (t={ctx.fraction(f):.2f})" for f in frames[:limit])
    return shown + (f", ... {len(frames) - limit} more" if len(frames) > limit else "")


def _window_text(w) -> str:
    return "" if w is None else f" in window ({w[0]:g}, {w[1]:g})"


class Node:
    """A compiled node. Subclasses that are predicates set ``NAME`` etc."""

    NAME: ClassVar[str] = ""
    SIGNATURE: ClassVar[tuple[Arg, ...]] = ()
    VARIADIC: ClassVar[Arg | None] = None  # AND/OR: any number of these
    RETURNS: ClassVar[str] = "bool"  # "bool" or "count"
    STATE: ClassVar[bool] = False  # usable per frame inside ALWAYS/NEVER
    READS: ClassVar[str] = "annotation"  # "annotation", "trace", "trace or annotation", "-"
    SCORE: ClassVar[str] = ""
    NOT_SCORE: ClassVar[str] = "0 when it fails (the inner node succeeded)."
    EXAMPLES: ClassVar[tuple[str, ...]] = ()

    text: str = ""
    where: Where

    def eval(self, ctx: EvalContext) -> tuple[bool, float]:
        raise NotImplementedError

    def neg(self, ctx: EvalContext) -> tuple[bool, float]:
        ok, _ = self.eval(ctx)
        return (False, 0.0) if ok else (True, 1.0)

    def detail(self, ctx: EvalContext) -> str:
        return ""

    def explain(self, ctx: EvalContext, negated: bool = False) -> ClauseResult:
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        text = f"NOT({self.text})" if negated else self.text
        return ClauseResult(text, ok, score, self.detail(ctx))

    @property
    def needs_trace(self) -> bool:
        return self.READS == "trace"

    def children(self) -> list["Node"]:
        return []


class Query:
    """``pattern`` + params + window: the frames of matching events."""

    __slots__ = ("label", "matcher", "window", "where")

    def __init__(self, label: str, params: dict | None, window, where: Where, symmetric: bool = True):
        self.label = normalize_text(label)
        self.matcher = ParamMatcher(params, symmetric=symmetric)
        self.window = tuple(window) if window is not None else None
        self.where = where

    def all(self, ctx: EvalContext) -> list[int]:
        return ctx.frames(self.label, self.matcher, self.where)

    def hits(self, ctx: EvalContext) -> list[int]:
        return ctx.in_window(ctx.frames(self.label, self.matcher, self.where), self.window)

    def describe(self) -> str:
        p = "" if self.matcher.empty else " " + ", ".join(f"{k}={v!r}" for k, v in self.matcher.items)
        return f'"{self.label}"{p}{_window_text(self.window)}'


# --------------------------------------------------------------------- events
class Event(Node):
    """The pattern occurs, with matching params, inside the window (default:
    the whole rollout)."""

    NAME = "EVENT"
    SIGNATURE = (
        Arg("pattern", "pattern"),
        Arg("params", "params", None, of="pattern"),
        Arg("window", "window", None),
    )
    SCORE = "1 if a matching event occurs, else 0."
    NOT_SCORE = "NOT(EVENT(...)) scores 1 / (1 + ln(1 + n)) for n matching events (0.59 for one)."
    EXAMPLES = (
        'EVENT("collision start", {"object_a": "red ball", "object_b": "green ball"})',
        'EVENT("bounce", {"object": "green ball"}, window=(0.5, 1.0))',
    )

    def __init__(self, pattern: str, params=None, window=None, *, where: Where, symmetric: bool = True):
        self.q = Query(pattern, params, window, where, symmetric)
        self.where = where

    def eval(self, ctx):
        return (True, 1.0) if self.q.hits(ctx) else (False, 0.0)

    def neg(self, ctx):
        n = len(self.q.hits(ctx))
        return (True, 1.0) if n == 0 else (False, failed(inverse_log(n)))

    def detail(self, ctx):
        return f"{self.q.describe()}: matching events at frames {_frames_text(self.q.hits(ctx), ctx)}"


class Count(Node):
    """The number of matching events inside the window; a number, so it must be
    compared: ``COUNT(...) >= 2``, ``COUNT(a) == COUNT(b)``."""

    NAME = "COUNT"
    RETURNS = "count"
    SIGNATURE = Event.SIGNATURE
    SCORE = ("as a comparison: 1 when it holds, else 1 / (1 + ln(1 + d)) where d is how far the count is "
             "from the nearest count that satisfies it (|c - n| for ==; 1 for != when equal).")
    NOT_SCORE = "NOT flips the comparison's operator (== <-> !=, < <-> >=, > <-> <=)."
    EXAMPLES = (
        'COUNT("collision start", {"object_a": "green ball", "object_b": "blue ball"}) == 1',
        'COUNT("bounce", {"object": "red ball"}, window=(0, 0.5)) >= 2',
    )

    def __init__(self, pattern: str, params=None, window=None, *, where: Where, symmetric: bool = True):
        self.q = Query(pattern, params, window, where, symmetric)
        self.where = where

    def value(self, ctx) -> int:
        return len(self.q.hits(ctx))

    def eval(self, ctx):  # only reached if used as a clause; the checker forbids it
        raise self.where.error("type", "COUNT(...) is a number; compare it, e.g. COUNT(...) >= 1")


_FLIP = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def deviation(op: str, left: float, right: float) -> float:
    """How far integer counts are from satisfying ``left op right`` (0 = holds)."""
    if op == "==":
        return abs(left - right)
    if op == "!=":
        return 0.0 if left != right else 1.0
    if op == "<":
        return max(0.0, left - right + 1)
    if op == "<=":
        return max(0.0, left - right)
    if op == ">":
        return max(0.0, right - left + 1)
    if op == ">=":
        return max(0.0, right - left)
    raise ValueError(op)


class Comparison(Node):
    """``COUNT(...) OP n`` or ``COUNT(...) OP COUNT(...)``, OP in == != < <= > >=."""

    NAME = "comparison"
    SCORE = Count.SCORE
    NOT_SCORE = "NOT flips the operator (== <-> !=, < <-> >=, > <-> <=)."

    def __init__(self, op: str, left, right, *, where: Where):
        self.op, self.left, self.right, self.where = op, left, right, where

    def _values(self, ctx) -> tuple[float, float]:
        lv = self.left.value(ctx) if isinstance(self.left, Count) else self.left
        rv = self.right.value(ctx) if isinstance(self.right, Count) else self.right
        return lv, rv

    def _score(self, op: str, ctx) -> tuple[bool, float]:
        lv, rv = self._values(ctx)
        d = deviation(op, lv, rv)
        return (True, 1.0) if d == 0 else (False, failed(inverse_log(d)))

    def eval(self, ctx):
        return self._score(self.op, ctx)

    def neg(self, ctx):
        return self._score(_FLIP[self.op], ctx)

    def detail(self, ctx):
        lv, rv = self._values(ctx)
        return f"{lv:g} {self.op} {rv:g} is {'true' if deviation(self.op, lv, rv) == 0 else 'false'}"

    def children(self):
        return [n for n in (self.left, self.right) if isinstance(n, Node)]


# -------------------------------------------------------------------- logical
class And(Node):
    """All operands hold."""

    NAME = "AND"
    VARIADIC = Arg("clauses", "clause")
    READS = "-"
    SCORE = "the mean of the operands' scores (the paper's partial credit: the fraction of clauses that hold)."
    NOT_SCORE = "NOT(AND(a, b)) = OR(NOT(a), NOT(b))."
    EXAMPLES = ('AND(EVENT("bounce", {"object": "red ball"}), TOUCHING("green ball", "blue ball", t=1.0))',)

    def __init__(self, *clauses: Node, where: Where):
        self.items = clauses
        self.where = where

    def eval(self, ctx):
        ok = True
        total = 0.0
        for c in self.items:
            s, sc = c.eval(ctx)
            ok = ok and s
            total += sc
        return (True, 1.0) if ok else (False, failed(total / len(self.items)))

    def neg(self, ctx):  # De Morgan: any operand fails
        best = 0.0
        for c in self.items:
            s, sc = c.neg(ctx)
            if s:
                return True, 1.0
            best = max(best, sc)
        return False, failed(best)

    def explain(self, ctx, negated=False):
        kids = [c.explain(ctx, negated) for c in self.items]
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        n_ok = sum(k.success for k in kids)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, ok, score,
                            f"{n_ok}/{len(kids)} operands hold", kids)

    def children(self):
        return list(self.items)


class Or(Node):
    """At least one operand holds."""

    NAME = "OR"
    VARIADIC = Arg("clauses", "clause")
    READS = "-"
    SCORE = "the best operand's score."
    NOT_SCORE = "NOT(OR(a, b)) = AND(NOT(a), NOT(b))."
    EXAMPLES = ('OR(TOUCHING("green ball", "black jar 1"), TOUCHING("green ball", "black jar 2"))',)

    def __init__(self, *clauses: Node, where: Where):
        self.items = clauses
        self.where = where

    def eval(self, ctx):
        best = 0.0
        for c in self.items:
            s, sc = c.eval(ctx)
            if s:
                return True, 1.0
            best = max(best, sc)
        return False, failed(best)

    def neg(self, ctx):
        ok = True
        total = 0.0
        for c in self.items:
            s, sc = c.neg(ctx)
            ok = ok and s
            total += sc
        return (True, 1.0) if ok else (False, failed(total / len(self.items)))

    def explain(self, ctx, negated=False):
        kids = [c.explain(ctx, negated) for c in self.items]
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        n_ok = sum(k.success for k in kids)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, ok, score,
                            f"{n_ok}/{len(kids)} operands hold", kids)

    def children(self):
        return list(self.items)


class Not(Node):
    """The operand does not hold."""

    NAME = "NOT"
    SIGNATURE = (Arg("clause", "clause"),)
    READS = "-"
    SCORE = ("1 when the operand fails; otherwise the operand's own NOT rule (graded for EVENT, COUNT "
             "comparisons, NEARBY_AT, AND, OR; 0 for the others).")
    NOT_SCORE = "NOT(NOT(a)) = a."
    EXAMPLES = ('NOT(EVENT("collision start", {"object_a": "red ball", "object_b": "blue ball"}))',)

    def __init__(self, clause: Node, *, where: Where):
        self.inner = clause
        self.where = where

    def eval(self, ctx):
        return self.inner.neg(ctx)

    def neg(self, ctx):
        return self.inner.eval(ctx)

    def explain(self, ctx, negated=False):
        kid = self.inner.explain(ctx, not negated)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, kid.success, kid.score, kid.detail,
                            kid.children)

    def children(self):
        return [self.inner]


# ------------------------------------------------------------------- temporal
_ORDER_PARTIAL = ("1/3 per operand that occurs when the order does not hold (2/3: both occur, wrong order).")


class After(Node):
    """``second`` occurs after ``first``: some matching ``second`` event is at a
    later frame than the first matching ``first`` event (both inside the window)."""

    NAME = "AFTER"
    SIGNATURE = (
        Arg("first", "pattern"),
        Arg("second", "pattern"),
        Arg("first_params", "params", None, of="first"),
        Arg("second_params", "params", None, of="second"),
        Arg("window", "window", None),
    )
    SCORE = "1 if it holds, else " + _ORDER_PARTIAL
    EXAMPLES = (
        'AFTER("collision start", "collision start", first_params={"object_a": "green ball", '
        '"object_b": "left wall"}, second_params={"object_a": "red ball", "object_b": "green ball"})',
    )

    def __init__(self, first, second, first_params=None, second_params=None, window=None, *, where: Where,
                 symmetric_first: bool = True, symmetric_second: bool = True):
        self.a = Query(first, first_params, window, where, symmetric_first)
        self.b = Query(second, second_params, window, where, symmetric_second)
        self.where = where

    def holds(self, a: list[int], b: list[int]) -> bool:
        return bool(a) and bool(b) and b[-1] > a[0]

    def eval(self, ctx):
        a, b = self.a.hits(ctx), self.b.hits(ctx)
        if self.holds(a, b):
            return True, 1.0
        return False, (bool(a) + bool(b)) / 3.0

    def detail(self, ctx):
        return (f"first {self.a.describe()} at {_frames_text(self.a.hits(ctx), ctx)}; "
                f"second {self.b.describe()} at {_frames_text(self.b.hits(ctx), ctx)}")


class Before(After):
    """``first`` occurs before ``second`` ever does: the first matching
    ``first`` event is at an earlier frame than the first matching ``second``
    event (both must occur inside the window). Stricter than AFTER: with
    events only at their first occurrences the two agree."""

    NAME = "BEFORE"
    EXAMPLES = (
        'NOT(BEFORE("collision start", "collision start", first_params={"object_a": "red ball", '
        '"object_b": "green ball"}, second_params={"object_a": "green ball", "object_b": "blue ball"}))',
    )

    def holds(self, a, b):
        return bool(a) and bool(b) and a[0] < b[0]


class First(Node):
    """The earliest candidate event is a matching one and lies in the window.
    Candidates are the events of ``pattern`` matching ``among`` (default:
    ``params``), over the whole rollout. E.g. "the first thing the red ball
    hits is the green ball"."""

    NAME = "FIRST"
    SIGNATURE = (
        Arg("pattern", "pattern"),
        Arg("params", "params", None, of="pattern"),
        Arg("window", "window", None),
        Arg("among", "params", None, of="pattern", shown="params"),
    )
    SCORE = "1 if it holds, 0.5 if there are candidates but the first one does not qualify, else 0."
    EXAMPLES = (
        'FIRST("collision start", {"object_a": "red ball", "object_b": "green ball"}, among={"object_a": "red ball"})',
        'FIRST("bounce", {"object": "green ball"}, window=(0.5, 1.0))',
    )
    LAST = False

    def __init__(self, pattern, params=None, window=None, among=None, *, where: Where, symmetric: bool = True):
        self.q = Query(pattern, params, None, where, symmetric)
        self.among = Query(pattern, among, None, where, symmetric) if among is not None else None
        self.window = tuple(window) if window is not None else None
        self.where = where

    def _pick(self, ctx) -> tuple[int | None, bool]:
        cands = (self.among or self.q).all(ctx)
        if not cands:
            return None, False
        f = cands[-1] if self.LAST else cands[0]
        ok = f in self.q.all(ctx)
        if ok and self.window is not None:
            lo, hi = ctx.window(self.window)
            ok = lo <= f <= hi
        return f, ok

    def eval(self, ctx):
        f, ok = self._pick(ctx)
        if ok:
            return True, 1.0
        return False, (0.5 if f is not None else 0.0)

    def detail(self, ctx):
        f, ok = self._pick(ctx)
        which = "last" if self.LAST else "first"
        if f is None:
            return f"no candidate events of {(self.among or self.q).describe()}"
        return (f"{which} candidate at frame {f} (t={ctx.fraction(f):.2f}); "
                f"matches {self.q.describe()}{_window_text(self.window)}: {'yes' if ok else 'no'}")


class Last(First):
    """The latest candidate event is a matching one and lies in the window
    (candidates: events of ``pattern`` matching ``among``, default ``params``)."""

    NAME = "LAST"
    EXAMPLES = ('LAST("collision start", {"object_a": "green ball", "object_b": "blue ball"}, '
                'among={"object_a": "green ball"})',)
    LAST = True


def _state_or_query(what, params, window, where: Where, symmetric: bool):
    if isinstance(what, Node):
        return what
    return Query(what, params, window, where, symmetric)


class Never(Node):
    """No matching event inside the window (a pattern), or the state never
    holds at any frame of the window (TOUCHING(...) / NEARBY_AT(...))."""

    NAME = "NEVER"
    SIGNATURE = (
        Arg("what", "pattern_or_state"),
        Arg("params", "params", None, of="what"),
        Arg("window", "window", None),
    )
    READS = "annotation, or the trace for a state"
    SCORE = "1 if it holds, else 1 / (1 + ln(1 + n)) for n violating events (pattern) or frames (state)."
    EXAMPLES = (
        'NEVER("collision start", {"object_a": "red ball", "object_b": "green ball"}, window=(0, 0.2))',
        'NEVER(TOUCHING("red ball", "blue ball"))',
    )

    def __init__(self, what, params=None, window=None, *, where: Where, symmetric: bool = True):
        self.what = _state_or_query(what, params, window, where, symmetric)
        self.window = tuple(window) if window is not None else None
        self.where = where

    def _count(self, ctx) -> tuple[int, int]:
        """(matching events in the window, frames in the window) for a pattern;
        (frames where the state holds, frames in the window) for a state."""
        if isinstance(self.what, Query):
            lo, hi = ctx.window(self.window)
            return len(self.what.hits(ctx)), max(0, hi - lo + 1)
        series = self.what.series(ctx)
        lo, hi = window_frames(self.window, len(series))
        return int(np.count_nonzero(series[lo : hi + 1])), max(0, hi - lo + 1)

    @property
    def needs_trace(self) -> bool:
        return isinstance(self.what, Node) and self.what.needs_trace

    def eval(self, ctx):
        n, _ = self._count(ctx)
        return (True, 1.0) if n == 0 else (False, failed(inverse_log(n)))

    def detail(self, ctx):
        n, m = self._count(ctx)
        if isinstance(self.what, Query):
            return f"{n} matching event{'s' if n != 1 else ''}{_window_text(self.window)}: {self._what_text()}"
        return f"holds at {n} of {m} frames{_window_text(self.window)}: {self._what_text()}"

    def _what_text(self) -> str:
        return self.what.describe() if isinstance(self.what, Query) else self.what.text

    def children(self):
        return [self.what] if isinstance(self.what, Node) else []


class Always(Never):
    """The pattern is active at every frame of the window, or the state holds
    at every frame of it. An event is active at its frame; one with a
    whole-number ``frames`` param (the library's interval patterns: airborne,
    global rest, sliding contact, support relationship, ...) is active for
    that many frames from its frame."""

    NAME = "ALWAYS"
    SCORE = "1 if it holds, else the fraction of window frames where it holds."
    EXAMPLES = (
        'ALWAYS(TOUCHING("green ball", "blue ball"), window=(0.9, 1.0))',
        'ALWAYS("airborne", {"object": "red ball"}, window=(0.1, 0.2))',
    )

    def _count(self, ctx) -> tuple[int, int]:
        if not isinstance(self.what, Query):
            return super()._count(ctx)
        lo, hi = ctx.window(self.window)
        if hi < lo:
            return 0, 0
        covered = np.zeros(hi - lo + 1, dtype=bool)
        for start, end in ctx.intervals(self.what.label, self.what.matcher, self.where):
            a, b = max(start, lo), min(end, hi)
            if a <= b:
                covered[a - lo : b - lo + 1] = True
        return int(np.count_nonzero(covered)), hi - lo + 1

    def eval(self, ctx):
        covered, m = self._count(ctx)
        if covered >= m:
            return True, 1.0
        return False, failed(covered / m)

    def detail(self, ctx):
        covered, m = self._count(ctx)
        return f"holds at {covered} of {m} frames{_window_text(self.window)}: {self._what_text()}"


# ---------------------------------------------------------------- state (trace)
class NearbyAt(Node):
    """The body's centre is within ``radius`` of the point (x, y) — or of the
    centre of the ``target`` body — at time ``t`` (default 1.0, the end), or
    at its closest over ``window``. The default radius is 5% of the world's
    larger side (12.8 px in PHYRE's 256 px scenes). Positions come from the
    trace."""

    NAME = "NEARBY_AT"
    SIGNATURE = (
        Arg("body", "body"),
        Arg("x", "number", None),
        Arg("y", "number", None),
        Arg("t", "fraction", None),
        Arg("radius", "positive", None),
        Arg("target", "body", None),
        Arg("window", "window", None, shown="None"),
        Arg("z", "number", None),
    )
    STATE = True
    READS = "trace"
    SCORE = ("1 within the radius r, else 1 / (1 + ln(d / r)) for distance d (0.59 at 2r, 0.30 at 10r): "
             "improvements near the target weigh most.")
    NOT_SCORE = "NOT(NEARBY_AT(...)) scores d / r while inside the radius."
    EXAMPLES = (
        'NEARBY_AT("green ball", x=140, y=10, t=1.0)',
        'NEARBY_AT("red ball", target="blue ball", window=(0.4, 0.6), radius=30)',
    )

    def __init__(self, body, x=None, y=None, t=None, radius=None, target=None, window=None, z=None, *,
                 where: Where):
        self.body, self.target = body, target
        self.point = None if target is not None else tuple(float(v) for v in (x, y, z) if v is not None)
        self.t = 1.0 if t is None and window is None else t
        self.window = tuple(window) if window is not None else None
        self.radius = radius
        self.where = where

    def _distance_at(self, view: TraceView, f: int) -> float:
        pos = view.trace.position
        p = pos[f, view.body(self.body, self.where)].tolist()
        q = pos[f, view.body(self.target, self.where)].tolist() if self.target is not None else self.point
        return math.dist(p[: len(q)], q[: len(p)])

    def distance(self, ctx) -> tuple[float, float, int]:
        """(distance, radius, frame) at t, or at the closest frame of the window."""
        view = ctx.need_view(self.where, "NEARBY_AT")
        r = self.radius if self.radius is not None else view.radius
        if self.window is None:
            f = view.frame(self.t)
            return self._distance_at(view, f), r, f
        lo, hi = view.window(self.window)
        if hi < lo:
            return math.inf, r, lo
        d2 = self._squared(view, lo, hi + 1)
        k = int(np.argmin(d2))
        if d2[k] != d2[k]:  # NaN positions: skip them
            if np.isnan(d2).all():
                return math.inf, r, lo
            k = int(np.nanargmin(d2))
        return math.sqrt(float(d2[k])), r, lo + k

    def _squared(self, view: TraceView, lo: int, hi: int) -> np.ndarray:
        """Squared distances over frames ``lo:hi`` (x, y and, when given, z)."""
        pos = view.trace.position
        i = view.body(self.body, self.where)
        if self.target is not None:
            j = view.body(self.target, self.where)
            dx = pos[lo:hi, i, 0] - pos[lo:hi, j, 0]
            dy = pos[lo:hi, i, 1] - pos[lo:hi, j, 1]
            out = dx * dx + dy * dy
            if pos.shape[2] > 2:
                dz = pos[lo:hi, i, 2] - pos[lo:hi, j, 2]
                out += dz * dz
            return out
        dx = pos[lo:hi, i, 0] - self.point[0]
        dy = pos[lo:hi, i, 1] - self.point[1]
        out = dx * dx + dy * dy
        if len(self.point) > 2 and pos.shape[2] > 2:
            dz = pos[lo:hi, i, 2] - self.point[2]
            out += dz * dz
        return out

    def series(self, ctx) -> np.ndarray:
        view = ctx.need_view(self.where, "NEARBY_AT")
        r = self.radius if self.radius is not None else view.radius
        return self._squared(view, 0, view.trace.num_frames) <= r * r

    def eval(self, ctx):
        d, r, _ = self.distance(ctx)
        if d <= r:
            return True, 1.0
        return False, failed(inverse_log(d / r - 1.0))

    def neg(self, ctx):
        d, r, _ = self.distance(ctx)
        if not d <= r:
            return True, 1.0
        return False, failed(d / r)

    def detail(self, ctx):
        d, r, f = self.distance(ctx)
        to = f'"{self.target}"' if self.target is not None else str(tuple(round(v, 3) for v in self.point))
        return f"distance {d:.3g} to {to} at frame {f} (t={ctx.fraction(f):.2f}); radius {r:.3g}"


class Touching(Node):
    """Bodies ``a`` and ``b`` are in contact at time ``t`` (default 1.0, the
    end). Either may be a wildcard ("touching anything"). Reads the trace's
    contacts; without a trace, reconstructs contact intervals from the
    annotation's "collision start"/"collision end" events."""

    NAME = "TOUCHING"
    SIGNATURE = (Arg("a", "body_or_any"), Arg("b", "body_or_any"), Arg("t", "fraction", None))
    STATE = True
    READS = "trace or annotation"
    SCORE = ("1 if touching; else, with a trace, 0.5 / (1 + ln(c / (ra + rb))) for centre distance c and "
             "bounding radii ra, rb (0.5 when the bounding circles overlap); without a trace 0.5 if the "
             "two touched at some other time, else 0.")
    EXAMPLES = ('TOUCHING("green ball", "blue ball", t=1.0)', 'TOUCHING("green ball", "black jar 2")')

    def __init__(self, a, b, t=None, *, where: Where):
        self.a, self.b = a, b
        self.wild_a, self.wild_b = is_wildcard(a), is_wildcard(b)
        self.t = 1.0 if t is None else t
        self.where = where

    def _pair(self, view: TraceView) -> tuple[int | None, int | None]:
        """Body indices of a and b (None for a wildcard)."""
        return (None if self.wild_a else view.body(self.a, self.where),
                None if self.wild_b else view.body(self.b, self.where))

    def _hits(self, view: TraceView, ca: np.ndarray, cb: np.ndarray) -> np.ndarray:
        """Which contact rows (body index columns ca, cb) are an a-b contact."""
        i, j = self._pair(view)
        if i is None and j is None:
            return np.ones(ca.shape, dtype=bool)
        if i is None or j is None:
            k = j if i is None else i
            return (ca == k) | (cb == k)
        return ((ca == i) & (cb == j)) | ((ca == j) & (cb == i))

    def _touching_at(self, ctx, f: int) -> bool:
        view = ctx.view
        if view is None:
            s = self.series(ctx)
            return bool(len(s)) and bool(s[f])
        lo, hi = view.rows_at(f)
        if lo == hi:
            return False
        _, ca, cb = view.contacts()
        i, j = self._pair(view)
        # a frame has a handful of contact rows: plain Python beats numpy calls here
        for x, y in zip(ca[lo:hi].tolist(), cb[lo:hi].tolist()):
            if (i is None or x == i or y == i) and (j is None or x == j or y == j) and \
                    (i is None or j is None or {x, y} == {i, j}):
                return True
        return False

    def series(self, ctx) -> np.ndarray:
        key = ("touch", id(self))
        s = ctx.memo.get(key)
        if s is not None:
            return s
        if ctx.view is not None:
            cf, ca, cb = ctx.view.contacts()
            s = np.zeros(ctx.view.trace.num_frames, dtype=bool)
            s[cf[self._hits(ctx.view, ca, cb)]] = True
        else:
            s = self._series_from_events(ctx)
        ctx.memo[key] = s
        return s

    def _series_from_events(self, ctx) -> np.ndarray:
        if ctx.annotation is None:
            raise self.where.error("needs-trace", "TOUCHING needs the trace, or an annotation with "
                                   '"collision start" events')
        m = ParamMatcher({"object_a": self.a, "object_b": self.b})
        T = ctx.num_frames
        s = np.zeros(T, dtype=bool)
        starts = [(f, p) for f, p in ctx.events(COLLISION_START, self.where) if m(p)]
        ends = [(f, p) for f, p in ctx.events(COLLISION_END, self.where) if m(p)]
        by_pair: dict[tuple, list[int]] = {}
        for f, p in ends:
            by_pair.setdefault(_pair(p), []).append(f)
        for f0, p in starts:
            later = [f for f in by_pair.get(_pair(p), []) if f > f0]
            stop = min(later) if later else T
            s[max(0, f0) : max(0, min(T, stop))] = True
        return s

    def _frame(self, ctx) -> int:
        n = ctx.view.trace.num_frames if ctx.view is not None else ctx.num_frames
        return min(n - 1, max(0, int(round(self.t * (n - 1))))) if n else 0

    def eval(self, ctx):
        f = self._frame(ctx)
        if self._touching_at(ctx, f):
            return True, 1.0
        if ctx.view is None:
            return False, 0.5 if self.series(ctx).any() else 0.0
        return False, failed(0.5 * self._closeness(ctx.view, f))

    def _closeness(self, view: TraceView, f: int) -> float:
        """inverse_log of how far apart the closest candidate pair's bounding circles are."""
        i, j = self._pair(view)
        pos = view.trace.position
        if i is not None and j is not None:  # the common case: two named bodies
            reach = float(view.radii[i] + view.radii[j])
            c = math.dist(pos[f, i].tolist(), pos[f, j].tolist())
            return inverse_log(max(0.0, c / reach - 1.0)) if reach > 0 and c == c else 0.0
        n = view.trace.num_bodies
        ia = np.arange(n) if i is None else np.array([i])
        ib = np.arange(n) if j is None else np.array([j])
        c = np.linalg.norm(pos[f][ia][:, None, :] - pos[f][ib][None, :, :], axis=-1)
        reach = view.radii[ia][:, None] + view.radii[ib][None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(reach > 0, c / np.where(reach > 0, reach, 1.0), np.inf)
        ratio[ia[:, None] == ib[None, :]] = np.inf
        finite = ratio[np.isfinite(ratio)]
        return inverse_log(max(0.0, float(finite.min()) - 1.0)) if finite.size else 0.0

    def detail(self, ctx):
        f = self._frame(ctx)
        s = self.series(ctx)
        src = "trace contacts" if ctx.view is not None else "collision events"
        state = "touching" if self._touching_at(ctx, f) else "not touching"
        return (f"{state} at frame {f} (t={self.t:g}); touching at {int(np.count_nonzero(s))} frames in all "
                f"(from {src})")


def _pair(params: dict) -> tuple:
    """Unordered, normalised body pair of collision params."""
    a, b = params.get("object_a", ""), params.get("object_b", "")
    a = normalize_text(a) if isinstance(a, str) else str(a)
    b = normalize_text(b) if isinstance(b, str) else str(b)
    return (a, b) if a <= b else (b, a)


PREDICATES: dict[str, type[Node]] = {
    cls.NAME: cls
    for cls in (And, Or, Not, Event, After, Before, First, Last, Never, Always, Count, NearbyAt, Touching)
}
