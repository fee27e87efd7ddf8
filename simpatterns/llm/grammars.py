"""Grammars for constrained decoding: GBNF generated from Lark, validated, recognised, sampled.

llama.cpp (in-process and its server) and vLLM (xgrammar and llguidance
backends) all take a GBNF grammar (llama.cpp's ``name ::= ...`` format):
xgrammar parses it natively, llguidance converts it, and vLLM only runs a
narrow line-by-line converter on Lark text (no regex terminals, no
``%ignore``). So every backend gets the GBNF generated here from one Lark
grammar:

    gbnf = lark_to_gbnf(lark_text, start="start", ignore_bound=12)
    gbnf.text()                 # the grammar to send
    gbnf.accepts("AND(...)")    # an independent recogniser (tests, checks)
    GBNF.parse(text)            # parse + validate text from elsewhere

Translation: each terminal becomes a rule (its regex translated through
Python's own regex parser), each rule keeps its EBNF shape (``x*`` stays a
repetition, so nothing is left-recursive), and the ignored terminals
(``%ignore``) may appear after every token and before the first. With
``ignore_bound=K`` at most one ignored token fits between two tokens and
its unbounded repetitions are capped at K characters: bounded whitespace.
Tokenisation is assumed to be context free (no two adjacent tokens that
Lark's longest-match lexer would merge differently), as in the DSL grammar.

Validation (`GBNF.parse`, `validate_gbnf`) refuses what makes llama.cpp
fail or crash: syntax errors, undefined rules, a missing ``root``, left
recursion, repetitions of something that can be empty. An invalid grammar
segfaults a llama.cpp server, so nothing is sent unvalidated.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Sequence, Union

from simpatterns.errors import SimpatternsError

MAX_CODEPOINT = 0x10FFFF


class GrammarError(SimpatternsError, ValueError):
    """A grammar that cannot be translated, parsed or used; names the rule or line:column."""


# ---------------------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class Chars:
    """One character from a set of inclusive code-point ranges (or outside them when negated)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def matches(self, cp: int) -> bool:
        inside = any(a <= cp <= b for a, b in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Alt:
    options: tuple["Node", ...]


@dataclass(frozen=True)
class Rep:
    item: "Node"
    min: int
    max: int | None  # None: unbounded


Node = Union[Chars, Lit, Ref, Seq, Alt, Rep]

ANY = Chars(((0, MAX_CODEPOINT),))
EMPTY = Seq(())


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        elif not (isinstance(it, Lit) and not it.text):
            flat.append(it)
    merged: list[Node] = []
    for it in flat:  # adjacent literals read better as one
        if isinstance(it, Lit) and merged and isinstance(merged[-1], Lit):
            merged[-1] = Lit(merged[-1].text + it.text)
        else:
            merged.append(it)
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


def alt(*options: Node) -> Node:
    """Alternatives, left-factored: ``a b | a c`` becomes ``a (b | c)``. A matcher that
    follows every alternative (llama.cpp, `GBNF.accepts`) otherwise carries both
    through all of ``a``, and nested, that doubles per level."""
    flat: list[Node] = []
    for o in options:
        for x in (o.options if isinstance(o, Alt) else (o,)):
            if x not in flat:
                flat.append(x)
    groups: dict[Node, list[Node]] = {}
    for x in flat:
        items = x.items if isinstance(x, Seq) else (x,)
        if not items:
            groups.setdefault(EMPTY, []).append(EMPTY)
            continue
        groups.setdefault(items[0], []).append(seq(*items[1:]) if len(items) > 1 else EMPTY)
    out: list[Node] = []
    for first, rests in groups.items():
        if first == EMPTY or len(rests) == 1:
            out.append(first if first == EMPTY else seq(first, rests[0]))
            continue
        tails = [r for r in rests if r != EMPTY]
        tail = alt(*tails)
        out.append(seq(first, Rep(tail, 0, 1) if len(tails) < len(rests) else tail))
    return out[0] if len(out) == 1 else Alt(tuple(out))


def _merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _complement(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out, nxt = [], 0
    for a, b in _merge(ranges):
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return tuple(out)


# ---------------------------------------------------------------------------------------- text


_ESC = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord("\\"): "\\\\"}


def _esc(cp: int, specials: str) -> str:
    if cp in _ESC:
        return _ESC[cp]
    ch = chr(cp)
    if ch in specials:
        return "\\" + ch
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02X}"
    if 0xD800 <= cp <= 0xDFFF or cp > 0xFFFF:
        return f"\\U{cp:08X}"
    if cp > 0x7E and not ch.isprintable():
        return f"\\u{cp:04X}"
    return ch


