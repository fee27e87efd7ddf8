"""lm-evaluation-harness hooks of the simpatterns Q&A tasks (referenced by the YAML files beside it)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.questions import QUESTIONS_FILE, Question, read_questions
from simpatterns.qa.scoring import grade_run

TEXT_CONDITIONS = ("annotation", "state", "objects")  # one request, text only: what a generate-until task can ask


@lru_cache(maxsize=8)
def _questions(path: str) -> tuple[Question, ...]:
    return tuple(read_questions(path))


def load(questions: str | None = None, condition: str = "annotation", templates: str | None = None,
         library: str = "builtin", trust_evolved: bool = False, **_: Any) -> Any:
    """The ``custom_dataset`` of the tasks: one document per question (split ``test``) with the
    system prompt and the user message our runner sends under ``condition``."""
    import datasets

    from simpatterns.integrations.questions import load_library, select

    if not questions:
        raise ValueError("simpatterns_qa: give the questions with --metadata '{\"questions\": \"DIR\"}'")
    if condition not in TEXT_CONDITIONS:
        raise ValueError(f"simpatterns_qa: condition {condition!r} is not one of {', '.join(TEXT_CONDITIONS)}")
    path = Path(questions) / QUESTIONS_FILE if Path(questions).is_dir() else Path(questions)
    asked = select(list(_questions(str(path))), templates)
    builder = ContextBuilder.for_questions(path, load_library(library, trust_evolved))
    builder.prepare(asked, [condition])
    rows = []
    for q in asked:
        system, user = builder.messages(q, condition)
        rows.append({"qid": q.id, "template": q.template, "family": q.family, "condition": condition,
                     "questions": str(path.resolve()), "system": system["content"], "prompt": user["content"]})
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def doc_to_text(doc: dict[str, Any]) -> str:
    return doc["prompt"]


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """Our strict grade of the generated answer: ``acc`` (correct) and ``unparsable``."""
    g = grade_run(_questions(doc["questions"]), [{"qid": doc["qid"], "condition": doc["condition"],
                                                   "response": results[0]}])[0]
    return {"acc": float(g.correct), "unparsable": float(g.unparsable)}
