"""Parsing reward-program text into a `Program` with the LALR grammar in
``reward.lark``; syntax errors become `DSLSyntaxError` with position, caret
snippet, the expected tokens and "did you mean" suggestions."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib import resources

from lark import Lark, Token, Transformer
from lark.lexer import Lexer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from simpatterns.dsl.errors import DSLSyntaxError, close_matches, error_at
from simpatterns.dsl.syntax import (
    Call,
    Compare,
    DictLit,
    Keyword,
    ListLit,
    Num,
    Program,
    Span,
    Str,
    TupleLit,
)

MAX_PROGRAM_CHARS = 100_000  # reward programs are short; refuse megabyte inputs early
MAX_NESTING = 64  # deeper nesting is refused before parsing (bounded time and stack)


@lru_cache(maxsize=1)
def grammar_text() -> str:
    """The Lark grammar of the DSL (``reward.lark``), e.g. for vLLM structured outputs."""
    return resources.files("simpatterns.dsl").joinpath("reward.lark").read_text()


@lru_cache(maxsize=1)
def predicate_names() -> tuple[str, ...]:
    """Predicate keywords, read from the grammar's PREDICATE terminal."""
    m = re.search(r"^PREDICATE:(.*)$", grammar_text(), re.M)
    assert m, "reward.lark must define PREDICATE"
    return tuple(re.findall(r'"([A-Z_]+)"', m.group(1)))


def _span(first, last) -> Span:
    """Span from the first to the last token/node (tokens or nodes with .span)."""
    a = first.span if hasattr(first, "span") else _tok_span(first)
    b = last.span if hasattr(last, "span") else _tok_span(last)
    return Span(a.line, a.column, b.end_line, b.end_column, a.start, b.end)


def _tok_span(t: Token) -> Span:
    return Span(t.line, t.column, t.end_line, t.end_column, t.start_pos, t.end_pos)


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "'": "'", "n": "\n", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)")
_INT_RE = re.compile(r"[+-]?[0-9]+$")


class _Syntax(Exception):
    """Raised inside the transformer; turned into DSLSyntaxError with the text."""

    def __init__(self, code: str, message: str, span: Span):
        super().__init__(message)
        self.code, self.message, self.span = code, message, span


class _ToNodes(Transformer):
    """Inline LALR callbacks building `syntax` nodes (no intermediate tree)."""

    def start(self, c):
        return c[0]

    def string(self, c):
        t = c[0]
        body = t.value[1:-1]
        return Str(_ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(1)], body), _tok_span(t))

    def number(self, c):
        t = c[0]
        text = t.value
        try:
            value: int | float = int(text) if _INT_RE.match(text) else float(text)
        except ValueError:  # e.g. an integer with more than 4300 digits
            raise _Syntax("bad-number", f"number {text[:20]}... is too long", _tok_span(t)) from None
        try:
            finite = math.isfinite(float(value))  # an int beyond float's range overflows here
        except OverflowError:
            finite = False
        if not finite:
            shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"
            raise _Syntax("bad-number", f"number {shown} is out of range", _tok_span(t))
        return Num(value, _tok_span(t))

    def _items(self, c):
        inner = c[1]
        return tuple(inner) if inner is not None else ()

    def list(self, c):
        return ListLit(self._items(c), _span(c[0], c[-1]))

    def tuple(self, c):
        return TupleLit(self._items(c), _span(c[0], c[-1]))

    def dict(self, c):
        inner = c[1]
        return DictLit(tuple(inner) if inner is not None else (), _span(c[0], c[-1]))

    def items(self, c):
        return [x for x in c if not isinstance(x, Token) and x is not None]

    def pairs(self, c):
        return [x for x in c if not isinstance(x, Token) and x is not None]

    def pair(self, c):
        key = self.string([c[0]])
        return (key, c[2])

    def arguments(self, c):
        return [x for x in c if not isinstance(x, Token) and x is not None]

    def keyword(self, c):
        return Keyword(str(c[0]), c[2], _span(c[0], c[2]))

    def call(self, c):
        name_tok = c[0]
        args = c[2]
        return Call(str(name_tok), tuple(args) if args is not None else (), _span(name_tok, c[-1]), _tok_span(name_tok))

    def compare(self, c):
        return Compare(str(c[1]), c[0], c[2], _span(c[0], c[2]))