def _class_char(cp: int) -> str:
    # "-" and "^" are escaped by code so no position makes them a range or a negation
    if cp in (ord("-"), ord("^")):
        return f"\\x{cp:02X}"
    return _esc(cp, '"[]')


def node_text(node: Node, outer: bool = True) -> str:
    """GBNF text of a node (one line)."""
    if isinstance(node, Lit):
        return '"' + "".join(_esc(ord(c), '"') for c in node.text) + '"'
    if isinstance(node, Chars):
        if node == ANY:
            return "."
        body = "".join(_class_char(a) if a == b else
                       (_class_char(a) + _class_char(b) if b == a + 1 else f"{_class_char(a)}-{_class_char(b)}")
                       for a, b in node.ranges)
        return "[" + ("^" if node.negated else "") + body + "]"
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Alt):
        text = " | ".join(node_text(o, True) for o in node.options)
        return text if outer else f"({text})"
    if isinstance(node, Seq):
        if not node.items:
            return '""'
        text = " ".join(node_text(i, False) for i in node.items)
        return text if outer else f"({text})"
    if isinstance(node, Rep):
        inner = node_text(node.item, False)
        if isinstance(node.item, Seq) and len(node.item.items) > 1 and not inner.startswith("("):
            inner = f"({inner})"
        lo, hi = node.min, node.max
        suffix = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
        if suffix is None:
            suffix = f"{{{lo}}}" if hi == lo else (f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}")
        return inner + suffix
    raise TypeError(f"not a grammar node: {node!r}")


# ---------------------------------------------------------------------------------------- GBNF


_NAME_RE = re.compile(r"[A-Za-z0-9-]+")


@dataclass
class GBNF:
    """A GBNF grammar: rules by name (``root`` is where matching starts)."""

    rules: dict[str, Node]
    _flat: "_Flat | None" = field(default=None, repr=False, compare=False)
    _heights: "dict[str, float] | None" = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        order = ["root"] + [n for n in self.rules if n != "root"]
        return "".join(f"{n} ::= {node_text(self.rules[n])}\n" for n in order if n in self.rules)

    @classmethod
    def parse(cls, text: str) -> "GBNF":
        """Parse GBNF text as llama.cpp does, then `validate`; raises `GrammarError`."""
        return _Parser(text).grammar().validate()

    def validate(self) -> "GBNF":
        """Raise `GrammarError` for a missing root, undefined rules, left recursion or
        a repetition of something that can be empty; return self."""
        if "root" not in self.rules:
            raise GrammarError("the grammar has no rule named 'root'")
        for name, node in self.rules.items():
            if not _NAME_RE.fullmatch(name):
                raise GrammarError(f"rule name {name!r}: use letters, digits and '-' only")
            for ref in _refs(node):
                if ref not in self.rules:
                    raise GrammarError(f"rule {name!r} refers to undefined rule {ref!r}")
        nullable = _nullable(self.rules)
        for name, node in self.rules.items():
            for rep in _reps(node):
                if rep.max is None and _is_nullable(rep.item, nullable):
                    raise GrammarError(f"rule {name!r}: {node_text(rep)} repeats something that can be empty "
                                       "(llama.cpp loops on it)")
        _check_left_recursion(self.rules, nullable)
        return self

    # -- matching ---------------------------------------------------------------------------

    def accepts(self, text: str) -> bool:
        """Whether the grammar derives exactly ``text`` from ``root``."""
        if self._flat is None:
            self._flat = _Flat(self.rules)
        return self._flat.accepts(text)

    def accepts_prefix(self, text: str) -> bool:
        """Whether ``text`` can be continued into a sentence of the grammar."""
        if self._flat is None:
            self._flat = _Flat(self.rules)
        return self._flat.viable(text)

    # -- sampling ---------------------------------------------------------------------------

    def sample(self, rng: random.Random, max_depth: int = 12, max_repeat: int = 3) -> str:
        """A random sentence of the grammar; past ``max_depth`` nested rules the shortest
        derivations are taken, so it always ends."""
        if self._heights is None:
            self._heights = _heights(self.rules)
        heights = self._heights
        out: list[str] = []
        _sample(self.rules["root"], self.rules, heights, rng, 0, max_depth, max_repeat, out)
        return "".join(out)


def validate_gbnf(text: str) -> str:
    """``text`` when it is a valid GBNF grammar, else `GrammarError` with line and column."""
    GBNF.parse(text)
    return text


