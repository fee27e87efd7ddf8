"""Strict answer parsing and correctness, per answer type.

The answer is the text after the last line starting with ``ANSWER:`` (any
case); a reply without such a line counts only if the whole reply is one line
that is nothing but an answer ("No.", "42"): nothing is picked out of prose.
Light normalisation only: surrounding whitespace, quotes, backticks,
asterisks, a final full stop, a leading "the" before an object name, case.
Then, strictly per type:

- integer: digits only (``3``); exact match.
- percent: a number in [0, 100], optionally followed by ``%``; correct within
  `PERCENT_TOLERANCE` points; the absolute error is reported.
- object: one name of the question's choices (object list, ``none`` where
  allowed); exact.
- objects: names of the choices separated by commas (``and`` also separates);
  the set must be exact; Jaccard similarity is reported.
- yesno: ``yes`` or ``no``.

Anything else is *unparsable*: scored wrong and counted separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from simpatterns.qa.questions import PERCENT_TOLERANCE, Question

_ANSWER_LINE = re.compile(r"^\s*[*_#>\-\s]*answer\s*[*_]*\s*:\s*(.*)$", re.IGNORECASE)
_STRIP = " \t\"'`*_"
_INT = re.compile(r"^[+]?\d+$")
_PCT = re.compile(r"^[+]?(\d+(?:\.\d+)?)\s*%?$")


@dataclass(frozen=True)
class Parsed:
    ok: bool
    value: Any = None
    error: str = ""


@dataclass(frozen=True)
class GradedAnswer:
    parsed: Parsed
    correct: bool
    abs_error: float | None = None  # percent questions
    jaccard: float | None = None  # object-set questions


def answer_text(response: str) -> str | None:
    """What follows the last ``ANSWER:`` line, or None."""
    found = None
    for line in response.splitlines():
        m = _ANSWER_LINE.match(line)
        if m:
            found = m.group(1)
    return found


def _bare(response: str) -> str | None:
    """A reply that is a single line: the candidate bare answer."""
    lines = [ln for ln in response.splitlines() if ln.strip()]
    return lines[0] if len(lines) == 1 else None


def _clean(text: str) -> str:
    t = text.strip().strip(_STRIP).strip()
    if t.endswith("."):
        t = t[:-1].rstrip()
    return " ".join(t.split())


def _name(text: str, choices: list[str]) -> str | None:
    t = _clean(text).lower()
    if t.startswith("the "):
        t = t[4:]
    by_lower = {c.lower(): c for c in choices}
    return by_lower.get(t)


def parse_answer(q: Question, response: str) -> Parsed:
    raw = answer_text(response)
    if raw is None:
        bare = _bare(response)
        if bare is not None:
            p = _parse_text(q, _clean(bare))
            if p.ok:
                return p
        return Parsed(False, error="no ANSWER: line")
    return _parse_text(q, _clean(raw))


def _parse_text(q: Question, text: str) -> Parsed:
    if not text:
        return Parsed(False, error="empty answer")
    kind = q.answer_type
    if kind == "integer":
        if not _INT.match(text):
            return Parsed(False, error=f"not a whole number: {text[:40]!r}")
        return Parsed(True, int(text))
    if kind == "percent":
        m = _PCT.match(text)
        if not m or float(m.group(1)) > 100:
            return Parsed(False, error=f"not a percentage in [0, 100]: {text[:40]!r}")
        return Parsed(True, float(m.group(1)))
    if kind == "yesno":
        t = text.lower()
        if t not in ("yes", "no"):
            return Parsed(False, error=f"not yes or no: {text[:40]!r}")
        return Parsed(True, t)
    choices = list(q.choices or [])
    if kind == "object":
        name = _name(text, choices)
        if name is None:
            return Parsed(False, error=f"not an object of the list: {text[:40]!r}")
        return Parsed(True, name)
    if kind == "objects":
        items = [s for s in re.split(r",|\band\b|;", text) if s.strip()]
        names = [_name(s, choices) for s in items]
        if not names or any(n is None for n in names):
            return Parsed(False, error=f"not a list of objects of the list: {text[:60]!r}")
        return Parsed(True, sorted(set(n for n in names if n is not None)))
    raise ValueError(f"unknown answer type {kind!r}")


def grade(q: Question, response: str) -> GradedAnswer:
    p = parse_answer(q, response)
    if not p.ok:
        return GradedAnswer(p, False, abs_error=None, jaccard=0.0 if q.answer_type == "objects" else None)
    if q.answer_type == "percent":
        err = abs(float(p.value) - float(q.answer))
        return GradedAnswer(p, err <= PERCENT_TOLERANCE, abs_error=err)
    if q.answer_type == "objects":
        a, b = set(p.value), set(q.answer)
        jac = len(a & b) / len(a | b) if a | b else 1.0
        return GradedAnswer(p, a == b, jaccard=jac)
    return GradedAnswer(p, p.value == q.answer)


def format_answer(q: Question, value: Any) -> str:
    """The answer line a model should write for ``value``."""
    if q.answer_type == "objects":
        return "ANSWER: " + ", ".join(value)
    if q.answer_type == "percent":
        return f"ANSWER: {float(value):g}"
    return f"ANSWER: {value}"
