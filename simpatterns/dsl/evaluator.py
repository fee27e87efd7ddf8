"""Compiling a checked program into a tree of small evaluator objects, and
running it on annotated traces.

`compile_program` turns each call into a node holding its constants (the
normalised pattern label, a params matcher, window fractions); evaluation
walks the nodes over an `EvalContext` that indexes the annotation by
pattern (the annotation's own index) and memoises matching frames per
(pattern, params), so repeated sub-queries cost one dict lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from simpatterns.dsl.checker import as_declarations, bind, check, directed_labels
from simpatterns.dsl.errors import DSLErrors, DSLEvaluationError
from simpatterns.dsl.matching import normalize_text
from simpatterns.dsl.parser import parse
from simpatterns.dsl.predicates import (
    PREDICATES,
    After,
    ClauseResult,
    Comparison,
    Count,
    Event,
    First,
    Never,
    Node,
)
from simpatterns.dsl.printer import format_expr
from simpatterns.dsl.runtime import EvalContext, EventIndex, SceneView, TraceView, Where, failed
from simpatterns.dsl.syntax import Call, Compare, Num, Program, literal_value

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation
    from simpatterns.trace import Trace

_BODY_WORDS = attrgetter("name", "color", "shape", "role", "dynamic")  # what a scene's lookups read of a `Body`


@dataclass
class EvalResult:
    """Success, dense score in [0, 1] (1 exactly when success), one
    `ClauseResult` per top-level clause, and the annotation evaluated
    (`RewardProgram.evaluate` sets it; not part of the JSON). ``determined``
    is False when the rollout stopped before its horizon and the frames it
    did not simulate could change the verdict (it was computed on the frozen
    completion: the last frame held; see `simpatterns.dsl.runtime`)."""

    success: bool
    score: float
    clauses: list[ClauseResult] = field(default_factory=list)
    annotation: "Annotation | None" = field(default=None, repr=False, compare=False)
    determined: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"success": self.success, "score": self.score, "determined": self.determined,
                "clauses": [c.to_json() for c in self.clauses]}

    def explain_text(self) -> str:
        """Indented per-clause report (what ``simpatterns reward eval --explain`` prints)."""
        lines = [f"{'SUCCESS' if self.success else 'FAIL'}  score {self.score:.3f}"
                 + ("" if self.determined else "  (undetermined: the rollout stopped before its horizon)")]

        def walk(c: ClauseResult, depth: int) -> None:
            mark = ("ok " if c.success else "no ") if c.determined else ("ok?" if c.success else "no?")
            lines.append(f"{'  ' * depth}{mark}{c.score:.3f}  {c.text}")
            if c.detail:
                lines.append(f"{'  ' * depth}      {c.detail}")
            for k in c.children:
                walk(k, depth + 1)

        for c in self.clauses:
            walk(c, 1)
        return "\n".join(lines)


class _Builder:
    def __init__(self, program: Program, directed: Collection[str], declarations: Mapping[str, Any] | None = None):
        self.program = program
        self.directed = {normalize_text(d) for d in directed}
        self.declarations = declarations or {}
        self.patterns: set[str] = set()  # normalised labels of every pattern argument

    def where(self, node) -> Where:
        return Where(node.span, self.program.source, self.program.filename)

    def build(self, node) -> Any:
        if isinstance(node, Compare):
            out = Comparison(node.op, self.operand(node.left), self.operand(node.right), where=self.where(node))
            out.text = format_expr(node)
            return out
        if isinstance(node, Call):
            return self.call(node)
        raise AssertionError(f"checked programs have only calls and comparisons as clauses, got {node!r}")

    def operand(self, node) -> Any:
        if isinstance(node, Num):
            return node.value
        return self.call(node)

    def call(self, call: Call) -> Node:
        cls = PREDICATES[call.name]
        errors: list = []
        res = bind(call, cls, lambda *a, **k: errors.append(a))
        assert res is not None and not errors, "compile_program checks the program first"
        bound, variadic = res
        kwargs: dict[str, Any] = {}
        for a in cls.SIGNATURE:
            if a.name not in bound:
                continue
            node = bound[a.name]
            if a.kind == "clause" or (a.kind == "pattern_or_state" and isinstance(node, Call)):
                kwargs[a.name] = self.build(node)
            else:
                value = literal_value(node)
                if a.kind == "window":
                    value = (float(value[0]), float(value[1]))
                elif a.kind in ("pattern", "pattern_or_state"):
                    self.patterns.add(normalize_text(value))
                kwargs[a.name] = value
        self._symmetry(cls, kwargs)
        operands = [self.build(op) for op in variadic]
        out = cls(*operands, **kwargs, where=self.where(call))
        out.text = format_expr(call)
        return out

    def _pattern_options(self, label: Any) -> dict[str, Any]:
        """How a pattern's events are read, from its detector's declarations: whether
        its pair is ordered, which params name bodies, whether its events last."""
        if not isinstance(label, str):
            return {}
        key = normalize_text(label)
        decl = self.declarations.get(key)
        return {"symmetric": key not in self.directed,
                "body_keys": tuple(decl.body_params) if decl is not None else None,
                "interval": bool(decl is not None and decl.duration == "interval")}

    def _symmetry(self, cls, kwargs: dict) -> None:
        def put(arg: str, suffix: str = "") -> None:
            for k, v in self._pattern_options(kwargs.get(arg)).items():
                kwargs[k + suffix] = v

        if issubclass(cls, After):
            put("first", "_first")
            put("second", "_second")
        elif issubclass(cls, (Event, Count, First)):
            put("pattern")
        elif issubclass(cls, Never):
            put("what")


def _needs_trace(node: Any) -> bool:
    if not isinstance(node, Node):
        return False
    return node.needs_trace or any(_needs_trace(c) for c in node.children())


class CompiledProgram:
    """A program ready to run: ``evaluate(annotation, trace=None)``. ``patterns``
    are the (normalised) labels of the patterns it reads."""

    _CACHE = 16  # traces, annotations and pattern lists kept (each holds a rollout's arrays or events)
    _SCENES = 256  # scene views kept: small, and a training loop cycles through every template's scene

    def __init__(self, program: Program, root: Node, patterns: Collection[str] = ()):
        self.program = program
        self.root = root
        self.patterns = frozenset(patterns)
        is_and = isinstance(program.root, Call) and program.root.name == "AND"
        self.clause_nodes: list[Node] = list(root.items) if is_and else [root]  # type: ignore[attr-defined]
        self.clause_texts = [n.text for n in self.clause_nodes]
        self.needs_trace = _needs_trace(root)
        self._labels: OrderedDict[tuple, dict[str, str]] = OrderedDict()
        self._views: OrderedDict[int, TraceView] = OrderedDict()
        self._scenes: OrderedDict[Any, SceneView] = OrderedDict()
        self._indexes: OrderedDict[int, EventIndex] = OrderedDict()
        self._last_patterns: list[str] | None = None
        self._last_map: dict[str, str] = {}

    # -------------------------------------------------------------- caches
    def _label_map(self, annotation: "Annotation | None") -> dict[str, str]:
        if annotation is None:
            return {}
        if annotation.patterns is self._last_patterns:  # the same pattern list as last time
            return self._last_map
        key = tuple(annotation.patterns)
        m = self._labels.get(key)
        if m is None:
            m = {normalize_text(p): p for p in key}
            self._labels[key] = m
            if len(self._labels) > self._CACHE:
                self._labels.popitem(last=False)
        self._last_patterns, self._last_map = annotation.patterns, m
        return m

    @staticmethod
    def _remember(cache: OrderedDict, key: Any, value: Any, size: int = _CACHE) -> Any:
        cache[key] = value
        if len(cache) > size:
            cache.popitem(last=False)
        return value

    def _view(self, trace: "Trace | None") -> TraceView | None:
        if trace is None:
            return None
        v = self._views.get(id(trace))
        if v is None or v.trace is not trace:
            v = self._remember(self._views, id(trace), TraceView(trace, self._shared_scene(trace.bodies)))
        return v

    def _shared_scene(self, bodies: Sequence[Any]) -> SceneView:
        """The scene's view, shared by every rollout with bodies of these names, colours, shapes
        and roles: its class phrases are resolved and its matchers bound once, not per rollout."""
        try:
            key: Any = ("words", tuple(map(_BODY_WORDS, bodies)))
        except AttributeError:  # not `Body` records: shared while the same list is passed
            key = ("list", id(bodies))
        hit = self._scenes.get(key)
        if hit is None or (key[0] == "list" and hit.source is not bodies):
            hit = self._remember(self._scenes, key, SceneView(bodies), self._SCENES)
        else:
            self._scenes.move_to_end(key)
        return hit

    def _scene(self, annotation: "Annotation | None") -> SceneView | None:
        """The bodies an annotation lists (when evaluated without its trace)."""
        if annotation is None or annotation.bodies is None:
            return None
        return self._shared_scene(annotation.bodies)

    def _index(self, annotation: "Annotation | None") -> EventIndex | None:
        """The annotation's events indexed by what the program's matchers read, kept while it is evaluated."""
        if annotation is None:
            return None
        idx = self._indexes.get(id(annotation))
        if idx is None or idx.annotation is not annotation:
            idx = self._remember(self._indexes, id(annotation), EventIndex(annotation))
        return idx

    # ---------------------------------------------------------- evaluation
    def context(self, annotation: "Annotation | None", trace: "Trace | None" = None) -> EvalContext:
        if annotation is None and trace is None:
            raise TypeError("evaluate needs an annotation (and a trace for NEARBY_AT/TOUCHING)")
        if trace is not None and trace.num_frames == 0:
            raise DSLEvaluationError("empty-trace", "the trace has no frames", filename=self.program.filename)
        view = self._view(trace)
        return EvalContext(annotation, view, self._label_map(annotation),
                           None if view is not None else self._scene(annotation), self._index(annotation))

    @staticmethod
    def _determined(ctx: EvalContext, nodes: Sequence[Node]) -> list[bool]:
        if ctx.complete:
            return [True] * len(nodes)
        return [n.determined(ctx) for n in nodes]

    def evaluate(self, annotation: "Annotation | None", trace: "Trace | None" = None,
                 explain: bool = False) -> EvalResult:
        """Success, score and per-clause results on one annotated trace.
        Raises `DSLEvaluationError` (e.g. NEARBY_AT without a trace)."""
        ctx = self.context(annotation, trace)
        if explain:
            clauses = [n.explain(ctx) for n in self.clause_nodes]
        else:
            clauses = []
            for node, text, det in zip(self.clause_nodes, self.clause_texts, self._determined(ctx, self.clause_nodes)):
                ok, score = node.eval(ctx)
                clauses.append(ClauseResult(text, ok, score, determined=det))
        ok = all(c.success for c in clauses)
        # the verdict stands when every clause's does, or when one clause certainly fails
        determined = all(c.determined for c in clauses) or any(c.determined and not c.success for c in clauses)
        if ok:
            return EvalResult(True, 1.0, clauses, determined=determined)
        return EvalResult(False, failed(sum(c.score for c in clauses) / len(clauses)), clauses,
                          determined=determined)

    def score(self, annotation: "Annotation | None", trace: "Trace | None" = None) -> tuple[bool, float]:
        """Only (success, score): the fastest path, for optimisers."""
        return self.root.eval(self.context(annotation, trace))

    def evaluate_batch(self, annotations: Iterable["Annotation"], traces: Sequence["Trace | None"] | None = None,
                       explain: bool = False) -> list[EvalResult]:
        anns = list(annotations)
        if traces is not None and len(traces) != len(anns):
            raise ValueError(f"got {len(anns)} annotations but {len(traces)} traces")
        trs = traces if traces is not None else [None] * len(anns)
        return [self.evaluate(a, t, explain) for a, t in zip(anns, trs)]

    def score_batch(self, annotations: Iterable["Annotation"],
                    traces: Sequence["Trace | None"] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(success[B] bool, score[B] float) for a batch."""
        anns = list(annotations)
        trs = traces if traces is not None else [None] * len(anns)
        if len(trs) != len(anns):
            raise ValueError(f"got {len(anns)} annotations but {len(trs)} traces")
        out = [self.score(a, t) for a, t in zip(anns, trs)]
        return np.array([o[0] for o in out], dtype=bool), np.array([o[1] for o in out], dtype=float)


def compile_program(program: Program | str, directed: Collection[str] | None = None,
                    library: Any = None) -> CompiledProgram:
    """Compile a program (text or parsed). Structural checks run first and
    raise `DSLErrors`; library/scene checks are `check`'s job. ``directed``:
    pattern labels whose ``_a``/``_b`` params are ordered; default: the labels
    whose detectors declare ``DIRECTED = True`` in ``library`` (an object with
    ``.declarations()``, a `PatternLibrary`), none without one. All other such
    pairs match in either order."""
    if isinstance(program, str):
        program = parse(program)
    errors = check(program)
    if errors:
        raise DSLErrors(errors)
    return build(program, directed_labels(library) if directed is None else directed, as_declarations(library))


def build(program: Program, directed: Collection[str], declarations: Mapping[str, Any] | None = None
          ) -> CompiledProgram:
    """Compile a program that has been checked (the compiler trusts it);
    ``directed``: the labels whose ``_a``/``_b`` params are ordered;
    ``declarations``: label -> `Declarations` (body params, durations), none
    known when None (every pattern is then an instant with the default body params)."""
    builder = _Builder(program, directed, declarations)
    root = builder.build(program.root)
    return CompiledProgram(program, root, builder.patterns)

