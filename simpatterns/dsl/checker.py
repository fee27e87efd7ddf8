"""Static checks of a parsed program, against a pattern library's signatures
(label -> param keys) and, optionally, a scene's body names.

Which params name bodies (and are checked against the scene) is what each
pattern's detector declares (``BODY_PARAMS``, read through the library's
``.declarations()``); for a pattern without declarations (no library, or a
plain mapping of signatures) the contract's default applies: ``object`` and
the keys starting ``object_``.

All problems are collected (never only the first): unknown predicate,
pattern, param key, body or keyword argument; wrong arity or argument type;
windows and times outside [0, 1]; COUNT used without a comparison. Each
error has a code, position, caret snippet and "did you mean" suggestions.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple, Sequence

from simpatterns.detectors.contract import is_default_body_param
from simpatterns.dsl.errors import DSLError, close_matches, error_at
from simpatterns.dsl.matching import normalize_text
from simpatterns.dsl.parser import parse
from simpatterns.dsl.predicates import PREDICATES, Arg, Node
from simpatterns.dsl.references import SceneBodies, is_wildcard, parse_reference, scene_of
from simpatterns.dsl.syntax import (
    Call,
    Compare,
    DictLit,
    Keyword,
    ListLit,
    Num,
    Program,
    Str,
    TupleLit,
    is_literal,
)

MAX_LISTED = 40  # names listed in a hint before "... and N more"


class BodyRef(NamedTuple):
    """A string of a checked program that names a body, and what it is (for
    the error message): what `check_bodies` checks against a scene's names."""

    node: Str
    where: str


def as_declarations(library: Any) -> dict[str, Any] | None:
    """Label -> `Declarations` when ``library`` offers ``.declarations()`` (a
    `PatternLibrary`), else None (the contract's defaults then apply)."""
    if library is None or not callable(getattr(library, "declarations", None)):
        return None
    d = library.declarations()
    if not isinstance(d, Mapping):
        raise TypeError(f"declarations() must give a mapping label -> Declarations, got {type(d).__name__}")
    return {normalize_text(str(k)): v for k, v in d.items()}


def directed_labels(library: Any) -> frozenset[str]:
    """Labels whose detectors declare ``DIRECTED = True`` (none without declarations)."""
    decl = as_declarations(library)
    return frozenset(k for k, v in (decl or {}).items() if getattr(v, "directed", False))


