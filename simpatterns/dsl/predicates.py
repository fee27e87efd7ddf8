"""The predicates of the reward DSL: signature, meaning, score rule and a
runnable implementation each.

Every predicate class documents itself (docstring = meaning, ``SCORE`` =
partial-credit rule, ``EXAMPLES``); `simpatterns.dsl.reference_text` builds the
language reference the LLM reads from these, so the prose and the code
cannot drift apart.

A compiled node answers ``eval(ctx) -> (success, score)`` and ``neg(ctx)``,
the result of ``NOT(node)``; both keep ``score == 1.0`` exactly when
``success`` (a failure scores at most `PARTIAL_MAX`). ``determined(ctx)``
says whether the verdict holds whatever happened in the frames an early
stop left unsimulated (`simpatterns.dsl.runtime`).

Events have a duration (`DURATION_RULE`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from simpatterns.dsl.matching import ParamMatcher, normalize_text
from simpatterns.dsl.references import is_wildcard
from simpatterns.dsl.runtime import EvalContext, SceneView, TraceView, Where, failed, in_window, inverse_log

DURATION_RULE = """\
Events have a duration, declared by their pattern's detector (``DURATION``):
an *instant* happens at its frame; an *interval* starts at its frame and
lasts ``frames`` frames (the library lists which patterns last). One rule
serves every predicate: an event *happens* at its start (AFTER, BEFORE,
FIRST and LAST order events by their starts), and *occurs in* a window when
it is active at some frame of it (EVENT, COUNT, NEVER, ALWAYS, and the
windows of AFTER, BEFORE, FIRST and LAST). So ALWAYS(p, w) and NEVER(p, w)
never both hold when p occurs in w. For a "comes to rest" event at frame 300
lasting 100 frames: EVENT(..., window=(0.35, 0.4)) holds (it is still at
rest at frames 350-400), ALWAYS(..., window=(0.3, 0.39)) holds,
NEVER(..., window=(0.35, 0.4)) fails, and AFTER("comes to rest", "touch
start") asks for a touch starting after frame 300. A program compiled
without a library knows no declarations: every event is then an instant."""

REQUIRED = object()
TIME_SCALE = 0.05  # a miss in time is graded on 5% of the episode, as a miss in space on 5% of the world
TOUCH_GAP = 2  # frames apart that do not break a touch: the built-in "touch start"/"touch end" MERGE_GAP
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
    "window": "(start, end): fractions of the episode, 0 <= start <= end <= 1",
    "fraction": "a number in [0, 1]: fraction of the episode (1.0 = its last frame)",
    "number": "a number",
    "positive": "a number > 0",
    "body": 'a body name, e.g. "green ball", or a class such as "green object", "the goal object"',
    "body_or_any": 'a body name, a class ("green object", "any wall") or a wildcard ("*", "object X")',
    "clause": "a predicate call or a comparison",
    "pattern_or_state": "a pattern label, or TOUCHING(a, b) / NEARBY_AT(body, ...) without t or window",
}


@dataclass
class ClauseResult:
    """Outcome of one clause; ``detail`` and ``children`` are filled when explaining.
    ``determined`` is False when frames that were never simulated could change it."""

    text: str
    success: bool
    score: float
    detail: str = ""
    children: list["ClauseResult"] = field(default_factory=list)
    determined: bool = True

    def to_json(self) -> dict:
        d: dict[str, Any] = {"text": self.text, "success": self.success, "score": self.score}
        if not self.determined:
            d["determined"] = False
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
    RETURNS: ClassVar[str] = "bool"  # "bool", "count" (COUNT) or "distance" (DISTANCE)
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

    def determined(self, ctx: EvalContext) -> bool:
        """True when the verdict is the same whatever happened in the frames that were
        never simulated (always, on a rollout that ran to its horizon)."""
        return True

    def detail(self, ctx: EvalContext) -> str:
        return ""

    def explain(self, ctx: EvalContext, negated: bool = False) -> ClauseResult:
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        text = f"NOT({self.text})" if negated else self.text
        det = ctx.complete or self.determined(ctx)
        detail = self.detail(ctx)
        if not det:
            detail = f"{detail}; {ctx.unsimulated()}" if detail else ctx.unsimulated()
        return ClauseResult(text, ok, score, detail, determined=det)

    @property
    def needs_trace(self) -> bool:
        return self.READS == "trace"

    def children(self) -> list["Node"]:
        return []



class Query:
    """``pattern`` + params + window: the matching events active in the window.
    ``interval``: the pattern's detector declares ``DURATION = "interval"``."""

    __slots__ = ("label", "matcher", "window", "where", "interval")

    def __init__(self, label: str, params: dict | None, window, where: Where, symmetric: bool = True,
                 body_keys=None, interval: bool = False):
        self.label = normalize_text(label)
        self.matcher = ParamMatcher(params, symmetric=symmetric, body_keys=body_keys)
        self.window = tuple(window) if window is not None else None
        self.where = where
        self.interval = interval

    def all(self, ctx: EvalContext) -> list[int]:
        """Start frames of every matching event of the rollout."""
        return ctx.frames(self.label, self.matcher, self.where)

    def select(self, ctx: EvalContext) -> tuple[list[int], list[int]]:
        """(starts of the events active in the window in the frozen completion, starts of
        those certainly active in it), sorted. They differ only for intervals running at
        the last simulated frame of a rollout that stopped early."""
        if not self.interval:  # instants lie in simulated frames: their activity is known
            starts = ctx.frames(self.label, self.matcher, self.where)
            if self.window is None:
                return starts, starts
            key = ("sel", id(self))
            out = ctx.memo.get(key)
            if out is None:
                lo, hi = ctx.window(self.window)
                sel = in_window(starts, lo, hi)
                out = ctx.memo[key] = (sel, sel)
            return out
        key = ("sel", id(self))
        out = ctx.memo.get(key)
        if out is None:
            lo, hi = ctx.window(self.window)
            known_hi = min(hi, ctx.last)
            active, certain = [], []
            for start, end, stored in ctx.spans(self.label, self.matcher, self.where) if lo <= hi else ():
                if start <= hi and end >= lo:
                    active.append(start)
                    if start <= known_hi and min(stored, ctx.last) >= lo:
                        certain.append(start)
            out = ctx.memo[key] = (active, certain)
        return out

    def hits(self, ctx: EvalContext) -> list[int]:
        """Start frames of the matching events active in the window."""
        return self.select(ctx)[0]

    def is_open(self, ctx: EvalContext) -> bool:
        """The window holds frames that were never simulated."""
        return not ctx.complete and ctx.is_open(*ctx.window(self.window))

    def may_start(self, ctx: EvalContext) -> bool:
        """A matching event could start in the window's unsimulated frames."""
        return self.is_open(ctx) and ctx.may_start(self.label, self.matcher, self.where)

    def covered(self, ctx: EvalContext) -> tuple[int, int, bool]:
        """(window frames where a matching event is active in the frozen completion,
        frames in the window, whether a simulated frame of it is certainly uncovered)."""
        lo, hi = ctx.window(self.window)
        if hi < lo:
            return 0, 0, False
        covered = np.zeros(hi - lo + 1, dtype=bool)
        known = np.zeros(hi - lo + 1, dtype=bool)
        if self.interval:
            for start, end, stored in ctx.spans(self.label, self.matcher, self.where):
                a, b = max(start, lo), min(end, hi)
                if a <= b:
                    covered[a - lo: b - lo + 1] = True
                    if min(stored, hi) >= a:
                        known[a - lo: min(stored, hi) - lo + 1] = True
        else:
            f = np.asarray(in_window(self.all(ctx), lo, hi), dtype=np.int64)
            covered[f - lo] = known[f - lo] = True
        n_known = max(0, min(hi, ctx.last) - lo + 1)
        return int(np.count_nonzero(covered)), hi - lo + 1, bool(n_known and not known[:n_known].all())

    def event_active(self, ctx: EvalContext, start: int) -> tuple[bool, bool]:
        """Whether a matching event starting at ``start`` is active in the window (frozen
        completion), and whether that is certain."""
        lo, hi = ctx.window(self.window)
        if not self.interval:
            return lo <= start <= hi, True
        ok = certain = False
        for s, end, stored in ctx.spans(self.label, self.matcher, self.where):
            if s == start and s <= hi and end >= lo:
                ok = True
                certain = certain or (s <= min(hi, ctx.last) and min(stored, ctx.last) >= lo)
        return ok, certain or not ok

    def time_to_window(self, ctx: EvalContext) -> float:
        """Frames between the window and the nearest matching event active outside it (inf: none)."""
        lo, hi = ctx.window(self.window)
        if self.interval:
            spans = [(s, e) for s, e, _ in ctx.spans(self.label, self.matcher, self.where)]
        else:
            spans = [(f, f) for f in self.all(ctx)]
        if not spans or hi < lo:
            return math.inf
        a = np.array(spans, dtype=float)
        return float(np.maximum(np.maximum(lo - a[:, 1], a[:, 0] - hi), 0.0).min())

    def describe(self) -> str:
        p = "" if self.matcher.empty else " " + ", ".join(f"{k}={v!r}" for k, v in self.matcher.items)
        return f'"{self.label}"{p}{_window_text(self.window)}'


def _occurs_determined(q: Query, ctx: EvalContext) -> bool:
    """Is "a matching event occurs in the window" settled by the simulated frames?"""
    active, certain = q.select(ctx)
    if certain:
        return True
    return len(active) == 0 and not q.may_start(ctx)


# --------------------------------------------------------------------- events
class Event(Node):
    """The pattern occurs, with matching params, inside the window (default: the
    whole episode): some matching event is active at a frame of the window (an
    instant at its frame, an interval over its frames)."""

    NAME = "EVENT"
    SIGNATURE = (
        Arg("pattern", "pattern"),
        Arg("params", "params", None, of="pattern"),
        Arg("window", "window", None),
    )
    SCORE = ("1 if a matching event occurs in the window; else, when one occurs outside it, 0.5 / (1 + ln(1 + d / "
             "s)) for the frames d between the window and the nearest such event and s = 5% of the episode "
             "(50 frames in PHYRE): 0.5 just outside, 0.30 at 50 frames; else 0.")
    NOT_SCORE = "NOT(EVENT(...)) scores 1 / (1 + ln(1 + n)) for n matching events (0.59 for one)."
    EXAMPLES = (
        'EVENT("collision start", {"object_a": "red ball", "object_b": "green ball"})',
        'EVENT("bounce", {"object": "green object"}, window=(0.5, 1.0))',
    )

    def __init__(self, pattern: str, params=None, window=None, *, where: Where, symmetric: bool = True,
                 body_keys=None, interval: bool = False):
        self.q = Query(pattern, params, window, where, symmetric, body_keys, interval)
        self.where = where

    def eval(self, ctx):
        if self.q.hits(ctx):
            return True, 1.0
        d = self.q.time_to_window(ctx)
        scale = TIME_SCALE * (ctx.horizon - 1)
        return False, (failed(0.5 * inverse_log(d / scale)) if d < math.inf and scale > 0 else 0.0)

    def neg(self, ctx):
        n = len(self.q.hits(ctx))
        return (True, 1.0) if n == 0 else (False, failed(inverse_log(n)))

    def determined(self, ctx):
        return _occurs_determined(self.q, ctx)

    def detail(self, ctx):
        return f"{self.q.describe()}: matching events at frames {_frames_text(self.q.hits(ctx), ctx)}"


class Count(Node):
    """The number of matching events that occur inside the window (active at a
    frame of it); a number, so it must be compared: ``COUNT(...) >= 2``,
    ``COUNT(a) == COUNT(b)``."""

    NAME = "COUNT"
    RETURNS = "count"
    SIGNATURE = Event.SIGNATURE
    SCORE = ("as a comparison: 1 when it holds, else 1 / (1 + ln(1 + d)) where d is how far the count is "
             "from the nearest count that satisfies it (|c - n| for ==; 1 for != when equal).")
    NOT_SCORE = "NOT flips the comparison's operator (== <-> !=, < <-> >=, > <-> <=)."
    EXAMPLES = (
        'COUNT("touch start", {"object_a": "green object", "object_b": "blue object"}) == 1',
        'COUNT("bounce", {"object": "red ball"}, window=(0, 0.5)) >= 2',
    )

    def __init__(self, pattern: str, params=None, window=None, *, where: Where, symmetric: bool = True,
                 body_keys=None, interval: bool = False):
        self.q = Query(pattern, params, window, where, symmetric, body_keys, interval)
        self.where = where

    def value(self, ctx) -> int:
        return len(self.q.hits(ctx))

    def bounds(self, ctx) -> tuple[float, float]:
        """The least and the most the count can be, whatever the unsimulated frames hold."""
        active, certain = self.q.select(ctx)
        return float(len(certain)), (math.inf if self.q.may_start(ctx) else float(len(active)))

    def eval(self, ctx):  # only reached if used as a clause; the checker forbids it
        raise self.where.error("type", "COUNT(...) is a number; compare it, e.g. COUNT(...) >= 1")


_FLIP = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def deviation(op: str, left: float, right: float) -> float:
    """How far ``left op right`` is from holding (0 = holds; counts: in whole numbers)."""
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


def _holds(op: str, a: float, b: float) -> bool:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _always_never(op: str, left: tuple[float, float], right: tuple[float, float]) -> tuple[bool, bool]:
    """(holds for every value in the ranges, holds for none of them) of ``left op right``."""
    (l0, l1), (r0, r1) = left, right
    if op in ("==", "!="):
        same = l0 == l1 == r0 == r1
        apart = l1 < r0 or r1 < l0
        return (same, apart) if op == "==" else (apart, same)
    if op in (">", ">="):
        return _always_never({">": "<", ">=": "<="}[op], right, left)
    strict = op == "<"
    always = l1 < r0 if strict else l1 <= r0
    never = l0 >= r1 if strict else l0 > r1
    return always, never


class Comparison(Node):
    """``COUNT(...) OP n``, ``COUNT(...) OP COUNT(...)``, ``DISTANCE(...) OP x`` or
    ``DISTANCE(...) OP DISTANCE(...)``; OP in == != < <= > >= (distances: < <= > >=)."""

    NAME = "comparison"
    SCORE = Count.SCORE
    NOT_SCORE = "NOT flips the operator (== <-> !=, < <-> >=, > <-> <=)."

    def __init__(self, op: str, left, right, *, where: Where):
        self.op, self.left, self.right, self.where = op, left, right, where
        self.distance = isinstance(left, Distance) or isinstance(right, Distance)

    def _values(self, ctx) -> tuple[float, float]:
        lv = self.left.value(ctx) if isinstance(self.left, Node) else self.left
        rv = self.right.value(ctx) if isinstance(self.right, Node) else self.right
        return lv, rv

    def _score(self, op: str, ctx) -> tuple[bool, float]:
        lv, rv = self._values(ctx)
        if self.distance:
            if _holds(op, lv, rv):
                return True, 1.0
            d = abs(lv - rv) if lv != math.inf and rv != math.inf else math.inf
            scale = ctx.view.radius if ctx.view is not None else 1.0
            return False, failed(inverse_log(d / scale))
        d = deviation(op, lv, rv)
        return (True, 1.0) if d == 0 else (False, failed(inverse_log(d)))

    def eval(self, ctx):
        return self._score(self.op, ctx)

    def neg(self, ctx):
        return self._score(_FLIP[self.op], ctx)

    def _range(self, side, ctx) -> tuple[float, float]:
        return side.bounds(ctx) if isinstance(side, Node) else (float(side), float(side))

    def determined(self, ctx):
        always, never = _always_never(self.op, self._range(self.left, ctx), self._range(self.right, ctx))
        return always or never

    def detail(self, ctx):
        lv, rv = self._values(ctx)
        ok = _holds(self.op, lv, rv)
        return f"{lv:g} {self.op} {rv:g} is {'true' if ok else 'false'}"

    def children(self):
        return [n for n in (self.left, self.right) if isinstance(n, Node)]


# -------------------------------------------------------------------- logical
def _and_determined(items, ctx) -> bool:
    """All operands determined, or one determined to fail."""
    dets = [(c.eval(ctx)[0], c.determined(ctx)) for c in items]
    return all(d for _, d in dets) or any(d and not ok for ok, d in dets)


def _or_determined(items, ctx) -> bool:
    dets = [(c.eval(ctx)[0], c.determined(ctx)) for c in items]
    return all(d for _, d in dets) or any(d and ok for ok, d in dets)


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

    def determined(self, ctx):
        return _and_determined(self.items, ctx)

    def explain(self, ctx, negated=False):
        kids = [c.explain(ctx, negated) for c in self.items]
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        n_ok = sum(k.success for k in kids)
        det = ctx.complete or self.determined(ctx)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, ok, score,
                            f"{n_ok}/{len(kids)} operands hold", kids, det)

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

    def determined(self, ctx):
        return _or_determined(self.items, ctx)

    def explain(self, ctx, negated=False):
        kids = [c.explain(ctx, negated) for c in self.items]
        ok, score = self.neg(ctx) if negated else self.eval(ctx)
        n_ok = sum(k.success for k in kids)
        det = ctx.complete or self.determined(ctx)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, ok, score,
                            f"{n_ok}/{len(kids)} operands hold", kids, det)

    def children(self):
        return list(self.items)


