"""Questions of the Q&A benchmark and their JSONL file.

A data set directory holds ``dataset.json`` (how it was generated),
``questions.jsonl`` (one `Question` per line) and ``rollouts/*.npz`` (the
traces the questions are about). Each line::

    {"id": "r007-q03", "rollout": "rollouts/T00012_V041_nearmiss0.npz", "rollout_id": "r007",
     "template": 18, "name": "will_pair_collide", "family": "prediction", "answer_type": "yesno",
     "slots": {"a": "red ball", "b": "green ball", "tc": 3.25}, "text": "Given the first part ...",
     "answer": "yes", "choices": null, "max_count": null,
     "window": [0.0, 3.25], "cut_frame": 195, "stable": true,
     "action_kind": "near-miss", "success": false}

``window`` is the visible time span in seconds (a prediction question shows
only up to its cut); ``choices`` lists the valid object answers of object
questions ("none" included where the template allows it); ``stable`` is
whether the answer survives a 1 px nudge of the action (null when not
checked).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write_lines

ANSWER_TYPES = ("integer", "percent", "object", "objects", "yesno")
FAMILIES = ("counts", "identification", "prediction")
QUESTIONS_FILE = "questions.jsonl"
DATASET_FILE = "dataset.json"
ROLLOUTS_DIR = "rollouts"
NONE = "none"
PERCENT_TOLERANCE = 5.0  # points: a percentage answer within this of the gold one is correct


class QuestionFormatError(SimpatternsError, ValueError):
    """A questions file is malformed; the message names file, line and field."""


@dataclass
class Question:
    id: str
    rollout: str
    rollout_id: str
    template: int
    name: str
    family: str
    answer_type: str
    slots: dict[str, Any]
    text: str
    answer: Any
    window: list[float]
    cut_frame: int | None = None
    choices: list[str] | None = None
    max_count: int | None = None
    stable: bool | None = None
    action_kind: str = ""
    success: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_prediction(self) -> bool:
        return self.cut_frame is not None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not d["extra"]:
            del d["extra"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "question") -> "Question":
        required = {"id": str, "rollout": str, "template": int, "answer_type": str, "text": str, "window": list}
        for key, typ in required.items():
            if not isinstance(d.get(key), typ):
                raise QuestionFormatError(f"{where}: field {key!r} must be {typ.__name__}, got {d.get(key)!r}")
        if d["answer_type"] not in ANSWER_TYPES:
            raise QuestionFormatError(f"{where}: field 'answer_type' is {d['answer_type']!r}, not one of "
                                      f"{', '.join(ANSWER_TYPES)}")
        if "answer" not in d:
            raise QuestionFormatError(f"{where}: field 'answer' is missing")
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in d.items() if k in known}
        kwargs.setdefault("rollout_id", d["rollout"])
        kwargs.setdefault("name", f"template_{d['template']}")
        kwargs.setdefault("family", "")
        kwargs.setdefault("slots", {})
        return cls(**kwargs)


def write_questions(path: str | os.PathLike, questions: Iterable[Question]) -> Path:
    return atomic_write_lines(path, (json.dumps(q.to_json(), ensure_ascii=False) for q in questions))


def read_questions(path: str | os.PathLike) -> list[Question]:
    """Questions of a ``questions.jsonl`` file or of a data set directory."""
    p = Path(path)
    if p.is_dir():
        p = p / QUESTIONS_FILE
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QuestionFormatError(f"{p}: cannot read questions ({exc.strerror or exc})") from None
    out = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionFormatError(f"{p}:{lineno}:{exc.colno}: not JSON ({exc.msg})") from None
        if not isinstance(d, dict):
            raise QuestionFormatError(f"{p}:{lineno}: a question is a JSON object")
        q = Question.from_json(d, where=f"{p}:{lineno}")
        if q.id in seen:
            raise QuestionFormatError(f"{p}:{lineno}: question id {q.id!r} is repeated")
        seen.add(q.id)
        out.append(q)
    return out


def dataset_root(path: str | os.PathLike) -> Path:
    """The data set directory of a questions file or directory (rollout paths are relative to it)."""
    p = Path(path)
    return p if p.is_dir() else p.parent