def body_params_of(label: str | None, declarations: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The declared body params of ``label``; None when it declares nothing known (defaults apply)."""
    d = declarations.get(label) if (declarations is not None and label) else None
    return frozenset(d.body_params) if d is not None else None


def as_descriptions(library: Any) -> dict[str, str]:
    """Pattern descriptions when ``library`` offers ``.descriptions()`` (a
    `PatternLibrary`), for "did you mean" by meaning; else empty."""
    try:
        d = library.descriptions() if hasattr(library, "descriptions") else {}
    except Exception:  # a foreign object: suggestions by name only
        return {}
    return {normalize_text(str(k)): str(v) for k, v in d.items()} if isinstance(d, Mapping) else {}


def _by_description(label: str, descriptions: Mapping[str, str], n: int = 3) -> list[str]:
    words = [w for w in re.findall(r"[a-z]+", label.lower()) if len(w) >= 4]
    out = []
    for name, text in sorted(descriptions.items()):
        low = text.lower()
        if any(re.search(rf"\b{re.escape(w)}", low) for w in words):
            out.append(name)
    return out[:n]


def as_signatures(library: Any) -> dict[str, list[str]] | None:
    """Accept a mapping label -> param keys or an object with ``.signatures()``."""
    if library is None:
        return None
    if hasattr(library, "signatures") and callable(library.signatures):
        library = library.signatures()
    if not isinstance(library, Mapping):
        raise TypeError(f"signatures must be a mapping label -> param keys, got {type(library).__name__}")
    return {normalize_text(str(k)): [str(p) for p in v] for k, v in library.items()}


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f", ... and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


def _describe(node) -> str:
    if isinstance(node, Str):
        return f'the string "{node.value}"'
    if isinstance(node, Num):
        return f"the number {node.value}"
    if isinstance(node, Call):
        return f"{node.name}(...)"
    if isinstance(node, Compare):
        return "a comparison"
    if isinstance(node, DictLit):
        return "a dict"
    if isinstance(node, ListLit):
        return "a list"
    if isinstance(node, TupleLit):
        return "a tuple"
    return type(node).__name__


def bind(call: Call, cls: type[Node], report) -> tuple[dict[str, Any], list[Any]] | None:
    """Match a call's arguments to the predicate's signature, Python style.
    Returns (named arguments, variadic operands); reports arity/keyword errors
    through ``report(code, message, span, suggestions=..., hint=...)``."""
    sig = cls.SIGNATURE
    names = [a.name for a in sig]
    bound: dict[str, Any] = {}
    variadic: list[Any] = []
    ok = True
    seen_keyword = False
    positional_index = 0
    for arg in call.arguments:
        if isinstance(arg, Keyword):
            seen_keyword = True
            if cls.VARIADIC is not None or arg.name not in names:
                allowed = names if cls.VARIADIC is None else []
                report("unknown-argument", f"{cls.NAME} has no argument {arg.name!r}", arg.span,
                       suggestions=close_matches(arg.name, allowed),
                       hint=(f"{cls.NAME} takes {', '.join(allowed)}" if allowed
                             else f"{cls.NAME} takes only positional operands"))
                ok = False
                continue
            if arg.name in bound:
                report("duplicate-argument", f"{cls.NAME} got argument {arg.name!r} twice", arg.span)
                ok = False
                continue
            bound[arg.name] = arg.value
            continue
        if seen_keyword:
            report("positional-after-keyword", "positional argument after a keyword argument", arg.span,
                   hint="put positional arguments first, or name this one")
            ok = False
            continue
        if cls.VARIADIC is not None:
            variadic.append(arg)
            continue
        if positional_index >= len(sig):
            report("arity", f"{cls.NAME} takes at most {len(sig)} positional argument"
                   f"{'s' if len(sig) != 1 else ''} ({', '.join(names)}), got more", arg.span)
            ok = False
            continue
        bound[names[positional_index]] = arg
        positional_index += 1
    for a in sig:
        if a.required and a.name not in bound:
            report("arity", f"{cls.NAME} is missing its argument {a.name!r} ({KIND_SHORT.get(a.kind, a.kind)})",
                   call.span, hint=f"signature: {signature_text(cls)}")
            ok = False
    if cls.VARIADIC is not None and not variadic and not any(isinstance(a, Keyword) for a in call.arguments):
        report("arity", f"{cls.NAME} needs at least one operand", call.span,
               hint=f"e.g. {cls.EXAMPLES[0]}" if cls.EXAMPLES else "")
        ok = False
    return (bound, variadic) if ok else None


KIND_SHORT = {
    "pattern": "a pattern label",
    "params": "a params dict",
    "window": "a (start, end) window",
    "fraction": "a fraction in [0, 1]",
    "number": "a number",
    "positive": "a positive number",
    "body": "a body name",
    "body_or_any": "a body name or wildcard",
    "clause": "a predicate",
    "pattern_or_state": "a pattern label or TOUCHING/NEARBY_AT",
}


def signature_text(cls: type[Node]) -> str:
    if cls.VARIADIC is not None:
        return f"{cls.NAME}(clause, clause, ...)"
    parts = []
    for a in cls.SIGNATURE:
        if a.required:
            parts.append(a.name)
        else:
            parts.append(f"{a.name}={_default_text(a)}")
    return f"{cls.NAME}({', '.join(parts)})"


def _default_text(a: Arg) -> str:
    if a.shown is not None:
        return a.shown
    if a.default is None:
        return {"params": "{}", "window": "(0, 1)", "fraction": "1.0"}.get(a.kind, "None")
    return repr(a.default)


class Checker:
    def __init__(self, program: Program, signatures: dict[str, list[str]] | None,
                 bodies: "Sequence[Any] | SceneBodies | None",
                 descriptions: Mapping[str, str] | None = None, declarations: Mapping[str, Any] | None = None):
        self.program = program
        self.descriptions = descriptions or {}
        self.declarations = declarations
        self.signatures = signatures
        self.scene = scene_of(bodies)
        self.bodies = self.scene.names if self.scene is not None else None
        self.body_set = {normalize_text(b) for b in self.bodies} if self.bodies is not None else None
        self.errors: list[DSLError] = []
        self.body_refs: list[BodyRef] = []  # every body the program names, for later scenes

    def report(self, code, message, span, suggestions=(), hint=""):
        if len(self.errors) >= MAX_ERRORS:
            raise _TooManyErrors(span)
        self.errors.append(error_at(code, message, span, self.program.source, self.program.filename,
                                    suggestions=suggestions, hint=hint))

    # ------------------------------------------------------------ structure
    def run(self) -> list[DSLError]:
        try:
            self.clause(self.program.root, "the program")
        except _TooManyErrors as stop:  # each error costs a snippet and suggestions: bounded work
            self.errors.append(error_at("too-many-errors", f"more than {MAX_ERRORS} errors; the check stopped here",
                                        stop.span, self.program.source, self.program.filename))
        return self.errors

    def clause(self, node, where: str) -> None:
        if isinstance(node, Compare):
            self.compare(node)
        elif isinstance(node, Call):
            cls = PREDICATES.get(node.name)
            if cls is not None and cls.RETURNS != "bool":
                self.report("type", f"{node.name}(...) is a number, not a condition; compare it",
                            node.span, hint=f"e.g. {cls.EXAMPLES[0]}")
            self.call(node)
        else:
            self.report("type", f"{where} must be a predicate such as EVENT(...) or a COUNT comparison, "
                        f"got {_describe(node)}", node.span)

    def compare(self, node: Compare) -> None:
        sides = (node.left, node.right)
        kinds: list[str] = []  # "count" / "distance" of each numeric call
        for side in sides:
            cls = PREDICATES.get(side.name) if isinstance(side, Call) else None
            if cls is not None and cls.RETURNS != "bool":
                kinds.append(cls.RETURNS)
                self.call(side)
            elif not isinstance(side, Num):
                self.report("comparison", f"comparisons take COUNT(...), DISTANCE(...) or a number, got "
                            f"{_describe(side)}", side.span,
                            hint='e.g. COUNT("bounce", {"object": "red ball"}) >= 2')
                if isinstance(side, Call):
                    self.call(side)
        if not kinds:
            if all(isinstance(s, Num) for s in sides):
                self.report("comparison", "a comparison needs a COUNT(...) or a DISTANCE(...)", node.span)
            return
        if len(set(kinds)) > 1:
            self.report("comparison", "a count cannot be compared with a distance", node.span)
            return
        if kinds[0] == "count":
            for side in sides:
                if isinstance(side, Num) and not float(side.value).is_integer():
                    self.report("type", f"counts are whole numbers; {side.value} can never match", side.span)
        elif node.op in ("==", "!="):
            self.report("comparison", f"distances are measured, not counted: compare them with < <= > >=, "
                        f"not {node.op}", node.span, hint='e.g. DISTANCE("red ball", "blue ball") <= 5')

    def call(self, call: Call, *, as_state: bool = False) -> None:
        cls = PREDICATES.get(call.name)
        if cls is None:
            self.report("unknown-predicate", f"unknown predicate {call.name}", call.name_span or call.span,
                        suggestions=close_matches(call.name, list(PREDICATES)),
                        hint=f"predicates are {', '.join(PREDICATES)}")
            return
        res = bind(call, cls, self.report)
        if res is None:
            # still check the operands we can, so all errors come out at once
            for a in call.arguments:
                v = a.value if isinstance(a, Keyword) else a
                if isinstance(v, (Call, Compare)):
                    self.clause(v, f"an argument of {cls.NAME}")
            return
        bound, variadic = res
        for op in variadic:
            self.clause(op, f"an operand of {cls.NAME}")
        patterns: dict[str, str | None] = {}
        for a in cls.SIGNATURE:
            if a.name in bound:
                patterns[a.name] = self.argument(cls, a, bound[a.name], patterns)
        self.specific(cls, call, bound, as_state)

    def specific(self, cls, call: Call, bound: dict, as_state: bool) -> None:
        name = cls.NAME
        if as_state:
            for k in ("t", "window", "hold"):
                if k in bound:
                    self.report("argument", f"{name} inside ALWAYS/NEVER is checked at every frame; drop {k}=",
                                bound[k].span, hint="the window belongs to ALWAYS/NEVER")
        if name == "NEARBY_AT":
            has_xy = "x" in bound or "y" in bound
            if "target" in bound and has_xy:
                self.report("argument", "NEARBY_AT takes a point (x, y) or a target body, not both", call.span)
            elif "target" not in bound and not ("x" in bound and "y" in bound):
                self.report("arity", "NEARBY_AT needs x and y (or target=\"body name\")", call.span,
                            hint='e.g. NEARBY_AT("green ball", x=140, y=10, t=1.0)')
            if "t" in bound and "window" in bound:
                self.report("argument", "NEARBY_AT takes t or window, not both", bound["window"].span)
        if name in ("NEVER", "ALWAYS") and isinstance(bound.get("what"), Call) and "params" in bound:
            self.report("argument", f"params belong to a pattern; {name}({bound['what'].name}(...)) takes none",
                        bound["params"].span)
        if name == "DISTANCE" and "t" in bound and "window" in bound:
            self.report("argument", "DISTANCE takes t or window, not both", bound["window"].span)
        if name in ("TOUCHING", "DISTANCE"):
            a, b = bound.get("a"), bound.get("b")
            # two members of one class may touch; one named body cannot touch itself
            if (isinstance(a, Str) and isinstance(b, Str) and not is_wildcard(a.value)
                    and parse_reference(a.value) is None
                    and normalize_text(a.value) == normalize_text(b.value)):
                what = "touch itself" if name == "TOUCHING" else "be apart from itself"
                self.report("argument", f'a body cannot {what} ("{a.value}")', call.span)

    # ------------------------------------------------------------ arguments
    def argument(self, cls, a: Arg, node, patterns: dict[str, str | None]) -> str | None:
        kind = a.kind
        where = f"{cls.NAME} argument {a.name!r}"
        if kind == "clause":
            self.clause(node, where)
            return None
        if kind == "pattern_or_state":
            if isinstance(node, Call):
                sub = PREDICATES.get(node.name)
                if sub is None or not sub.STATE:
                    self.report("type", f"{where} must be a pattern label or TOUCHING(...)/NEARBY_AT(...), "
                                f"got {node.name}(...)", node.span,
                                hint=f"to negate a condition use NOT({node.name}(...))")
                    self.call(node)
                    return None
                self.call(node, as_state=True)
                return None
            return self.pattern(node, where)
        if kind == "pattern":
            return self.pattern(node, where)
        if kind == "params":
            self.params(node, where, patterns.get(a.of) if a.of else None)
            return None
        if kind == "window":
            self.window(node, where)
            return None
        if kind in ("fraction", "number", "positive"):
            if not isinstance(node, Num):
                self.report("type", f"{where} must be {KIND_SHORT[kind]}, got {_describe(node)}", node.span)
                return None
            v = node.value
            if kind == "fraction" and not 0 <= v <= 1:
                self.report("fraction", f"{where} = {v} is outside [0, 1]; times are fractions of the rollout "
                            "(1.0 = the end)", node.span)
            if kind == "positive" and not v > 0:
                self.report("value", f"{where} must be > 0, got {v}", node.span)
            return None
        if kind in ("body", "body_or_any"):
            if not isinstance(node, Str):
                self.report("type", f"{where} must be {KIND_SHORT[kind]} in quotes, got {_describe(node)}",
                            node.span)
                return None
            if is_wildcard(node.value):
                if kind == "body":
                    self.report("type", f"{where} must name one body, not the wildcard \"{node.value}\"",
                                node.span)
                return None
            self.body(node, where)
            return None
        raise AssertionError(f"unhandled argument kind {kind}")

    def pattern(self, node, where: str) -> str | None:
        if not isinstance(node, Str):
            self.report("type", f"{where} must be a pattern label in quotes, got {_describe(node)}", node.span)
            return None
        label = normalize_text(node.value)
        if not label:
            self.report("unknown-pattern", "empty pattern label", node.span)
            return None
        if self.signatures is not None and label not in self.signatures:
            known = sorted(self.signatures)
            similar = close_matches(label, known) or _by_description(label, self.descriptions)
            self.report("unknown-pattern", f'unknown pattern "{node.value}"', node.span,
                        suggestions=[f'"{s}"' for s in similar],
                        hint=f"known patterns: {_listing(known)}")
            return None
        return label

    def params(self, node, where: str, label: str | None) -> None:
        if not isinstance(node, DictLit):
            self.report("type", f"{where} must be a dict such as {{\"object\": \"red ball\"}}, "
                        f"got {_describe(node)}", node.span)
            return
        keys = self.signatures.get(label) if (self.signatures is not None and label) else None
        body_keys = body_params_of(label, self.declarations)
        seen: set[str] = set()
        for k, v in node.items:
            if k.value in seen:
                self.report("duplicate-argument", f"param {k.value!r} given twice", k.span)
            seen.add(k.value)
            if keys is not None and k.value not in keys:
                self.report("unknown-param", f'pattern "{label}" has no param "{k.value}"', k.span,
                            suggestions=[f'"{s}"' for s in close_matches(k.value, keys)],
                            hint=(f"its params are {', '.join(keys)}" if keys else "it takes no params"))
            if not is_literal(v):
                self.report("type", f"param {k.value!r} must be a literal value (string, number, list), "
                            f"got {_describe(v)}", v.span)
                continue
            if k.value in body_keys if body_keys is not None else is_default_body_param(k.value):
                for s in (v.items if isinstance(v, (ListLit, TupleLit)) else (v,)):
                    if isinstance(s, Str) and not is_wildcard(s.value):
                        self.body(s, f"param {k.value!r}")

    def window(self, node, where: str) -> None:
        if not (isinstance(node, (ListLit, TupleLit)) and len(node.items) == 2
                and all(isinstance(n, Num) for n in node.items)):
            self.report("type", f"{where} must be (start, end) with two numbers, got {_describe(node)}",
                        node.span, hint="e.g. window=(0, 0.2) for the first 20% of the rollout")
            return
        s, e = (n.value for n in node.items)
        if not (0 <= s <= 1 and 0 <= e <= 1):
            self.report("window", f"{where} ({s}, {e}) is outside [0, 1]; windows are fractions of the rollout",
                        node.span, hint="e.g. window=(0, 0.2) for the first 20%")
        elif s > e:
            self.report("window", f"{where} starts after it ends ({s} > {e})", node.span)

    def body(self, node: Str, where: str) -> None:
        """A body name, or a class phrase ("green object", "the goal object"), which
        is fine in every scene (it may name no body there: then no clause on it holds)."""
        self.body_refs.append(BodyRef(node, where))
        if self.scene is None:
            return
        if normalize_text(node.value) in self.body_set or self.scene.reference(node.value) is not None:
            return
        names = self.bodies or []
        self.report("unknown-body", f'{where}: unknown body "{node.value}"', node.span,
                    suggestions=[f'"{s}"' for s in close_matches(node.value, names)],
                    hint=f"bodies in this scene: {_listing(names)}; or a class such as \"green object\", "
                         "\"the goal object\", \"the agent's ball\", \"any wall\"")


MAX_ERRORS = 50  # a program with more is not read further (checking time stays linear in its size)


class _TooManyErrors(Exception):
    def __init__(self, span) -> None:
        super().__init__("too many errors")
        self.span = span


def check(program: Program | str, signatures: Any = None, bodies: "Sequence[Any] | None" = None) -> list[DSLError]:
    """All problems of ``program`` (text or parsed) as a list of `DSLError`
    (empty when it is fine). ``signatures``: label -> param keys, or an object
    with ``.signatures()`` (a `PatternLibrary`, whose ``.declarations()`` then
    say which params name bodies); ``bodies``: the scene's bodies, as names or
    as `Body` records (``trace.bodies``; their colours and roles let ``reward
    check`` say which bodies a class phrase names). Either may be None to skip
    those checks."""
    if isinstance(program, str):
        try:
            program = parse(program)
        except DSLError as exc:
            return [exc]
    return make_checker(program, signatures, bodies).run()


def make_checker(program: Program, signatures: Any = None, bodies: "Sequence[Any] | None" = None) -> Checker:
    """A `Checker` of ``program`` against ``signatures`` (see `check`) and ``bodies``;
    ``.run()`` gives the errors, after which ``.body_refs`` lists the bodies it names."""
    return Checker(program, as_signatures(signatures), bodies, as_descriptions(signatures),
                   as_declarations(signatures))


def check_bodies(program: Program, refs: Sequence[BodyRef], bodies: "Sequence[Any]") -> list[DSLError]:
    """The ``unknown-body`` errors of an already checked program against a
    scene's body names, from the body references its check recorded
    (`Checker.body_refs`): no parsing, no walk of the tree. The same errors
    ``check(program, library, bodies)`` reports for bodies."""
    checker = Checker(program, None, bodies)
    for ref in refs:
        checker.body(ref.node, ref.where)
    return checker.errors