class Not(Node):
    """The operand does not hold."""

    NAME = "NOT"
    SIGNATURE = (Arg("clause", "clause"),)
    READS = "-"
    SCORE = ("1 when the operand fails; otherwise the operand's own NOT rule (graded for EVENT, comparisons, "
             "NEARBY_AT, AND, OR; 0 for the others).")
    NOT_SCORE = "NOT(NOT(a)) = a."
    EXAMPLES = ('NOT(EVENT("collision start", {"object_a": "red ball", "object_b": "blue ball"}))',)

    def __init__(self, clause: Node, *, where: Where):
        self.inner = clause
        self.where = where

    def eval(self, ctx):
        return self.inner.neg(ctx)

    def neg(self, ctx):
        return self.inner.eval(ctx)

    def determined(self, ctx):
        return self.inner.determined(ctx)

    def explain(self, ctx, negated=False):
        kid = self.inner.explain(ctx, not negated)
        return ClauseResult(f"NOT({self.text})" if negated else self.text, kid.success, kid.score, kid.detail,
                            kid.children, kid.determined)

    def children(self):
        return [self.inner]


# ------------------------------------------------------------------- temporal
_ORDER_PARTIAL = ("1/3 per operand that occurs when the order does not hold (2/3: both occur, wrong order).")


