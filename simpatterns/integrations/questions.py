"""What every harness task of the Q&A benchmark shares: the library and the template subset."""

from __future__ import annotations

from typing import Any

from simpatterns.qa.questions import Question
from simpatterns.qa.templates import parse_template_ids


def load_library(spec: str, trust_evolved: bool = False) -> Any:
    """'builtin' or a library directory."""
    from simpatterns.detectors.library import PatternLibrary

    return PatternLibrary.builtin() if spec == "builtin" else PatternLibrary.load(spec, trust_evolved=trust_evolved)


def as_list_text(value: Any) -> str:
    """A comma-separated parameter as text: ``inspect eval -T templates=1-17,22`` hands over a list."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def select(questions: list[Question], templates: str | list | None) -> list[Question]:
    """The questions of the templates in ``templates`` ('1-17,22', names, 'A3'); all when None.
    Raises ValueError naming the bad part, or when no question is left."""
    if templates is None or templates == "":
        return questions
    try:
        ids = set(parse_template_ids(as_list_text(templates)))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"templates: {exc.args[0]}") from None
    out = [q for q in questions if q.template in ids]
    if not out:
        raise ValueError(f"templates {templates!r}: no question uses them")
    return out


def answer_text(value: Any) -> str:
    """An answer (gold or parsed) as one string: object sets joined by commas."""
    return ", ".join(value) if isinstance(value, list) else str(value)