def is_gbnf(text: str) -> bool:
    """GBNF (``name ::= ...`` rules) rather than Lark; the test vLLM uses."""
    return any("::=" in re.sub(r"(#|//).*$", "", line) for line in text.splitlines())


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.options
    if isinstance(node, Rep):
        return (node.item,)
    return ()


def _walk(node: Node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(_children(n))


def _refs(node: Node) -> list[str]:
    return [n.name for n in _walk(node) if isinstance(n, Ref)]


def _reps(node: Node) -> list[Rep]:
    return [n for n in _walk(node) if isinstance(n, Rep)]


def _is_nullable(node: Node, nullable: set[str]) -> bool:
    if isinstance(node, Lit):
        return not node.text
    if isinstance(node, Chars):
        return False
    if isinstance(node, Ref):
        return node.name in nullable
    if isinstance(node, Seq):
        return all(_is_nullable(i, nullable) for i in node.items)
    if isinstance(node, Alt):
        return any(_is_nullable(o, nullable) for o in node.options)
    if isinstance(node, Rep):
        return node.min == 0 or _is_nullable(node.item, nullable)
    raise TypeError(node)


def _nullable(rules: dict[str, Node]) -> set[str]:
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in rules.items():
            if name not in out and _is_nullable(node, out):
                out.add(name)
                changed = True
    return out


def _leading_refs(node: Node, nullable: set[str]) -> set[str]:
    """Rules that can be expanded before any character is read."""
    if isinstance(node, Ref):
        return {node.name}
    if isinstance(node, Seq):
        out: set[str] = set()
        for i in node.items:
            out |= _leading_refs(i, nullable)
            if not _is_nullable(i, nullable):
                break
        return out
    if isinstance(node, Alt):
        return set().union(*(_leading_refs(o, nullable) for o in node.options))
    if isinstance(node, Rep):
        return _leading_refs(node.item, nullable)
    return set()


def _check_left_recursion(rules: dict[str, Node], nullable: set[str]) -> None:
    edges = {n: _leading_refs(node, nullable) for n, node in rules.items()}
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                cycle = path[path.index(m):] + [m] if m in path else [n, m]
                raise GrammarError(f"left recursion: {' -> '.join(cycle)} (llama.cpp refuses it)")
            if m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in rules:
        if n not in state:
            visit(n, [n])


def _heights(rules: dict[str, Node]) -> dict[str, float]:
    h = {n: float("inf") for n in rules}

    def node_h(node: Node) -> float:
        if isinstance(node, (Lit, Chars)):
            return 0.0
        if isinstance(node, Ref):
            return h[node.name] + 1
        if isinstance(node, Seq):
            return max((node_h(i) for i in node.items), default=0.0)
        if isinstance(node, Alt):
            return min(node_h(o) for o in node.options)
        if isinstance(node, Rep):
            return 0.0 if node.min == 0 else node_h(node.item)
        raise TypeError(node)

    changed = True
    while changed:
        changed = False
        for n, node in rules.items():
            v = node_h(node)
            if v < h[n]:
                h[n] = v
                changed = True
    return h


_POOL = [ord(c) for c in " abcxyzABCXYZ0123456789_-.,:;!?()[]{}\"'#\\/=<>+*\n\té"]


def _sample_char(c: Chars, rng: random.Random) -> str:
    if not c.negated:
        small = [(a, b) for a, b in c.ranges if b - a < 128]
        a, b = rng.choice(small or list(c.ranges))
        if b - a >= 128:
            pool = [cp for cp in _POOL if a <= cp <= b]
            if pool:
                return chr(rng.choice(pool))
        return chr(rng.randint(a, b))
    pool = [cp for cp in _POOL if c.matches(cp)]
    if pool:
        return chr(rng.choice(pool))
    for _ in range(1000):
        cp = rng.randint(0x20, 0x2FFF)
        if c.matches(cp):
            return chr(cp)
    raise GrammarError(f"no character matches {node_text(c)}")


def _node_height(node: Node, heights: dict[str, float]) -> float:
    if isinstance(node, (Lit, Chars)):
        return 0.0
    if isinstance(node, Ref):
        return heights[node.name] + 1
    if isinstance(node, Seq):
        return max((_node_height(i, heights) for i in node.items), default=0.0)
    if isinstance(node, Alt):
        return min(_node_height(o, heights) for o in node.options)
    if isinstance(node, Rep):
        return 0.0 if node.min == 0 else _node_height(node.item, heights)
    raise TypeError(node)


def _sample(node: Node, rules, heights, rng, depth, max_depth, max_repeat, out: list[str]) -> None:
    if isinstance(node, Lit):
        out.append(node.text)
    elif isinstance(node, Chars):
        out.append(_sample_char(node, rng))
    elif isinstance(node, Ref):
        _sample(rules[node.name], rules, heights, rng, depth + 1, max_depth, max_repeat, out)
    elif isinstance(node, Seq):
        for i in node.items:
            _sample(i, rules, heights, rng, depth, max_depth, max_repeat, out)
    elif isinstance(node, Alt):
        options = list(node.options)
        if depth >= max_depth:
            best = min(_node_height(o, heights) for o in options)
            options = [o for o in options if _node_height(o, heights) == best]
        _sample(rng.choice(options), rules, heights, rng, depth, max_depth, max_repeat, out)
    elif isinstance(node, Rep):
        hi = node.min + max_repeat if node.max is None else min(node.max, node.min + max_repeat)
        k = node.min if depth >= max_depth else rng.randint(node.min, hi)
        for _ in range(k):
            _sample(node.item, rules, heights, rng, depth, max_depth, max_repeat, out)
    else:
        raise TypeError(node)


# ---------------------------------------------------------------------------------------- parser


class _Parser:
    """GBNF text -> `GBNF`, following llama.cpp's grammar parser (one rule per line,
    alternatives may continue on the next line only inside parentheses)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def error(self, msg: str, at: int | None = None) -> GrammarError:
        at = self.i if at is None else at
        line = self.s.count("\n", 0, at) + 1
        col = at - (self.s.rfind("\n", 0, at) + 1) + 1
        return GrammarError(f"GBNF line {line}, column {col}: {msg}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def space(self, newline_ok: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t" or (newline_ok and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] not in "\r\n":
                    self.i += 1
            else:
                break

    def name(self) -> str:
        m = _NAME_RE.match(self.s, self.i)
        if not m:
            raise self.error("expected a rule name")
        self.i = m.end()
        return m.group()

    def grammar(self) -> GBNF:
        rules: dict[str, Node] = {}
        self.space(True)
        while self.i < len(self.s):
            start = self.i
            n = self.name()
            self.space(False)
            if not self.s.startswith("::=", self.i):
                raise self.error("expected '::='")
            self.i += 3
            self.space(True)
            node = self.alternates(False)
            if n in rules:
                raise self.error(f"rule {n!r} is defined twice", start)
            rules[n] = node
            if self.peek() == "\r":
                self.i += 1
            if self.peek() == "\n":
                self.i += 1
            elif self.i < len(self.s):
                raise self.error(f"expected end of line after rule {n!r}, got {self.peek()!r}")
            self.space(True)
        if not rules:
            raise GrammarError("the grammar is empty")
        return GBNF(rules)

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def char(self) -> int:
        c = self.peek()
        if not c:
            raise self.error("unexpected end of grammar")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.peek(1)
        simple = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93}
        if e in simple:
            self.i += 2
            return simple[e]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width is None:
            raise self.error(f"unknown escape '\\{e}'")
        digits = self.s[self.i + 2:self.i + 2 + width]
        if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise self.error(f"'\\{e}' needs {width} hex digits")
        self.i += 2 + width
        cp = int(digits, 16)
        if cp > MAX_CODEPOINT:
            raise self.error(f"code point {digits} is out of range")
        return cp

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        while self.i < len(self.s):
            c = self.peek()
            start = self.i
            if c == '"':
                self.i += 1
                chars = []
                while self.peek() != '"':
                    if not self.peek() or self.peek() in "\r\n":
                        raise self.error("unterminated string literal", start)
                    chars.append(chr(self.char()))
                self.i += 1
                items.append(Lit("".join(chars)))
            elif c == "[":
                self.i += 1
                negated = self.peek() == "^"
                if negated:
                    self.i += 1
                ranges = []
                while self.peek() != "]":
                    if not self.peek():
                        raise self.error("unterminated character class", start)
                    a = self.char()
                    b = a
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        self.i += 1
                        b = self.char()
                        if b < a:
                            raise self.error("character range runs backwards")
                    ranges.append((a, b))
                self.i += 1
                items.append(Chars(_merge(ranges), negated))
            elif c == "(":
                self.i += 1
                self.space(True)
                inner = self.alternates(True)
                if self.peek() != ")":
                    raise self.error("expected ')'")
                self.i += 1
                items.append(inner if not isinstance(inner, Seq) or len(inner.items) != 1 else inner.items[0])
            elif c == ".":
                self.i += 1
                items.append(ANY)
            elif c in "*+?":
                if not items:
                    raise self.error(f"'{c}' without something before it to repeat")
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                items[-1] = Rep(items[-1], lo, hi)
            elif c == "{":
                if not items:
                    raise self.error("'{' without something before it to repeat")
                m = re.compile(r"\{\s*(\d+)\s*(?:(,)\s*(\d+)?\s*)?\}").match(self.s, self.i)
                if not m:
                    raise self.error("expected {m}, {m,} or {m,n}")
                self.i = m.end()
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) is not None else None)
                if hi is not None and hi < lo:
                    raise self.error(f"repetition {{{lo},{hi}}} has max < min", start)
                items[-1] = Rep(items[-1], lo, hi)
            elif _NAME_RE.match(c):
                items.append(Ref(self.name()))
            elif c == "<":
                raise self.error("token references (<...>) are not supported here")
            else:
                break
            self.space(nested)
        if not items:
            return EMPTY
        return items[0] if len(items) == 1 else Seq(tuple(items))


# ---------------------------------------------------------------------------------------- recogniser


class _Flat:
    """The grammar as flat alternatives of characters and rule names, matched with a
    set of stacks, as llama.cpp does (each stack: positions still to match, top last)."""

    def __init__(self, rules: dict[str, Node]) -> None:
        self.alts: dict[str, list[tuple]] = {}
        self.n = 0
        for name, node in rules.items():
            self.alts[name] = self._alternatives(node)
        self._expanded: dict[tuple, frozenset] = {}
        self._matchers: dict[tuple, object] = {}
        self._steps: dict[tuple, frozenset] = {}
        self._initial: frozenset | None = None

    def _helper(self, alternatives: list[tuple]) -> str:
        self.n += 1
        name = f"\0{self.n}"
        self.alts[name] = alternatives
        return name

    def _elems(self, node: Node) -> tuple:
        if isinstance(node, Lit):
            return tuple(Chars(((ord(c), ord(c)),)) for c in node.text)
        if isinstance(node, Chars):
            return (node,)
        if isinstance(node, Ref):
            return (node.name,)
        if isinstance(node, Seq):
            return tuple(e for i in node.items for e in self._elems(i))
        if isinstance(node, Alt):
            return (self._helper(self._alternatives(node)),)
        if isinstance(node, Rep):
            item = self._elems(node.item)
            if len(item) != 1:
                item = (self._helper([item]),)
            tail: tuple = ()
            if node.max is None:
                star = f"\0{self.n + 1}"
                self.n += 1
                self.alts[star] = [item + (star,), ()]
                tail = (star,)
            else:
                for _ in range(node.max - node.min):
                    tail = (self._helper([item + tail, ()]),)
            return item * node.min + tail
        raise TypeError(node)

    def _alternatives(self, node: Node) -> list[tuple]:
        if isinstance(node, Alt):
            return [e for o in node.options for e in self._alternatives(o)]
        return [self._elems(node)]

    def expand(self, stack: tuple) -> frozenset:
        """Stacks whose top is a character set (or empty: the end), reached from ``stack``."""
        got = self._expanded.get(stack)
        if got is not None:
            return got
        out: set[tuple] = set()
        todo = [stack]
        seen: set[tuple] = set()
        while todo:
            st = todo.pop()
            if st in seen:
                continue
            seen.add(st)
            if not st:
                out.add(st)
                continue
            name, a, i = st[-1]
            elem = self.alts[name][a][i]
            if isinstance(elem, Chars):
                out.add(st)
                continue
            rest = st[:-1] + (((name, a, i + 1),) if i + 1 < len(self.alts[name][a]) else ())
            for j, alt_ in enumerate(self.alts[elem]):
                todo.append(rest + ((elem, j, 0),) if alt_ else rest)
        res = frozenset(out)
        if len(self._expanded) < 200_000:
            self._expanded[stack] = res
        return res

    def _matcher(self, frame: tuple):
        m = self._matchers.get(frame)
        if m is None:
            name, a, i = frame
            c: Chars = self.alts[name][a][i]
            if sum(b - a_ + 1 for a_, b in c.ranges) <= 512:
                points = frozenset(cp for a_, b in c.ranges for cp in range(a_, b + 1))
                m = (lambda cp: cp not in points) if c.negated else points.__contains__
            else:
                m = c.matches
            self._matchers[frame] = m
        return m

    def _start(self) -> frozenset:
        if self._initial is None:
            stacks: set[tuple] = set()
            for j, alt_ in enumerate(self.alts["root"]):
                stacks |= self.expand((("root", j, 0),) if alt_ else ())
            self._initial = frozenset(stacks)
        return self._initial

    def _step(self, stacks: frozenset, cp: int) -> frozenset:
        key = (stacks, cp)
        got = self._steps.get(key)
        if got is not None:
            return got
        by_top: dict[tuple, list[tuple]] = {}
        for st in stacks:
            if st:
                by_top.setdefault(st[-1], []).append(st)
        nxt: set[tuple] = set()
        for top, group in by_top.items():
            if not self._matcher(top)(cp):
                continue
            name, a, i = top
            step = ((name, a, i + 1),) if i + 1 < len(self.alts[name][a]) else ()
            for st in group:
                nxt |= self.expand(st[:-1] + step)
        res = frozenset(nxt)
        if len(self._steps) < 200_000:
            self._steps[key] = res
        return res

    def _run(self, text: str) -> frozenset:
        stacks = self._start()
        for ch in text:
            stacks = self._step(stacks, ord(ch))
            if not stacks:
                break
        return stacks

    def accepts(self, text: str) -> bool:
        return () in self._run(text)

    def viable(self, text: str) -> bool:
        return bool(self._run(text))


# ---------------------------------------------------------------------------------------- Lark -> GBNF


def _regex_to_node(pattern: str, flags: Iterable[str] = ()) -> Node:
    """A Python regex (the subset grammars use) as a grammar node."""
    try:
        import re._parser as sre  # Python >= 3.11
        import re._constants as C
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as sre  # type: ignore[no-redef]
        import sre_constants as C  # type: ignore[no-redef]
    flag_bits = 0
    for f in flags:
        flag_bits |= {"i": re.I, "s": re.S, "m": re.M, "x": re.X, "u": re.U}.get(f, 0)
        if f not in "smxu":
            raise GrammarError(f"regex /{pattern}/: flag {f!r} is not supported in grammars")
    try:
        parsed = sre.parse(pattern, flag_bits)
    except re.error as exc:
        raise GrammarError(f"regex /{pattern}/: {exc}") from None
    dotall = bool(flag_bits & re.S)

    categories = {
        C.CATEGORY_DIGIT: ((48, 57),),
        C.CATEGORY_SPACE: ((9, 13), (32, 32)),
        C.CATEGORY_WORD: ((48, 57), (65, 90), (95, 95), (97, 122)),
    }
    negated_categories = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
                          C.CATEGORY_NOT_WORD: C.CATEGORY_WORD}

    def cls(items) -> Chars:
        negate = False
        ranges: list[tuple[int, int]] = []
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY and av in categories:
                ranges.extend(categories[av])
            elif op is C.CATEGORY and av in negated_categories:
                ranges.extend(_complement(categories[negated_categories[av]]))
            else:
                raise GrammarError(f"regex /{pattern}/: {op} in a character class is not supported")
        return Chars(_merge(ranges), negate)

    def conv(sub) -> Node:
        items: list[Node] = []
        for op, av in sub:
            if op is C.LITERAL:
                items.append(Lit(chr(av)))
            elif op is C.NOT_LITERAL:
                items.append(Chars(((av, av),), True))
            elif op is C.ANY:
                items.append(ANY if dotall else Chars(((10, 10),), True))
            elif op is C.IN:
                items.append(cls(av))
            elif op is C.BRANCH:
                items.append(alt(*(conv(b) for b in av[1])))
            elif op is C.SUBPATTERN:
                items.append(conv(av[-1]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT) or getattr(C, "POSSESSIVE_REPEAT", None) is op:
                lo, hi, inner = av
                items.append(Rep(conv(inner), lo, None if hi == C.MAXREPEAT else hi))
            else:
                raise GrammarError(f"regex /{pattern}/: {op} is not supported in grammars "
                                   "(no anchors, lookarounds or back references)")
        return seq(*items) if items else EMPTY

    node = conv(parsed)
    if flag_bits & re.I:
        node = _ignore_case(node)
    return node


def _ignore_case(node: Node) -> Node:
    if isinstance(node, Lit):
        return seq(*(Chars(_merge({(ord(c.lower()), ord(c.lower())), (ord(c.upper()), ord(c.upper()))}))
                     if c.lower() != c.upper() else Lit(c) for c in node.text))
    if isinstance(node, Chars):
        extra = []
        for a, b in node.ranges:
            if b - a < 256:
                for cp in range(a, b + 1):
                    for v in {ord(chr(cp).lower()[0]), ord(chr(cp).upper()[0])}:
                        extra.append((v, v))
        return Chars(_merge(list(node.ranges) + extra), node.negated)
    if isinstance(node, Seq):
        return Seq(tuple(_ignore_case(i) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_ignore_case(o) for o in node.options))
    if isinstance(node, Rep):
        return Rep(_ignore_case(node.item), node.min, node.max)
    return node


def _cap(node: Node, bound: int) -> Node:
    """Unbounded repetitions capped at ``bound``."""
    if isinstance(node, Rep):
        hi = max(node.min, bound) if node.max is None else node.max
        return Rep(_cap(node.item, bound), node.min, hi)
    if isinstance(node, Seq):
        return Seq(tuple(_cap(i, bound) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_cap(o, bound) for o in node.options))
    return node


def _is_line_comment(node: Node) -> bool:
    """``PREFIX [^\\n]*``: a token that runs to the end of the line."""
    last = node.items[-1] if isinstance(node, Seq) and node.items else None
    return (isinstance(last, Rep) and last.min == 0 and last.max is None
            and last.item == Chars(((10, 10),), True))


class _LarkTranslator:
    def __init__(self, lark_text: str, start: str, ignore: Sequence[str] | None, ignore_bound: int | None):
        try:
            from lark.load_grammar import _literal_to_pattern, load_grammar
            from lark.exceptions import GrammarError as LarkGrammarError, LarkError
        except ImportError as exc:  # pragma: no cover - lark is a core dependency
            raise GrammarError(f"reading a Lark grammar needs the lark package: {exc}") from exc
        self._literal_to_pattern = _literal_to_pattern
        try:
            grammar, _ = load_grammar(lark_text, "<grammar>", [], False)
        except (LarkGrammarError, LarkError) as exc:
            raise GrammarError(f"invalid Lark grammar: {exc}") from None
        self.rule_trees = {name: tree for name, _params, tree, _opts in grammar.rule_defs}
        for name, params, _tree, _opts in grammar.rule_defs:
            if params:
                raise GrammarError(f"Lark rule {name!r}: templates are not supported")
        self.term_trees = {name: tree for name, (tree, _prio) in grammar.term_defs}
        self.ignored = list(grammar.ignore if ignore is None else ignore)
        for name in self.ignored:
            if name not in self.term_trees:
                raise GrammarError(f"ignored terminal {name!r} is not defined")
        if start not in self.rule_trees:
            raise GrammarError(f"the Lark grammar has no rule {start!r}")
        self.start = start
        self.bound = ignore_bound
        self.names: dict[tuple[str, str], str] = {}
        self.rules: dict[str, Node] = {}
        self.gap: Node = EMPTY

    def gbnf_name(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self.names:
            base = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "x"
            base = ("tok-" if kind == "term" else "") + base
            # "start": llguidance renames root to start when it converts GBNF
            taken = set(self.names.values()) | {"root", "gap", "start"}
            cand, k = base, 2
            while cand in taken:
                cand, k = f"{base}-{k}", k + 1
            self.names[key] = cand
        return self.names[key]

    def translate(self) -> GBNF:
        tail: Node = EMPTY
        if self.ignored:
            options = [self.term_node(self.term_trees[n], n) for n in self.ignored]
            # A lexer reads a line comment to the end of the line; a grammar could end it anywhere
            # and read the rest as tokens. So between tokens a comment takes its newline with it,
            # and only the last one may stop at the end of the text.
            open_comments = [o for o in options if _is_line_comment(o)]
            options = [seq(o, Lit("\n")) if _is_line_comment(o) else o for o in options]
            if open_comments:
                tail = Rep(alt(*(_cap(o, self.bound) if self.bound is not None else o for o in open_comments)), 0, 1)
            if self.bound is None:
                # (X+ | Y)* is (X | Y)*: without the inner "+" a run of X is matched one way only
                options = [o.item if isinstance(o, Rep) and o.min == 1 and o.max is None else o for o in options]
                body: Node = Rep(alt(*options), 0, None)
            else:
                body = alt(*(_cap(o, self.bound) for o in options))
                # one optional ignored token; X{1,K} optional is X{0,K}
                body = Rep(body.item, 0, body.max) if isinstance(body, Rep) and body.min == 1 else Rep(body, 0, 1)
            self.rules["gap"] = body
            self.gap = Ref("gap")
        root = seq(self.gap, Ref(self.rule_ref(self.start)), tail)
        self.rules = {"root": root, **self.rules}
        return GBNF(self.rules).validate()

    def rule_ref(self, name: str) -> str:
        gname = self.gbnf_name("rule", name)
        if gname not in self.rules:
            self.rules[gname] = EMPTY  # placeholder: recursion sees the name
            self.rules[gname] = self.rule_node(self.rule_trees[name])
        return gname

    def term_ref(self, name: str) -> str:
        gname = self.gbnf_name("term", name)
        if gname not in self.rules:
            self.rules[gname] = EMPTY
            self.rules[gname] = self.term_node(self.term_trees[name], name)
        return gname

    def literal(self, token, in_terminal: bool) -> Node:
        try:
            pattern = self._literal_to_pattern(token)
        except Exception as exc:  # noqa: BLE001 - lark's own message
            raise GrammarError(f"Lark literal {token}: {exc}") from None
        flags = set(getattr(pattern, "flags", ()) or ())
        if pattern.type == "str":
            node: Node = Lit(pattern.value)
            if "i" in flags:
                node = _ignore_case(node)
        else:
            node = _regex_to_node(pattern.value, flags)
        return node

    def tree_node(self, tree, in_terminal: bool, where: str) -> Node:
        from lark import Token, Tree
        from lark.grammar import NonTerminal, Terminal

        if isinstance(tree, Terminal):
            if in_terminal:
                return self.term_node(self.term_trees[tree.name], tree.name)
            if tree.name not in self.term_trees:
                raise GrammarError(f"{where}: terminal {tree.name} is declared but not defined")
            return seq(Ref(self.term_ref(tree.name)), self.gap)
        if isinstance(tree, NonTerminal):
            if in_terminal:
                raise GrammarError(f"{where}: a terminal cannot use rule {tree.name}")
            return Ref(self.rule_ref(tree.name))
        if not isinstance(tree, Tree):
            raise GrammarError(f"{where}: unexpected {tree!r}")
        d = tree.data
        if d == "expansions":
            return alt(*(self.tree_node(c, in_terminal, where) for c in tree.children))
        if d == "expansion":
            return seq(*(self.tree_node(c, in_terminal, where) for c in tree.children))
        if d == "alias":
            return self.tree_node(tree.children[0], in_terminal, where)
        if d == "value":
            return self.tree_node(tree.children[0], in_terminal, where)
        if d == "maybe":
            return Rep(self.tree_node(tree.children[0], in_terminal, where), 0, 1)
        if d == "literal":
            node = self.literal(tree.children[0], in_terminal)
            return node if in_terminal else seq(node, self.gap)
        if d == "range":
            a, b = (self._literal_to_pattern(t).value for t in tree.children)
            node = Chars(((ord(a), ord(b)),))
            return node if in_terminal else seq(node, self.gap)
        if d == "expr":
            item = self.tree_node(tree.children[0], in_terminal, where)
            op = tree.children[1]
            if isinstance(op, Token) and op.type == "OP":
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[op.value]
                return Rep(item, lo, hi)
            nums = [int(t) for t in tree.children[2:]]
            lo, hi = (nums[0], nums[0]) if len(nums) == 1 else (nums[0], nums[1])
            return Rep(item, lo, hi)
        raise GrammarError(f"{where}: Lark construct {d!r} is not supported")

    def rule_node(self, tree) -> Node:
        return self.tree_node(tree, False, "rule")

    def term_node(self, tree, name: str) -> Node:
        return self.tree_node(tree, True, f"terminal {name}")


@lru_cache(maxsize=64)
def _lark_to_gbnf_cached(lark_text: str, start: str, ignore: tuple[str, ...] | None,
                         ignore_bound: int | None) -> GBNF:
    return _LarkTranslator(lark_text, start, ignore, ignore_bound).translate()


def lark_to_gbnf(lark_text: str, *, start: str = "start", ignore: Sequence[str] | None = None,
                 ignore_bound: int | None = None) -> GBNF:
    """Translate a Lark grammar to GBNF (see the module docstring).

    ``start``: the rule to start from; ``ignore``: the terminals allowed between
    tokens (default: the grammar's ``%ignore`` list); ``ignore_bound``: at most
    one ignored token per gap, with its unbounded repetitions capped at this
    many characters (None: as the Lark grammar says, unbounded).
    """
    return _lark_to_gbnf_cached(lark_text, start, tuple(ignore) if ignore is not None else None, ignore_bound)


@lru_cache(maxsize=64)
def as_gbnf(grammar: str) -> str:
    """The GBNF text to send for a request's grammar (GBNF as is, Lark translated), validated."""
    if is_gbnf(grammar):
        return validate_gbnf(grammar)
    return lark_to_gbnf(grammar).text()