class After(Node):
    """``second`` happens after ``first``: some matching ``second`` event starts at a
    later frame than the first matching ``first`` event starts (both occurring in
    the window). An event happens at its start, also when it lasts."""

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
        'AFTER("touch start", "touch start", first_params={"object_a": "green object", '
        '"object_b": "left wall"}, second_params={"object_a": "red ball", "object_b": "green object"})',
    )

    def __init__(self, first, second, first_params=None, second_params=None, window=None, *, where: Where,
                 symmetric_first: bool = True, symmetric_second: bool = True, body_keys_first=None,
                 body_keys_second=None, interval_first: bool = False, interval_second: bool = False):
        self.a = Query(first, first_params, window, where, symmetric_first, body_keys_first, interval_first)
        self.b = Query(second, second_params, window, where, symmetric_second, body_keys_second, interval_second)
        self.where = where

    def holds(self, a: list[int], b: list[int]) -> bool:
        return bool(a) and bool(b) and b[-1] > a[0]

    def eval(self, ctx):
        a, b = self.a.hits(ctx), self.b.hits(ctx)
        if self.holds(a, b):
            return True, 1.0
        return False, (bool(a) + bool(b)) / 3.0

    def determined(self, ctx):
        (a, ca), (b, cb) = self.a.select(ctx), self.b.select(ctx)
        if self.holds(ca, cb):  # events the unsimulated frames add start later: it keeps holding
            return True
        if self.holds(a, b):
            return False
        return not (self.b.may_start(ctx) and (a or self.a.may_start(ctx)))

    def detail(self, ctx):
        return (f"first {self.a.describe()} at {_frames_text(self.a.hits(ctx), ctx)}; "
                f"second {self.b.describe()} at {_frames_text(self.b.hits(ctx), ctx)}")