class _FastLexer(Lexer):
    """The grammar's terminals as one regex, scanned in a tight loop.

    Lark's own lexer dominates parse time on these short programs. This one
    tokenises valid programs exactly as Lark's would (the terminals do not
    overlap except "=" inside "==", and the longer-first order Lark uses
    settles that); on any problem it gives up and `parse` reruns Lark's
    contextual lexer, whose errors carry the expected tokens."""

    def __init__(self, lexer_conf):
        terms = sorted(lexer_conf.terminals,
                       key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
        self.ignore = frozenset(lexer_conf.ignore)
        self.match = re.compile("|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terms)).match

    def lex(self, data: str):
        match, ignore = self.match, self.ignore
        pos, line, line_start, n = 0, 1, 0, len(data)
        while pos < n:
            m = match(data, pos)
            if m is None or m.end() == pos:
                raise _LexFailed()
            kind, end = m.lastgroup, m.end()
            if kind in ignore:
                nl = data.count("\n", pos, end)
                if nl:
                    line += nl
                    line_start = data.rfind("\n", pos, end) + 1
            else:
                col = pos - line_start + 1
                yield Token(kind, m.group(), pos, line, col, line, col + end - pos, end)
            pos = end


class _LexFailed(Exception):
    """The fast lexer met something it does not tokenise; use Lark's lexer."""


def _make_parser(lexer) -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer=lexer, transformer=_ToNodes(), keep_all_tokens=True,
                maybe_placeholders=True)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """Lark's LALR parser with its contextual lexer: the reference, and the
    source of syntax errors."""
    return _make_parser("contextual")


@lru_cache(maxsize=1)
def _fast_parser() -> Lark:
    return _make_parser(_FastLexer)


_TERMINAL_WORDS = {
    "PREDICATE": "a predicate name",
    "STRING": "a string",
    "NUMBER": "a number",
    "NAME": "a keyword argument (name=)",
    "COMPARE": "a comparison (== != < <= > >=)",
    "$END": "end of program",
}


@lru_cache(maxsize=1)
def _terminal_display() -> dict[str, str]:
    out = dict(_TERMINAL_WORDS)
    for t in _parser().terminals:
        if t.name not in out and t.pattern.type == "str":
            out[t.name] = f'"{t.pattern.value}"'
    return out


def _expected(names) -> list[str]:
    disp = _terminal_display()
    shown = sorted({disp.get(n, n) for n in names if n not in ("WS", "COMMENT")})
    # punctuation first, then words, for a stable, readable list
    return sorted(shown, key=lambda s: (not s.startswith('"'), s))


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _word_at(text: str, pos: int) -> tuple[str, int]:
    """The identifier at ``pos``, else the one just before it (skipping spaces)."""
    if 0 <= pos < len(text) and (text[pos].isalnum() or text[pos] == "_"):
        start = pos
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        m = _IDENT.match(text, start)
        return (m.group(0), start) if m else ("", pos)
    j = min(pos, len(text)) - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    end = j + 1
    while j >= 0 and (text[j].isalnum() or text[j] == "_"):
        j -= 1
    m = _IDENT.match(text, j + 1)
    return (m.group(0), j + 1) if m and m.end() == end else ("", pos)


def _acceptable(exc: UnexpectedInput, fallback) -> list[str]:
    """Terminals the parser accepts here: simulated on the interactive parser
    (precise), else the LALR state's set (can include merged states' tokens)."""
    ip = getattr(exc, "interactive_parser", None)
    if ip is not None:
        try:
            return _expected(ip.accepts())
        except Exception:  # simulation failed: fall back to the state's set
            pass
    return _expected(fallback or ())


def _syntax_error(exc: UnexpectedInput, text: str, filename: str) -> DSLSyntaxError:
    preds = predicate_names()
    pos = exc.pos_in_stream if exc.pos_in_stream is not None else len(text)
    suggestions: list[str] = []
    hint = ""
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        code, message = "unexpected-end", "the program ends too early"
        expected = _acceptable(exc, exc.expected)
        line, col = _line_col(text, len(text))
        span = Span(line, col, line, col + 1, len(text), len(text))
        if text.count("(") > text.count(")"):
            hint = f"{text.count('(') - text.count(')')} unclosed '(': close every call"
    else:
        if isinstance(exc, UnexpectedCharacters):
            ch = text[pos] if pos < len(text) else ""
            code, message = "unexpected-character", f"unexpected character {ch!r}"
            expected = _acceptable(exc, exc.allowed)
            span = Span(exc.line, exc.column, exc.line, exc.column + 1, pos, pos + 1)
        else:
            assert isinstance(exc, UnexpectedToken)
            tok = exc.token
            code, message = "unexpected-token", f"unexpected {tok.value!r}"
            expected = _acceptable(exc, exc.expected)
            span = _tok_span(tok)
        word, wstart = _word_at(text, pos)
        if word and word not in preds:
            suggestions = close_matches(word, preds, key=lambda s: s.lower().replace("_", ""))
            if word.upper().replace(" ", "_") in preds:
                hint = f"predicate names are upper case: {word.upper()}"
            elif suggestions:
                hint = f"{word!r} is not a predicate; predicates are {', '.join(preds)}"
            elif not word[0].isdigit():
                hint = f'names of patterns and bodies are strings in double quotes, e.g. "{word.replace("_", " ")}"'
            wl, wc = _line_col(text, wstart)
            if isinstance(exc, UnexpectedCharacters) or wstart < pos:
                span = Span(wl, wc, wl, wc + len(word), wstart, wstart + len(word))
        elif isinstance(exc, UnexpectedCharacters) and text[pos : pos + 1] in ("'", '"'):
            hint = "strings may not span lines; close the quote on the same line"
        if not hint and isinstance(exc, UnexpectedToken) and '","' in expected and exc.token.type != "RPAR":
            hint = "missing ',' between arguments?"
    return error_at(code, message, span, text, filename, expected=expected, suggestions=suggestions,
                    hint=hint, cls=DSLSyntaxError)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _check_nesting(text: str, filename: str) -> None:
    if text.count("(") + text.count("[") + text.count("{") <= MAX_NESTING:
        return  # cannot be too deep: skip the scan (the common case)
    depth = 0
    in_str: str | None = None
    escape = False
    in_comment = False
    for i, ch in enumerate(text):
        if in_comment:
            in_comment = ch != "\n"
            continue
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == in_str or ch == "\n":
                in_str = None
            continue
        if ch in "\"'":
            in_str = ch
        elif ch == "#":
            in_comment = True
        elif ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                line, col = _line_col(text, i)
                raise error_at("too-deep", f"brackets nested deeper than {MAX_NESTING} levels",
                               Span(line, col, line, col + 1, i, i + 1), text, filename, cls=DSLSyntaxError)
        elif ch in ")]}":
            depth -= 1


def parse(text: str, filename: str = "<program>") -> Program:
    """Parse reward-program text; raises `DSLSyntaxError` (a `DSLError`)."""
    if not isinstance(text, str):
        raise DSLSyntaxError("bad-input", f"program text must be str, got {type(text).__name__}", filename=filename)
    if len(text) > MAX_PROGRAM_CHARS:  # pointed at the first character past the limit
        line, col = _line_col(text, MAX_PROGRAM_CHARS)
        raise error_at("too-long", f"program is {len(text)} characters; the limit is {MAX_PROGRAM_CHARS}",
                       Span(line, col, line, col + 1, MAX_PROGRAM_CHARS, MAX_PROGRAM_CHARS + 1), text, filename,
                       cls=DSLSyntaxError)
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        raise DSLSyntaxError("empty", "the program is empty; write one expression such as AND(...)",
                             line=1, column=1, filename=filename)
    _check_nesting(text, filename)
    try:
        try:
            root = _fast_parser().parse(text)
        except (_LexFailed, UnexpectedInput):
            root = _parser().parse(text)  # the reference lexer: same result, or a precise error
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, filename) from None
    except _Syntax as exc:
        raise error_at(exc.code, exc.message, exc.span, text, filename, cls=DSLSyntaxError) from None
    return Program(root, source=text, filename=filename)
