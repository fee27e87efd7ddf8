"""Errors of the reward DSL, written for people and for the LLM repair loop.

Every error carries a stable ``code`` (e.g. ``unknown-pattern``), the
1-based ``line``/``column`` it points at, a ``snippet`` of the source line
with a caret under the offending text, the ``expected`` tokens (syntax
errors), ``suggestions`` ("did you mean") and an optional ``hint``.
``str(error)`` renders all of it::

    goal.rwd:2:11: error[unknown-pattern]: unknown pattern "lever launch"
       2 |     EVENT("lever launch", {"object": "green ball"}),
         |           ^~~~~~~~~~~~~~
      did you mean: "launch"?
"""

from __future__ import annotations

import difflib
from typing import Iterable, Iterator, Sequence

from simpatterns.annotation import normalize_label
from simpatterns.dsl.syntax import Span
from simpatterns.errors import SimpatternsError

MAX_SNIPPET_WIDTH = 100


class DSLError(SimpatternsError):
    """One problem in a reward program; see the module docstring."""

    def __init__(
        self,
        code: str,
        message: str,
        line: int = 0,
        column: int = 0,
        snippet: str = "",
        expected: Sequence[str] = (),
        suggestions: Sequence[str] = (),
        hint: str = "",
        filename: str = "<program>",
        end_line: int = 0,
        end_column: int = 0,
    ) -> None:
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        self.end_line = end_line or line
        self.end_column = end_column or column
        self.snippet = snippet
        self.expected = list(expected)
        self.suggestions = list(suggestions)
        self.hint = hint
        self.filename = filename
        super().__init__(self.render())

    def __reduce__(self):  # picklable across process pools
        return (
            type(self),
            (self.code, self.message, self.line, self.column, self.snippet, self.expected,
             self.suggestions, self.hint, self.filename, self.end_line, self.end_column),
        )

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}" if self.line else self.filename

    def render(self) -> str:
        out = [f"{self.where}: error[{self.code}]: {self.message}"]
        if self.snippet:
            out.append(self.snippet)
        if self.expected:
            out.append(f"  expected one of: {', '.join(self.expected)}")
        if self.suggestions:
            out.append(f"  did you mean: {', '.join(self.suggestions)}?")
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()

    def to_json(self) -> dict:
        return {
            "code": self.code, "message": self.message, "line": self.line, "column": self.column,
            "end_line": self.end_line, "end_column": self.end_column, "expected": self.expected,
            "suggestions": self.suggestions, "hint": self.hint, "filename": self.filename,
        }


class DSLSyntaxError(DSLError):
    """The text is not a program of the grammar (reported by the parser)."""


class DSLEvaluationError(DSLError):
    """A checked program cannot be evaluated on this input (e.g. NEARBY_AT
    without a trace, or a body the trace does not have)."""


class DSLErrors(SimpatternsError):
    """All problems found in one program, in source order."""

    def __init__(self, errors: Iterable[DSLError]):
        self.errors: list[DSLError] = sorted(errors, key=lambda e: (e.line, e.column))
        super().__init__(self.render())

    def __reduce__(self):
        return (type(self), (self.errors,))

    def render(self) -> str:
        n = len(self.errors)
        head = f"{n} error{'s' if n != 1 else ''} in reward program"
        return head + ":\n\n" + "\n\n".join(e.render() for e in self.errors)

    def __str__(self) -> str:
        return self.render()

    def __iter__(self) -> Iterator[DSLError]:
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def __getitem__(self, i: int) -> DSLError:
        return self.errors[i]

    @property
    def codes(self) -> list[str]:
        return [e.code for e in self.errors]


def make_snippet(source: str, line: int, column: int, end_line: int = 0, end_column: int = 0) -> str:
    """The source line with a caret under ``column`` (``~`` to the end of the span)."""
    lines = source.splitlines() or [""]
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1]
    col0 = max(0, min(column - 1, len(text)))
    if end_line == line and end_column > column:
        width = max(1, min(end_column - 1, len(text)) - col0)
    elif end_line > line:
        width = max(1, len(text) - col0)
    else:
        width = 1
    # long one-line programs (LLM output): show a window around the caret
    lo = 0
    if len(text) > MAX_SNIPPET_WIDTH:
        lo = max(0, col0 - MAX_SNIPPET_WIDTH // 3)
        hi = min(len(text), lo + MAX_SNIPPET_WIDTH)
        shown = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")
        pad = 3 if lo else 0
    else:
        shown, pad = text, 0
    width = min(width, max(1, len(shown) - (col0 - lo) - pad))
    prefix = "".join(c if c == "\t" else " " for c in text[lo:col0])
    gutter = f"{line:>4} | "
    caret = " " * (len(gutter) - 2) + "| " + " " * pad + prefix + "^" + "~" * (width - 1)
    return f"{gutter}{shown}\n{caret}"


def error_at(
    code: str,
    message: str,
    span: Span | None,
    source: str,
    filename: str = "<program>",
    *,
    expected: Sequence[str] = (),
    suggestions: Sequence[str] = (),
    hint: str = "",
    cls: type[DSLError] = DSLError,
) -> DSLError:
    if span is None or span.line == 0:
        return cls(code, message, expected=expected, suggestions=suggestions, hint=hint, filename=filename)
    return cls(
        code,
        message,
        line=span.line,
        column=span.column,
        snippet=make_snippet(source, span.line, span.column, span.end_line, span.end_column),
        expected=expected,
        suggestions=suggestions,
        hint=hint,
        filename=filename,
        end_line=span.end_line,
        end_column=span.end_column,
    )


def close_matches(word: str, candidates: Iterable[str], n: int = 3, key=None) -> list[str]:
    """Candidates close to ``word``: difflib similarity on normalised text,
    then candidates sharing a whole word with it (``collision`` ->
    ``collision start``)."""
    key = key or normalize_label
    cands = list(dict.fromkeys(candidates))
    by_key: dict[str, str] = {}
    for c in cands:
        by_key.setdefault(key(c), c)
    w = key(word)
    out = [by_key[m] for m in difflib.get_close_matches(w, list(by_key), n=n, cutoff=0.6)]
    words = set(w.split())
    if words:
        for k, c in by_key.items():
            if len(out) >= n:
                break
            if c not in out and words & set(k.split()):
                out.append(c)
    return out[:n]