class Before(After):
    """``first`` happens before ``second`` ever does: the first matching ``first``
    event starts at an earlier frame than the first matching ``second`` event
    (both must occur in the window). Stricter than AFTER: with events only at
    their first occurrences the two agree."""

    NAME = "BEFORE"
    EXAMPLES = (
        'NOT(BEFORE("touch start", "touch start", first_params={"object_a": "red ball", '
        '"object_b": "green object"}, second_params={"object_a": "green object", "object_b": "blue object"}))',
        'BEFORE("comes to rest", "touch start", first_params={"object": "red ball", "surface": "ground"}, '
        'second_params={"object_a": "green object", "object_b": "blue object"})',
    )

    def holds(self, a, b):
        return bool(a) and bool(b) and a[0] < b[0]

    def determined(self, ctx):
        (a, ca), (b, cb) = self.a.select(ctx), self.b.select(ctx)
        if len(a) != len(ca) or len(b) != len(cb):
            return False
        if a and b:
            return True  # later events cannot start before the first ones
        if a:
            return not self.b.may_start(ctx)
        if b:
            return True  # a first event still to come would start after b's
        return not (self.a.may_start(ctx) and self.b.may_start(ctx))


class First(Node):
    """The earliest candidate event is a matching one and occurs in the window.
    Candidates are the events of ``pattern`` matching ``among`` (default:
    ``params``), over the whole episode, ordered by start. E.g. "the first
    thing the red ball hits is the green ball"."""

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

    def __init__(self, pattern, params=None, window=None, among=None, *, where: Where, symmetric: bool = True,
                 body_keys=None, interval: bool = False):
        self.q = Query(pattern, params, window, where, symmetric, body_keys, interval)
        self.among = Query(pattern, among, None, where, symmetric, body_keys, interval) if among is not None else None
        self.window = tuple(window) if window is not None else None
        self.where = where

    def _pick(self, ctx) -> tuple[int | None, bool, bool]:
        """(the chosen candidate's start, whether it qualifies, whether that is certain)."""
        cands = (self.among or self.q).all(ctx)
        if not cands:
            return None, False, True
        f = cands[-1] if self.LAST else cands[0]
        starts = self.q.all(ctx)
        k = bisect_right(starts, f) - 1
        if k < 0 or starts[k] != f:
            return f, False, True
        ok, certain = self.q.event_active(ctx, f)
        return f, ok, certain

    def eval(self, ctx):
        f, ok, _ = self._pick(ctx)
        if ok:
            return True, 1.0
        return False, (0.5 if f is not None else 0.0)

    def determined(self, ctx):
        f, _, certain = self._pick(ctx)
        cands = self.among or self.q
        later = ctx.may_start(cands.label, cands.matcher, cands.where)  # anywhere after the last frame
        if f is None or self.LAST:
            return certain and not later
        return certain

    def detail(self, ctx):
        f, ok, _ = self._pick(ctx)
        which = "last" if self.LAST else "first"
        if f is None:
            return f"no candidate events of {(self.among or self.q).describe()}"
        return (f"{which} candidate at frame {f} (t={ctx.fraction(f):.2f}); "
                f"matches {self.q.describe()}: {'yes' if ok else 'no'}")


class Last(First):
    """The latest candidate event is a matching one and occurs in the window
    (candidates: events of ``pattern`` matching ``among``, default ``params``,
    ordered by start)."""

    NAME = "LAST"
    EXAMPLES = ('LAST("collision start", {"object_a": "green ball", "object_b": "blue ball"}, '
                'among={"object_a": "green ball"})',)
    LAST = True


def _state_or_query(what, params, window, where: Where, symmetric: bool, body_keys, interval: bool):
    if isinstance(what, Node):
        return what
    return Query(what, params, window, where, symmetric, body_keys, interval)


class Never(Node):
    """No matching event occurs in the window (none is active at any frame of it),
    or the state never holds at any frame of the window (TOUCHING(...) /
    NEARBY_AT(...)). NEVER(p, w) is NOT(EVENT(p, w))."""

    NAME = "NEVER"
    SIGNATURE = (
        Arg("what", "pattern_or_state"),
        Arg("params", "params", None, of="what"),
        Arg("window", "window", None),
    )
    READS = "annotation, or the trace for a state"
    SCORE = "1 if it holds, else 1 / (1 + ln(1 + n)) for n violating events (pattern) or frames (state)."
    EXAMPLES = (
        'NEVER("collision start", {"object_a": "red ball", "object_b": "green object"}, window=(0, 0.2))',
        'NEVER(TOUCHING("red ball", "blue object"))',
    )

    def __init__(self, what, params=None, window=None, *, where: Where, symmetric: bool = True, body_keys=None,
                 interval: bool = False):
        self.what = _state_or_query(what, params, window, where, symmetric, body_keys, interval)
        self.window = tuple(window) if window is not None else None
        self.where = where

    def _holds(self, ctx) -> tuple[int, int]:
        """(frames where the state holds in the frozen completion, frames in the window)."""
        lo, hi = ctx.window(self.window)
        if hi < lo:
            return 0, 0
        series = self.what.series(ctx)
        khi = min(hi, ctx.last)
        n = int(np.count_nonzero(series[lo: khi + 1])) if khi >= lo else 0
        unknown = hi - max(lo, ctx.last + 1) + 1 if hi > ctx.last else 0
        if unknown and len(series) and series[-1]:
            n += unknown
        return n, hi - lo + 1

    def _state(self, ctx) -> tuple[int, int, bool, bool]:
        """`_holds`, then whether a simulated frame of the window shows the state false, and
        whether the unsimulated frames' state is known."""
        n, m = self._holds(ctx)
        lo, hi = ctx.window(self.window)
        if hi < lo:
            return 0, 0, False, True
        series = self.what.series(ctx)
        khi = min(hi, ctx.last)
        certain = series[lo: min(khi, self.what.certain_until(ctx) - 1) + 1] if khi >= lo else series[:0]
        return n, m, bool(certain.size and not certain.all()), self.what.after_known(ctx)

    def _count(self, ctx) -> tuple[int, int]:
        """(matching events in the window, frames in the window) for a pattern;
        (frames where the state holds, frames in the window) for a state."""
        if isinstance(self.what, Query):
            lo, hi = ctx.window(self.window)
            return len(self.what.hits(ctx)), max(0, hi - lo + 1)
        return self._holds(ctx)

    @property
    def needs_trace(self) -> bool:
        return isinstance(self.what, Node) and self.what.needs_trace

    def eval(self, ctx):
        n, _ = self._count(ctx)
        return (True, 1.0) if n == 0 else (False, failed(inverse_log(n)))

    def determined(self, ctx):
        if isinstance(self.what, Query):
            return _occurs_determined(self.what, ctx)
        lo, hi = ctx.window(self.window)
        khi = min(hi, ctx.last)
        if khi >= lo and self.what.series(ctx)[lo: khi + 1].any():
            return True
        _, _, _, after = self._state(ctx)
        return not ctx.is_open(lo, hi) or after

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
    """The pattern is active at every frame of the window (an instant at its
    frame, an interval over all its frames), or the state holds at every frame
    of it."""

    NAME = "ALWAYS"
    SCORE = "1 if it holds, else the fraction of window frames where it holds."
    EXAMPLES = (
        'ALWAYS(TOUCHING("green object", "blue object"), window=(0.9, 1.0))',
        'ALWAYS("comes to rest", {"object": "red ball"}, window=(0.8, 1.0))',
    )

    def _cover(self, ctx) -> tuple[int, int, bool, bool]:
        """(frames covered, frames in the window, a simulated frame certainly uncovered,
        the unsimulated frames' state known)."""
        if isinstance(self.what, Query):
            covered, m, gap = self.what.covered(ctx)
            return covered, m, gap, False
        return self._state(ctx)

    def _count(self, ctx) -> tuple[int, int]:
        if isinstance(self.what, Query):
            covered, m, _ = self.what.covered(ctx)
            return covered, m
        return self._holds(ctx)

    def eval(self, ctx):
        covered, m = self._count(ctx)
        if covered >= m:
            return True, 1.0
        return False, failed(covered / m)

    def determined(self, ctx):
        _, _, gap, after = self._cover(ctx)
        return gap or after or not ctx.is_open(*ctx.window(self.window))

    def detail(self, ctx):
        covered, m = self._count(ctx)
        return f"holds at {covered} of {m} frames{_window_text(self.window)}: {self._what_text()}"


