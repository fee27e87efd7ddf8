"""Scripted "models" for the project's local OpenAI-compatible test server (`llm.testing`).

- `oracle_rules`: answers each question correctly, but only when the request
  carries the question together with the annotation text that question must
  show (the truncated annotation for a prediction question) -- so a run with
  it scores 100 % in the annotation condition exactly when the pipeline
  builds, sends, parses and scores every prompt as designed; any other
  request gets an unparsable reply.
- `random_rules`: answers each question with a uniform draw from its answer
  space (the distribution the random baseline assumes).
- `marker_rules`: answers correctly when the request mentions a given text
  (e.g. a pattern label), wrongly otherwise: a model that a pattern helps.

They drive tests, the benchmark and demos through the real HTTP client.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simpatterns.llm.testing import Reply, Rule
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.parse import format_answer
from simpatterns.qa.questions import Question

UNSURE = "I cannot tell from what I was given."


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a request body (text parts joined)."""
    for m in reversed(body.get("messages") or []):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            return c
        if isinstance(c, list):
            return "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _rule(needles: Sequence[str], reply: str) -> Rule:
    def match(body: dict[str, Any]) -> bool:
        text = last_user_text(body)
        return all(n in text for n in needles)
    return Rule(match=match, replies=[Reply(reply)])


def oracle_rules(questions: Sequence[Question], builder: ContextBuilder) -> list[Rule]:
    rules = []
    for q in questions:
        needles = [builder.table(q), builder.annotation_text(q), q.text]
        rules.append(_rule(needles, f"The annotation answers this.\n{format_answer(q, q.answer)}"))
    return rules


def random_answer(q: Question, rng: np.random.Generator) -> Any:
    if q.answer_type == "yesno":
        return "yes" if rng.random() < 0.5 else "no"
    if q.answer_type == "object":
        return (q.choices or ["?"])[int(rng.integers(len(q.choices or ["?"])))]
    if q.answer_type == "objects":
        choices = list(q.choices or [])
        while True:
            pick = [c for c in choices if rng.random() < 0.5]
            if pick or not choices:
                return sorted(pick)
    if q.answer_type == "integer":
        return int(rng.integers(0, (q.max_count or 0) + 1))
    if q.answer_type == "percent":
        return round(float(rng.uniform(0, 100)), 1)
    raise ValueError(f"unknown answer type {q.answer_type!r}")


def random_rules(questions: Sequence[Question], builder: ContextBuilder, seed: int = 0) -> list[Rule]:
    rng = np.random.default_rng(seed)
    return [_rule([builder.table(q), q.text], f"A guess.\n{format_answer(q, random_answer(q, rng))}")
            for q in questions]


def wrong_answer(q: Question) -> Any:
    if q.answer_type == "yesno":
        return "no" if q.answer == "yes" else "yes"
    if q.answer_type == "integer":
        return int(q.answer) + 1
    if q.answer_type == "percent":
        return 100.0 if float(q.answer) < 50 else 0.0
    if q.answer_type == "object":
        others = [c for c in q.choices or [] if c != q.answer]
        return others[0] if others else "?"
    others = [c for c in q.choices or [] if c not in q.answer]
    return sorted(set(q.answer) | {others[0]}) if others else []


def marker_rules(questions: Sequence[Question], builder: ContextBuilder, marker: str) -> list[Rule]:
    """Right when the request contains ``marker``, wrong otherwise (rules in that order)."""
    rules = []
    for q in questions:
        needles = [builder.table(q), q.text]
        rules.append(_rule(needles + [marker], f"The {marker} events settle it.\n{format_answer(q, q.answer)}"))
        rules.append(_rule(needles, f"Hard to say.\n{format_answer(q, wrong_answer(q))}"))
    return rules
