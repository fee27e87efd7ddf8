"""Grammars that constrain an LLM to write reward programs (GBNF, for llama.cpp and vLLM).

Two grammars, both generated, never kept by hand:

- `decoding_grammar()`: the DSL grammar (``reward.lark``) for decoding: the
  top level is a predicate call (optionally compared: ``COUNT(...) >= 2``),
  no comments, and at most `MAX_WS` whitespace characters between tokens.
  It accepts exactly the programs the parser accepts under those three
  restrictions (tests/dsl/test_constrained_grammar.py checks it over the
  fuzz corpus and every shipped goal). A model can still name patterns,
  params and bodies that do not exist.
- `specialised_grammar(library, bodies)`: a program for *this* library and
  scene: ``AND(...)`` of clauses whose pattern labels, param keys (each
  pattern's own, each at most once, in any order), body names, windows
  (start <= end on a 0.05 grid), times, counts and keyword arguments are
  spelled out, per predicate signature; a body is never its own TOUCHING
  partner or NEARBY_AT target. Lists hold at most `MAX_CLAUSES` clauses and
  AND/OR/NOT nest at most `MAX_NESTING` deep inside the top-level AND, so a
  small model that starts repeating a clause must close the program within
  its token budget. Every program it derives parses and passes
  `simpatterns.dsl.check` against that library and scene, by construction
  (tested by sampling it). Without a scene, body names are free strings
  (the checker does not check them then) and ``TOUCHING("x", "x")`` cannot
  be excluded.

Both are built as Lark grammars and translated by the LLM layer's generic
translator (`simpatterns.llm.grammars.lark_to_gbnf`), which also validates
them: no backend is ever sent a grammar that llama.cpp would crash on.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, Sequence

from simpatterns.detectors.contract import is_default_body_param
from simpatterns.dsl.checker import as_declarations, as_signatures, body_params_of
from simpatterns.dsl.references import SceneBodies
from simpatterns.dsl.matching import normalize_text
from simpatterns.dsl.parser import grammar_text
from simpatterns.dsl.predicates import PREDICATES
from simpatterns.llm.grammars import lark_to_gbnf

MAX_WS = 16  # whitespace characters between two tokens: a newline and 15 spaces of indentation
WINDOW_STEP = 0.05  # window bounds in the specialised grammar: 0, 0.05, ..., 1
WILDCARDS = ("*", "any", "object X")  # what a body-valued param or TOUCHING may say instead of a body
MAX_ANY_ORDER_KEYS = 5  # a pattern's param keys in any order up to this many (2^n rules), else declared order
MAX_PAIR_PATTERNS = 40
# bounds of the specialised grammar: a goal's program has a few clauses; a model caught in a loop
# ("AFTER(...), AFTER(...), ..." or "AND(AND(AND(...") is made to close it
MAX_CLAUSES = 8
MAX_NESTING = 3
COMBINATORS = ("AND", "OR", "NOT")  # built per nesting level, not by a builder
_CLOSE = '","? ")"'  # every call may end with a trailing comma, as the canonical printer writes them

# The top level of a decoded program: a predicate call, optionally compared.
_DECODING_TOP = "predicate_top: call (COMPARE operand)?\n"


@lru_cache(maxsize=4)
def decoding_grammar(max_ws: int = MAX_WS) -> str:
    """GBNF of the DSL for decoding (see the module docstring)."""
    return lark_to_gbnf(grammar_text() + "\n" + _DECODING_TOP, start="predicate_top", ignore=("WS",),
                        ignore_bound=max_ws).text()


# ------------------------------------------------------------------------------ specialised


def _lit(s: str) -> str:
    """A Lark string literal whose value is ``s``."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quoted(s: str) -> str:
    """A Lark literal matching the DSL string ``"s"`` (quotes included)."""
    return _lit('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def body_keys(declarations: Mapping[str, Any] | None, label: str, keys: Sequence[str]) -> set[str]:
    """Param keys of ``label`` whose values the checker checks as body names, so the specialised
    grammar writes bodies there: what its detector declares (``BODY_PARAMS``, from the library's
    ``.declarations()``), or the contract's default for a pattern without declarations."""
    declared = body_params_of(label, declarations)
    return {k for k in keys if (k in declared if declared is not None else is_default_body_param(k))}


def specialised_lark(library: Any, bodies: Sequence[Any] | None = None, *,
                     patterns: Sequence[str] | None = None) -> str:
    """The specialised grammar as Lark text (see `specialised_grammar`)."""
    sigs = as_signatures(library) or {}
    declarations = as_declarations(library)
    labels = [normalize_text(p) for p in patterns] if patterns is not None else sorted(sigs)
    unknown = [p for p in labels if p not in sigs]
    if unknown:
        raise ValueError(f"patterns not in the library: {unknown}")
    if not labels:
        raise ValueError("a specialised grammar needs at least one pattern")
    names = None
    if bodies is not None:
        names = list(dict.fromkeys(b if isinstance(b, str) else b.name for b in bodies))
        if not names:
            raise ValueError("the scene has no bodies")
        if not all(isinstance(b, str) for b in bodies):  # records: their colour and role phrases too
            known = {normalize_text(n) for n in names}
            names += [p for p, members in SceneBodies(bodies).references() if members and normalize_text(p) not in known]
    missing = set(PREDICATES) - set(_BUILDERS)
    if missing:  # a new predicate needs its rule here, or programs could never use it
        raise AssertionError(f"no specialised-grammar rule for predicate(s) {sorted(missing)}")

    L: list[str] = []
    leaves = []
    for build in _BUILDERS.values():
        rule = build(L) if build is not None else None
        if rule:
            leaves.append(rule)
    L[0:0] = _clause_levels(leaves)

    # patterns, their params (each key at most once, in declared order) and the per-pattern forms
    for i, label in enumerate(labels):
        keys = sigs[label]
        bkeys = body_keys(declarations, label, keys)
        L.append(f"pat_{i}: {_quoted(label)}")
        L += _params_rules(i, [f"{_quoted(k)} \":\" {'body_value' if k in bkeys else 'plain_value'}"
                               for k in keys])
        L.append(f'pq_{i}: pat_{i} ("," params_{i})?')
        L.append(f'fl_{i}: pat_{i} ("," params_{i})? ("," "window" "=" window)? ("," "among" "=" params_{i})?')
    n = range(len(labels))
    L.append("pq: " + " | ".join(f"pq_{i}" for i in n))
    L.append("fl: " + " | ".join(f"fl_{i}" for i in n))
    # AFTER/BEFORE(first, second, first_params=..., second_params=..., window=...): the params follow
    # both labels, so the rule for the second label must know the first: one rule per pair while that
    # stays small; past MAX_PAIR_PATTERNS, second_params comes first (keyword order is free).
    window = '("," "window" "=" window)?'
    if len(labels) <= MAX_PAIR_PATTERNS:
        for i in n:
            L.append(f'first_{i}: pat_{i} "," (' + " | ".join(
                f'pat_{j} ("," "first_params" "=" params_{i})? ("," "second_params" "=" params_{j})?'
                for j in n) + f") {window}")
    else:
        for i in n:
            L.append(f'first_{i}: pat_{i} "," second ("," "first_params" "=" params_{i})? {window}')
        for j in n:
            L.append(f'second_{j}: pat_{j} ("," "second_params" "=" params_{j})?')
        L.append("second: " + " | ".join(f"second_{j}" for j in n))
    L.append("first_second: " + " | ".join(f"first_{i}" for i in n))

    # bodies
    if names is not None:
        L.append("body: " + " | ".join(_quoted(b) for b in names))
        # a body never touches itself (the checker's rule) nor is its own NEARBY_AT target (meaningless)
        touch, near, dist = [], [], []
        for k, a in enumerate(names):
            others = [_quoted(b) for b in names if normalize_text(b) != normalize_text(a)]
            L.append(f"other_{k}: " + " | ".join(others) if others else f"other_{k}: {_quoted(a)}")
            touch.append(f'{_quoted(a)} "," (other_{k} | wildcard)' if others else f'{_quoted(a)} "," wildcard')
            dist.append(f'{_quoted(a)} "," other_{k}')  # DISTANCE names two bodies, no wildcard
            near.append(f'{_quoted(a)} ("," "x" "=" NUM "," "y" "=" NUM' +
                        (f' | "," "target" "=" other_{k})' if others else ")"))
        L.append("touch_pair: " + " | ".join(touch) + ' | wildcard "," body_or_any')
        L.append("nearby_where: " + " | ".join(near))
        L.append("distance_pair: " + " | ".join(dist))
    else:
        L.append("body: FREE_STRING")
        L.append('touch_pair: body_or_any "," body_or_any')
        L.append('nearby_where: body ("," "x" "=" NUM "," "y" "=" NUM | "," "target" "=" body)')
        L.append('distance_pair: body "," body')
    L.append("wildcard: " + " | ".join(_quoted(w) for w in WILDCARDS))
    L.append("body_or_any: body | wildcard")
    L.append('body_value: body_or_any | "[" body ("," body)* "]"')
    L.append("plain_value: FREE_STRING | NUM")

    # windows: (start, end) on a grid, start <= end
    grid = [round(k * WINDOW_STEP, 10) for k in range(round(1 / WINDOW_STEP) + 1)]
    starts = []
    for k, s in enumerate(grid):
        ends = [_lit(_fmt(e)) for e in grid[k:]] + ([_lit("1.0")] if s < 1 else [])
        L.append(f"wend_{k}: {' | '.join(ends)}")
        starts.append(f'{_lit(_fmt(s))} "," wend_{k}')
    L.append('window: "(" (' + " | ".join(starts) + ') ")"')

    L += [
        'COMPARE: "==" | "!=" | "<=" | ">=" | "<" | ">"',
        r"FRACTION: /0(\.[0-9]{1,3})?|1(\.0{1,3})?/",
        r"NUM: /-?[0-9]{1,4}(\.[0-9]{1,2})?/",
        r"POSITIVE: /[1-9][0-9]{0,3}(\.[0-9]{1,2})?|0\.[1-9][0-9]?|0\.0[1-9]/",
        r"INT: /[0-9]{1,2}/",
        r'FREE_STRING: /"[A-Za-z0-9_ .-]{1,40}"/',
        r"WS: /[ \t\r\n]+/",
        "%ignore WS",
    ]
    return "\n".join(L) + "\n"


def _params_rules(i: int, kvs: list[str]) -> list[str]:
    """``params_i``: a dict of the pattern's keys, each at most once, in any order. One rule per set of
    keys already written (2^n for n keys); past MAX_ANY_ORDER_KEYS, in declared order only."""
    if not kvs:
        return [f'params_{i}: "{{" "}}"']
    out = []
    if len(kvs) <= MAX_ANY_ORDER_KEYS:
        full = (1 << len(kvs)) - 1
        for used in range(full):
            alts = []
            for j, kv in enumerate(kvs):
                if used & (1 << j):
                    continue
                rest = used | (1 << j)
                alts.append(kv + (f' ("," keys_{i}_{rest})?' if rest != full else ""))
            out.append(f"keys_{i}_{used}: " + " | ".join(alts))
    else:
        for j, kv in enumerate(kvs):
            nxt = f' ("," keys_{i}_{j + 1})? | keys_{i}_{j + 1}' if j + 1 < len(kvs) else ""
            out.append(f"keys_{i}_{j}: {kv}{nxt}")
    out.append(f'params_{i}: "{{" keys_{i}_0? "}}"')
    return out


def _clause_levels(leaves: list[str]) -> list[str]:
    """``start`` and the clause rules of each nesting level: level k's AND/OR/NOT hold
    level k + 1 clauses; the deepest level has only the leaf predicates."""
    def listed(rule: str) -> str:
        return f'"(" {rule} ("," {rule})~0..{MAX_CLAUSES - 1} {_CLOSE}'

    out = [f'start: "AND" {listed("clause_0")}']
    for k in range(MAX_NESTING + 1):
        alts = list(leaves)
        if k < MAX_NESTING:
            inner = f"clause_{k + 1}"
            out += [f'and_{k}: "AND" {listed(inner)}', f'or_{k}: "OR" {listed(inner)}',
                    f'not_{k}: "NOT" "(" {inner} {_CLOSE}']
            alts = [f"and_{k}", f"or_{k}", f"not_{k}", *alts]
        out.append(f"clause_{k}: " + " | ".join(alts))
    return out


def _b_event(L: list[str]) -> str:
    L.append(f'event_call: "EVENT" "(" pq ("," "window" "=" window)? {_CLOSE}')
    return "event_call"


def _b_count(L: list[str]) -> str:
    # COUNT is a number: it only appears compared, with a whole number or another COUNT
    L.append(f'count_call: "COUNT" "(" pq ("," "window" "=" window)? {_CLOSE}')
    L.append("count_cmp: count_call COMPARE (INT | count_call)")
    return "count_cmp"


def _b_order(name: str):
    def build(L: list[str]) -> str:
        # AFTER(first, second, second_params=..., first_params=..., window=...): keyword order is
        # free, and this one needs no rule per pair of patterns
        L.append(f'{name.lower()}_call: "{name}" "(" first_second {_CLOSE}')
        return f"{name.lower()}_call"
    return build


def _b_firstlast(name: str):
    def build(L: list[str]) -> str:
        L.append(f'{name.lower()}_call: "{name}" "(" fl {_CLOSE}')
        return f"{name.lower()}_call"
    return build


def _b_never_always(name: str):
    def build(L: list[str]) -> str:
        # a pattern (with params) or a per-frame state (TOUCHING / NEARBY_AT without t or window)
        L.append(f'{name.lower()}_call: "{name}" "(" (pq | state) ("," "window" "=" window)? {_CLOSE}')
        if name == "NEVER":
            L.append("state: touching_state | nearby_state")
        return f"{name.lower()}_call"
    return build


def _b_touching(L: list[str]) -> str:
    L.append(f'touching_call: "TOUCHING" "(" touch_pair ("," "t" "=" FRACTION)? ("," "hold" "=" FRACTION)? '
             f'{_CLOSE}')
    L.append(f'touching_state: "TOUCHING" "(" touch_pair {_CLOSE}')
    return "touching_call"


def _b_nearby(L: list[str]) -> str:
    L.append(f'nearby_call: "NEARBY_AT" "(" nearby_where ("," "t" "=" FRACTION | "," "window" "=" window)? '
             f'("," "radius" "=" POSITIVE)? {_CLOSE}')
    L.append(f'nearby_state: "NEARBY_AT" "(" nearby_where ("," "radius" "=" POSITIVE)? {_CLOSE}')
    return "nearby_call"


def _b_distance(L: list[str]) -> str:
    # DISTANCE is a number: it only appears compared with a distance in px (two distinct bodies)
    L.append(f'distance_call: "DISTANCE" "(" distance_pair ("," "t" "=" FRACTION | "," "window" "=" window)? '
             f'{_CLOSE}')
    L.append('distance_cmp: distance_call ("<=" | ">=" | "<" | ">") (POSITIVE | INT)')
    return "distance_cmp"


# One builder per predicate (a new predicate without one fails loudly in specialised_lark);
# the combinators are built per nesting level by _clause_levels.
_BUILDERS = {
    **dict.fromkeys(COMBINATORS), "EVENT": _b_event, "COUNT": _b_count,
    "AFTER": _b_order("AFTER"), "BEFORE": _b_order("BEFORE"),
    "FIRST": _b_firstlast("FIRST"), "LAST": _b_firstlast("LAST"),
    "NEVER": _b_never_always("NEVER"), "ALWAYS": _b_never_always("ALWAYS"),
    "TOUCHING": _b_touching, "NEARBY_AT": _b_nearby, "DISTANCE": _b_distance,
}


def specialised_grammar(library: Any, bodies: Sequence[Any] | None = None, *,
                        patterns: Sequence[str] | None = None, max_ws: int = MAX_WS) -> str:
    """GBNF for programs over ``library``'s patterns (or the subset ``patterns``) and the
    scene's ``bodies`` (names or `Body` records; None: any names), top level ``AND(...)``."""
    return lark_to_gbnf(specialised_lark(library, bodies, patterns=patterns), ignore=("WS",),
                        ignore_bound=max_ws).text()