# ---------------------------------------------------------------- state (trace)
def _covers_goal(ctx: EvalContext, a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> bool:
    """Do bodies a x b include the success pair (which keeps touching after a stop at success)?"""
    pair = ctx.goal_pair()
    if pair is None:
        return False
    i, j = pair
    inside = lambda k, s: s is None or k in s  # noqa: E731
    return (inside(i, a) and inside(j, b)) or (inside(j, a) and inside(i, b))


def _none_text(view: TraceView, names: tuple[str | None, ...], where: Where) -> str:
    empty = [n for n in names if n is not None and not is_wildcard(n) and not view.bodies(n, where)]
    return "".join(f'; no body here is "{n}"' for n in empty)


def _unsimulated_text(ctx, asked: int) -> str:
    """Says when a verdict read a frame the rollout did not reach (the frozen completion)."""
    if asked <= ctx.last:
        return ""
    return f"; frame {asked} was not simulated: the last, frame {ctx.last}, stands for it"


class NearbyAt(Node):
    """The body's centre is within ``radius`` of the point (x, y) — or of the
    centre of the ``target`` body — at time ``t`` (default 1.0, the end), or
    at its closest over ``window``. The default radius is 5% of the world's
    larger side (12.8 px in PHYRE's 256 px scenes). Positions come from the
    trace; a class ("green object") stands for its nearest member."""

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
             "improvements near the target weigh most. With a window, when the body is within the radius only "
             "outside it, at least 0.5 / (1 + ln(1 + e / s)) for the frames e from the window to the nearest such "
             "frame and s = 5% of the episode (as EVENT).")
    NOT_SCORE = "NOT(NEARBY_AT(...)) scores d / r while inside the radius."
    EXAMPLES = (
        'NEARBY_AT("green ball", x=140, y=10, t=1.0)',
        'NEARBY_AT("red ball", target="blue object", window=(0.4, 0.6), radius=30)',
    )

    def __init__(self, body, x=None, y=None, t=None, radius=None, target=None, window=None, z=None, *,
                 where: Where):
        self.body, self.target = body, target
        self.point = None if target is not None else tuple(float(v) for v in (x, y, z) if v is not None)
        self.t = 1.0 if t is None and window is None else t
        self.window = tuple(window) if window is not None else None
        self.radius = radius
        self.where = where

    def _squared(self, view: TraceView, lo: int, hi: int) -> np.ndarray:
        """Squared distances over stored frames ``lo:hi`` (x, y and, when given, z),
        the nearest member of each side."""
        pos = view.trace.position
        a = view.bodies(self.body, self.where)
        if not a:
            return np.full(max(0, hi - lo), np.inf)
        if self.target is not None:
            b = view.bodies(self.target, self.where)
            if not b:
                return np.full(max(0, hi - lo), np.inf)
            if len(a) == 1 and len(b) == 1:  # one body each (the usual case): no pairwise broadcast
                d = pos[lo:hi, a[0]] - pos[lo:hi, b[0]]
                return np.einsum("fd,fd->f", d, d)
            p = pos[lo:hi][:, list(a)]  # [F, A, D]
            q = pos[lo:hi][:, list(b)]
            d = p[:, :, None, :] - q[:, None, :, :]  # [F, A, B, D]
            out = (d[..., :2] ** 2).sum(-1)
            if pos.shape[2] > 2:
                out = out + d[..., 2] ** 2
            return out.reshape(out.shape[0], -1).min(axis=1) if out.size else np.full(max(0, hi - lo), np.inf)
        p = pos[lo:hi][:, list(a)]  # [F, A, D]
        dx = p[..., 0] - self.point[0]
        dy = p[..., 1] - self.point[1]
        out = dx * dx + dy * dy
        if len(self.point) > 2 and pos.shape[2] > 2:
            out = out + (p[..., 2] - self.point[2]) ** 2
        return out.min(axis=1)

    def _stored(self, ctx, lo: int, hi: int) -> np.ndarray:
        """`_squared` over stored frames ``lo:hi``: a slice of every stored frame's, computed
        once per evaluation (the window, the time credit and the series read it), except for
        a single frame asked first."""
        view = ctx.need_view(self.where, "NEARBY_AT")
        key = ("d2", id(self))
        full = ctx.memo.get(key)
        if full is None:
            if hi - lo == 1:
                return self._squared(view, lo, hi)
            full = ctx.memo[key] = self._squared(view, 0, view.trace.num_frames)
        return full[lo:hi]

    def distance(self, ctx) -> tuple[float, float, int]:
        """(distance, radius, frame) at t, or at the closest frame of the window; in the
        frozen completion an unsimulated frame reads the last simulated one."""
        view = ctx.need_view(self.where, "NEARBY_AT")
        r = self.radius if self.radius is not None else view.radius
        if self.window is None:
            f = min(ctx.frame(self.t), ctx.last)
            return math.sqrt(float(self._stored(ctx, f, f + 1)[0])), r, f
        lo, hi = ctx.window(self.window)
        if hi < lo:
            return math.inf, r, lo
        first = min(lo, ctx.last)  # a window past the last frame reads the last frame
        d2 = self._stored(ctx, first, min(hi, ctx.last) + 1)
        nan = np.isnan(d2)
        if nan.all():
            return math.inf, r, first
        k = int(np.argmin(np.where(nan, np.inf, d2)) if nan.any() else d2.argmin())
        return math.sqrt(float(d2[k])), r, first + k

    def series(self, ctx) -> np.ndarray:
        view = ctx.need_view(self.where, "NEARBY_AT")
        r = self.radius if self.radius is not None else view.radius
        return self._stored(ctx, 0, view.trace.num_frames) <= r * r

    def after_known(self, ctx) -> bool:
        """Is the state known after the last simulated frame? (only when nothing moves)"""
        return ctx.settled

    def certain_until(self, ctx) -> int:
        return ctx.num_frames

    def eval(self, ctx):
        d, r, _ = self.distance(ctx)
        if d <= r:
            return True, 1.0
        score = inverse_log(d / r - 1.0)
        if self.window is not None:
            score = max(score, self._time_credit(ctx, r))
        return False, failed(score)

    def _time_credit(self, ctx, r: float) -> float:
        """Credit for coming within the radius outside the window, by the frames from it."""
        near = np.flatnonzero(self._stored(ctx, 0, ctx.num_frames) <= r * r)
        scale = TIME_SCALE * (ctx.horizon - 1)
        if not near.size or not scale > 0:
            return 0.0
        lo, hi = ctx.window(self.window)
        return 0.5 * inverse_log(float(np.maximum(np.maximum(lo - near, near - hi), 0).min()) / scale)

    def neg(self, ctx):
        d, r, _ = self.distance(ctx)
        if not d <= r:
            return True, 1.0
        return False, failed(d / r)

    def determined(self, ctx):
        if self.window is None:
            return ctx.frame(self.t) <= ctx.last or ctx.settled
        lo, hi = ctx.window(self.window)
        if not ctx.is_open(lo, hi) or ctx.settled:
            return True
        view = ctx.need_view(self.where, "NEARBY_AT")
        r = self.radius if self.radius is not None else view.radius
        return lo <= ctx.last and bool((self._stored(ctx, lo, ctx.last + 1) <= r * r).any())

    def detail(self, ctx):
        d, r, f = self.distance(ctx)
        to = f'"{self.target}"' if self.target is not None else str(tuple(round(v, 3) for v in self.point))
        view = ctx.need_view(self.where, "NEARBY_AT")
        asked = ctx.frame(self.t) if self.window is None else ctx.window(self.window)[0]
        return (f"distance {d:.3g} to {to} at frame {f} (t={ctx.fraction(f):.2f}); radius {r:.3g}"
                + _none_text(view, (self.body, self.target), self.where) + _unsimulated_text(ctx, asked))


def bridge_gaps(touching: np.ndarray, k: int, tail: int = 0) -> np.ndarray:
    """``touching`` with every run of at most ``k`` False frames after a True filled in, when a
    True follows it or the episode ends first: contacts apart for at most k frames are one touch.
    ``tail``: frames of the episode after the array, holding its last value (the frozen completion)."""
    T = len(touching)
    change = np.flatnonzero(touching[1:] != touching[:-1]) + 1  # frames whose value differs from the last
    if not change.size:  # all True or all False
        return touching
    rising = touching[change]
    stops, starts = change[~rising], change[rising]  # where runs of False after a True begin, and end
    if touching[-1]:  # every False run ends in a True
        ends = starts[np.searchsorted(starts, stops)]
    else:  # the last runs on past the array's end to the horizon
        ends = np.append(starts[np.searchsorted(starts, stops[:-1])], T + tail)
    short = ends - stops <= k
    if not short.any():
        return touching
    out = touching.copy()
    for a, b in zip(stops[short].tolist(), ends[short].tolist()):
        out[a:b] = True
    return out


def outline_gaps(view: TraceView, A: tuple[int, ...] | None, B: tuple[int, ...] | None,
                 frames: np.ndarray) -> np.ndarray:
    """[F]: the surface gap of the nearest pair of bodies i in A, j in B (None: any body) at stored
    ``frames``, 0 where the trace records their contact; inf when no pair exists."""
    n = view.trace.num_bodies
    ia = range(n) if A is None else A
    ib = range(n) if B is None else B
    out = np.full(frames.shape, np.inf)
    geo, tr = view.geometry(), view.trace
    for i in ia:
        for j in ib:
            if i == j or (A is None and B is None and j < i):  # any x any: each pair once
                continue
            g = geo.gap(i, j, frames)
            g[tr.contact_row(frames, i, j) >= 0] = 0.0
            np.minimum(out, g, out=out)
    return out


def least_outline_gap(view: TraceView, A: tuple[int, ...] | None, B: tuple[int, ...] | None,
                      lo: int, hi: int, contacts: bool = True) -> tuple[float, int]:
    """(the least of `outline_gaps` over stored frames ``lo..hi``, the first frame that has it);
    (inf, lo) when no pair exists. Each pair measures only the frames where it may come
    nearest (`Outlines.least_gap`). ``contacts=False``: the caller knows no pair has a
    contact in those frames."""
    n = view.trace.num_bodies
    ia = range(n) if A is None else A
    ib = range(n) if B is None else B
    best, at = math.inf, lo
    geo, tr = view.geometry(), view.trace
    frames = np.arange(lo, hi + 1)
    apart = None if contacts else np.zeros(len(frames), dtype=bool)
    for i in ia:
        for j in ib:
            if i == j or (A is None and B is None and j < i):  # any x any: each pair once
                continue
            g, f = geo.least_gap(i, j, lo, hi, tr.contact_row(frames, i, j) >= 0 if apart is None else apart)
            if g < best or (g == best and f < at):
                best, at = g, f
    return best, at


def closeness(gap: float, scale: float) -> float:
    """A surface gap mapped into (0, 1]: ``1 / (1 + ln(1 + gap / scale))`` (1 at 0, 0.59 at one scale)."""
    return inverse_log(gap / scale) if scale > 0 else float(gap == 0)


def longest_run(series: np.ndarray) -> int:
    """The most consecutive True values in a boolean array."""
    if not series.any():
        return 0
    d = np.diff(np.concatenate(([0], series.astype(np.int8), [0])))
    return int((np.flatnonzero(d == -1) - np.flatnonzero(d == 1)).max())


class Touching(Node):
    """Bodies ``a`` and ``b`` are in contact at time ``t`` (default 1.0, the
    end); as for "touch start", contacts apart for at most 2 frames are one
    unbroken touch (the solver's flicker). With ``hold``, they have touched
    without a break for at least that fraction of the episode by ``t``:
    ``round(hold (H - 1))`` frames in a row each with a recorded contact, the
    way PHYRE counts its 3 s (no flicker bridged; ``hold=0.18`` is 180 of
    PHYRE's 1000 steps, its success rule). Either body may be a class ("green
    object": some green body) or a wildcard ("touching anything"). Reads the
    trace's contacts; without a trace, reconstructs contact intervals from
    the annotation's "collision start"/"collision end" events."""

    NAME = "TOUCHING"
    SIGNATURE = (Arg("a", "body_or_any"), Arg("b", "body_or_any"), Arg("t", "fraction", None),
                 Arg("hold", "fraction", None, shown="None"))
    STATE = True
    READS = "trace or annotation"
    SCORE = ("1 if it holds. Else, with a trace, 0.5 / (1 + ln(1 + g / s)) for the gap g between the two "
             "bodies' outlines at t (circles and rotated polygons as the trace records them, per frame; the "
             "nearest pair for a class) and s = 5% of the world's larger side (12.8 px in PHYRE): 0.5 at a gap "
             "of 0, 0.30 at 12.8 px, 0.15 at 128 px; without a trace 0.5 if the two touched at some other "
             "time, else 0. With hold: 0.5 + 0.5 k / n once they have touched, for the longest unbroken touch "
             "of k frames by t of the n asked; before that the same 0.5 / (1 + ln(1 + g / s)) with g the "
             "least outline gap over the frames up to t (0 without a trace).")
    EXAMPLES = ('TOUCHING("green object", "blue object", t=1.0)', 'TOUCHING("green ball", "black jar 2")',
                'TOUCHING("green ball", "blue bar", hold=0.18)')

    def __init__(self, a, b, t=None, hold=None, *, where: Where):
        self.a, self.b = a, b
        self.wild_a, self.wild_b = is_wildcard(a), is_wildcard(b)
        self.t = 1.0 if t is None else t
        self.hold = hold
        self.where = where
        self.collisions = ParamMatcher({"object_a": a, "object_b": b})  # its collision events, without a trace

    def _pair(self, view: SceneView) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """Body indices of a and b (None for a wildcard)."""
        return (None if self.wild_a else view.bodies(self.a, self.where),
                None if self.wild_b else view.bodies(self.b, self.where))

    def _raw_at(self, view: TraceView, lo: int, hi: int) -> list[int]:
        """Stored frames in ``[lo, hi]`` with an a-b contact row (a few rows per frame: plain Python)."""
        r0, r1 = view.rows_between(lo, hi)
        if r0 == r1:
            return []
        cf, ca, cb = view.contacts()
        A, B = self._pair(view)
        out = []
        for f, x, y in zip(cf[r0:r1].tolist(), ca[r0:r1].tolist(), cb[r0:r1].tolist()):
            if ((A is None or x in A) and (B is None or y in B)) or ((A is None or y in A) and (B is None or x in B)):
                out.append(f)
        return out

    def _touching_at(self, ctx, f: int) -> bool:
        f = min(f, ctx.last)  # the frozen completion: the last frame holds
        view = ctx.view
        if view is None:
            s = self.series(ctx)
            return bool(len(s)) and bool(s[f])
        k = TOUCH_GAP
        near = self._raw_at(view, max(0, f - k), min(ctx.last, f + k))
        if f in near:
            return True
        before, after = [g for g in near if g < f], [g for g in near if g > f]
        if before and after:  # a flicker of at most k frames inside one touch
            return after[0] - before[-1] - 1 <= k
        # apart to the end of what was simulated (and, in the frozen completion, to the horizon):
        # a touch broken off too near the end of the episode to be seen to end
        return bool(before) and f + k > ctx.last and ctx.horizon - 1 - before[-1] <= k

    def series(self, ctx) -> np.ndarray:
        """Per simulated frame: touching, in the frozen completion (contacts apart for at most
        `TOUCH_GAP` frames are one touch)."""
        key = ("touch", id(self))
        s = ctx.memo.get(key)
        if s is not None:
            return s
        s = bridge_gaps(self._raw_series(ctx), TOUCH_GAP, ctx.horizon - ctx.num_frames)
        ctx.memo[key] = s
        return s

    def _raw_series(self, ctx) -> np.ndarray:
        key = ("touch raw", id(self))
        s = ctx.memo.get(key)
        if s is None:
            if ctx.view is not None:
                s = np.zeros(ctx.view.trace.num_frames, dtype=bool)
                s[ctx.view.contacts()[0][ctx.view.pair_rows(*self._pair(ctx.view))]] = True
            else:
                s = self._series_from_events(ctx)
            ctx.memo[key] = s
        return s

    def certain_until(self, ctx) -> int:
        """Stored frames before this one have a certain value: after an early stop, a separation of
        at most `TOUCH_GAP` frames running into the last frame may yet be bridged by a contact."""
        if ctx.complete or self.after_known(ctx):
            return ctx.num_frames
        raw = self._raw_series(ctx)
        on = np.flatnonzero(raw)
        if not on.size or raw[-1] or ctx.last - on[-1] > TOUCH_GAP:
            return ctx.num_frames
        return int(on[-1]) + 1

    def _series_from_events(self, ctx) -> np.ndarray:
        if ctx.annotation is None:
            raise self.where.error("needs-trace", "TOUCHING needs the trace, or an annotation with "
                                   '"collision start" events')
        T = ctx.num_frames
        s = np.zeros(T, dtype=bool)
        starts = ctx.matched(COLLISION_START, self.collisions, self.where)[0]
        ends = ctx.matched(COLLISION_END, self.collisions, self.where)[0]
        by_pair: dict[tuple, list[int]] = {}
        for f, p in ends:
            by_pair.setdefault(_pair(p), []).append(f)
        for f0, p in starts:
            later = [f for f in by_pair.get(_pair(p), []) if f > f0]
            stop = min(later) if later else T
            s[max(0, f0): max(0, min(T, stop))] = True
        return s

    def after_known(self, ctx) -> bool:
        """Is the state known after the last simulated frame?"""
        if ctx.settled:
            return True
        return ctx.scene is not None and _covers_goal(ctx, *self._pair(ctx.scene))

    def needed(self, ctx) -> int:
        """Frames in a row that ``hold`` asks for (at least 1)."""
        return max(1, int(round(self.hold * (ctx.horizon - 1))))

    def held(self, ctx) -> int:
        """The longest unbroken touch (raw contact frames in a row) by frame t, in the frozen
        completion (a touch running at the last simulated frame goes on)."""
        key = ("held", id(self))
        out = ctx.memo.get(key)
        if out is None:
            f = ctx.frame(self.t)
            raw = self._raw_series(ctx)[: min(f, ctx.last) + 1]
            out = longest_run(raw)
            if f > ctx.last and raw.size and raw[-1]:
                tail = raw.size - int(np.flatnonzero(~raw)[-1]) - 1 if not raw.all() else raw.size
                out = max(out, tail + f - ctx.last)
            ctx.memo[key] = out
        return out

    def eval(self, ctx):
        f = ctx.frame(self.t)
        if self.hold is not None:
            k = self.held(ctx)
            n = self.needed(ctx)
            if k >= n:
                return True, 1.0
            if k:
                return False, failed(0.5 + 0.5 * k / n)
            first = 0
        else:
            if self._touching_at(ctx, f):
                return True, 1.0
            if ctx.view is None:
                return False, 0.5 if self.series(ctx).any() else 0.0
            first = min(f, ctx.last)
        if ctx.view is None:
            return False, 0.0
        return False, failed(0.5 * closeness(self.gap(ctx, first, min(f, ctx.last)), ctx.view.radius))

    def gap(self, ctx, lo: int, hi: int) -> float:
        """The least outline gap of the pair over stored frames ``lo..hi``, where it has no
        recorded contact (the callers' case: not touching at ``hi``, or never by it)."""
        A, B = self._pair(ctx.view)
        return least_outline_gap(ctx.view, A, B, lo, hi, contacts=False)[0]

    def determined(self, ctx):
        f = ctx.frame(self.t)
        if self.hold is not None:
            return f <= ctx.last or self.after_known(ctx) or self.held(ctx) >= self.needed(ctx)
        return f < self.certain_until(ctx) or self.after_known(ctx)

    def detail(self, ctx):
        f = ctx.frame(self.t)
        s = self.series(ctx)
        src = "trace contacts" if ctx.view is not None else "collision events"
        empty = _none_text(ctx.view, (self.a, self.b), self.where) if ctx.view is not None else ""
        ok, _ = self.eval(ctx)
        if self.hold is not None:
            k = self.held(ctx)
            state = f"longest unbroken touch {k} of the {self.needed(ctx)} frames asked, by frame {f}"
            first = 0 if not k else None
        else:
            state = ("touching" if ok else "not touching") + f" at frame {f} (t={self.t:g})"
            first = min(f, ctx.last)
        if not ok and first is not None and ctx.view is not None:
            state += (f"; outlines {self.gap(ctx, first, min(f, ctx.last)):.3g} px apart"
                      + (" at their closest" if self.hold else ""))
        return (f"{state}; touching at {int(np.count_nonzero(s))} frames in all (from {src}){empty}"
                + _unsimulated_text(ctx, f))


class Distance(Node):
    """The distance between the surfaces of bodies ``a`` and ``b`` (0 while they
    touch), at time ``t`` (default 1.0, the end), or the smallest over
    ``window``; a number, so it must be compared: ``DISTANCE(a, b, ...) <= 5``
    ("within 5 px at its closest"), ``DISTANCE(a, b, window=w) > 20`` ("never
    nearer than 20 px in w"). A class ("blue object") stands for its nearest
    member; one with no member here is infinitely far. Reads the trace (body
    outlines from their parts; 3-D traces use bounding spheres)."""

    NAME = "DISTANCE"
    RETURNS = "distance"
    SIGNATURE = (Arg("a", "body"), Arg("b", "body"), Arg("t", "fraction", None),
                 Arg("window", "window", None, shown="None"))
    READS = "trace"
    SCORE = ("as a comparison: 1 when it holds, else 1 / (1 + ln(1 + e / s)) for the excess e (how far the "
             "distance is from satisfying it) and s = 5% of the world's larger side (12.8 px in PHYRE).")
    NOT_SCORE = "NOT flips the comparison's operator (< <-> >=, > <-> <=)."
    EXAMPLES = (
        'DISTANCE("red ball", "blue object", window=(0.4, 0.6)) <= 5',
        'DISTANCE("green object", "the goal subject", t=1.0) < 2',
    )

    def __init__(self, a, b, t=None, window=None, *, where: Where):
        self.a, self.b = a, b
        self.t = 1.0 if t is None and window is None else t
        self.window = tuple(window) if window is not None else None
        self.where = where

    def _gaps(self, ctx, frames: np.ndarray) -> np.ndarray:
        """[F]: the nearest pair's surface gap at stored ``frames`` (0 where they touch)."""
        view = ctx.need_view(self.where, "DISTANCE")
        return outline_gaps(view, view.bodies(self.a, self.where), view.bodies(self.b, self.where), frames)

    def measure(self, ctx) -> tuple[float, int, float, float]:
        """(distance in the frozen completion, the frame it is read at, and the least and
        the most it can be whatever the unsimulated frames hold)."""
        key = ("distance", id(self))
        out = ctx.memo.get(key)
        if out is not None:
            return out
        if self.window is None:
            f = ctx.frame(self.t)
            d = float(self._gaps(ctx, np.array([min(f, ctx.last)]))[0])
            known = f <= ctx.last or self._after_known(ctx)
            out = (d, f, d, d) if known else (d, f, 0.0, math.inf)
        else:
            lo, hi = ctx.window(self.window)
            if hi < lo:
                out = (math.inf, lo, math.inf, math.inf)
            else:
                first = min(lo, ctx.last)  # a window past the last frame reads the last frame
                view = ctx.need_view(self.where, "DISTANCE")
                d, f = least_outline_gap(view, view.bodies(self.a, self.where), view.bodies(self.b, self.where),
                                         first, min(hi, ctx.last))
                if not ctx.is_open(lo, hi) or self._after_known(ctx):
                    out = (d, f, d, d)
                else:  # later frames can only bring the bodies nearer than the simulated ones did
                    out = (d, f, 0.0, d if lo <= ctx.last else math.inf)
        ctx.memo[key] = out
        return out

    def _after_known(self, ctx) -> bool:
        if ctx.settled:
            return True
        view = ctx.need_view(self.where, "DISTANCE")
        return _covers_goal(ctx, view.bodies(self.a, self.where), view.bodies(self.b, self.where))

    def value(self, ctx) -> float:
        return self.measure(ctx)[0]

    def bounds(self, ctx) -> tuple[float, float]:
        """The least and the most the distance can be, whatever the unsimulated frames hold."""
        _, _, low, high = self.measure(ctx)
        return low, high

    def eval(self, ctx):  # only reached if used as a clause; the checker forbids it
        raise self.where.error("type", "DISTANCE(...) is a number; compare it, e.g. DISTANCE(...) <= 5")

    def detail(self, ctx):
        d, f, _, _ = self.measure(ctx)
        view = ctx.need_view(self.where, "DISTANCE")
        return f"{d:.3g} at frame {f} (t={ctx.fraction(f):.2f})" + _none_text(view, (self.a, self.b), self.where)


def _pair(params: dict) -> tuple:
    """Unordered, normalised body pair of collision params."""
    a, b = params.get("object_a", ""), params.get("object_b", "")
    a = normalize_text(a) if isinstance(a, str) else str(a)
    b = normalize_text(b) if isinstance(b, str) else str(b)
    return (a, b) if a <= b else (b, a)


PREDICATES: dict[str, type[Node]] = {
    cls.NAME: cls
    for cls in (And, Or, Not, Event, After, Before, First, Last, Never, Always, Count, NearbyAt, Touching, Distance)
}
