"""The Q&A benchmark as an Inspect task: ``inspect eval simpatterns/qa -T questions=DIR``.

One `Sample` per question: the messages our runner sends (`qa.context.ContextBuilder.messages`:
object table, the condition's evidence up to the question's cut, frames as images), the
same per-request seed, and our strict scorer (`qa.scoring.grade_run`) with its unparsable
accounting. `qa_metrics` reports what `simpatterns qa score` reports for the run: accuracy
overall, per family and per template, the unparsable share, the stable subset.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from simpatterns.integrations.inspect.messages import to_inspect
from simpatterns.integrations.questions import (
    answer_text,
    as_list_text,
    load_library,
    select,
)
from simpatterns.qa.context import ContextBuilder, ContextOptions, check_conditions
from simpatterns.qa.questions import QUESTIONS_FILE, Question, read_questions
from simpatterns.qa.runner import request_seed
from simpatterns.qa.scoring import Graded, grade_run, summarise


def samples(questions: list[Question], builder: ContextBuilder, condition: str) -> list[Sample]:
    """One Sample per question; under ``summary`` the input is step 1 (the summary request), which
    `qa_answer` replaces by the question once the model has summarised."""
    builder.prepare(questions, [condition])
    out = []
    for q in questions:
        messages = builder.summary_request_messages(q) if condition == "summary" else builder.messages(q, condition)
        out.append(Sample(id=q.id, input=to_inspect(messages), target=answer_text(q.answer),
                          metadata={"template": q.template, "family": q.family, "name": q.name,
                                    "answer_type": q.answer_type, "condition": condition, "cut_frame": q.cut_frame,
                                    "rollout": q.rollout, "stable": q.stable}))
    return out


@solver
def qa_answer(builder: ContextBuilder, questions: list[Question], condition: str, seed: int = 0,
              temperature: float = 0.0) -> Solver:
    """Ask one question as our runner does (same messages, same per-request seed); under ``summary``
    first ask for the summary (at ``temperature``, `ContextOptions.summary_max_tokens`), once per
    rollout and visible span, like the runner."""
    by_id = {q.id: q for q in questions}
    summaries: dict[str, asyncio.Future] = {}

    async def summary_of(q: Question) -> str:
        key = f"{q.rollout}@{q.cut_frame}"
        if key not in summaries:
            async def make() -> str:
                out = await get_model().generate(
                    to_inspect(builder.summary_request_messages(q)),
                    config=GenerateConfig(temperature=temperature, max_tokens=builder.options.summary_max_tokens,
                                          seed=request_seed(seed, key, "summary")))
                return out.completion
            summaries[key] = asyncio.ensure_future(make())
        return await summaries[key]

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        q = by_id[str(state.sample_id)]
        if condition == "summary":
            summary = await summary_of(q)
            state.metadata["summary"] = summary
            state.messages = to_inspect(builder.messages(q, condition, summary))
        return await generate(state, tool_calls="none", seed=request_seed(seed, q.id, condition))

    return solve


@metric
def qa_metrics() -> Metric:
    """Our `summarise` over the graded answers: accuracy (all, ``family:F``, ``template:N``,
    ``stable``), ``unparsable`` (share of answers with no valid ANSWER line) and the 95 %
    bootstrap interval of the overall accuracy."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        graded = [Graded(**s.score.metadata) for s in scores if s.score.metadata and "qid" in s.score.metadata]
        out: dict[str, float] = {}
        for gs in summarise(graded):
            if gs.subset == "stable":
                if gs.group == "all":
                    out["stable"] = gs.accuracy
                continue
            if gs.group == "all":
                out.update(accuracy=gs.accuracy, unparsable=gs.unparsable, ci_low=gs.ci[0], ci_high=gs.ci[1])
            else:
                out[gs.group] = gs.accuracy
        return out

    return compute


@scorer(metrics=[qa_metrics()])
def qa_scorer(questions: str) -> Scorer:
    """Grade the reply with our strict per-type parser; ``questions`` is the full questions file
    (majority baselines are taken over all of it, as `qa score` does)."""
    qs = read_questions(questions)

    async def score(state: TaskState, target: Target) -> Score:
        text = state.output.completion
        g = grade_run(qs, [{"qid": str(state.sample_id), "condition": state.metadata["condition"],
                            "response": text}])[0]
        return Score(value=1.0 if g.correct else 0.0, answer=None if g.unparsable else answer_text(g.parsed),
                     explanation=g.error or None, metadata=g.to_json())

    return score


@task
def qa(questions: str, condition: str = "annotation", templates: str | list | None = None, library: str = "builtin",
       trust_evolved: bool = False, budget_chars: int = 4000, fps: float = 2.0, max_images: int = 12,
       image_size: int = 256, temperature: float = 0.0, max_tokens: int = 512, seed: int = 0) -> Task:
    """The Q&A benchmark under one condition (annotation, frames, frames+annotation, state, summary,
    objects); ``questions``: a data set directory or its questions.jsonl (`simpatterns qa generate`);
    ``templates``: a subset such as '1-17,22'; ``library``: 'builtin' or a library directory. The
    other parameters are those of `simpatterns qa eval`."""
    if isinstance(condition, (list, tuple)) or "," in condition:
        raise ValueError(f"condition {as_list_text(condition)!r}: one condition per task (run one task per "
                         "condition)")
    (cond,) = check_conditions([condition])
    all_qs = read_questions(questions)
    asked = select(all_qs, templates)
    options = ContextOptions(budget_chars=budget_chars, fps=fps, max_images=max_images, image_size=image_size)
    builder = ContextBuilder.for_questions(questions, load_library(library, trust_evolved), options=options)
    questions_file = str(Path(questions) / QUESTIONS_FILE if Path(questions).is_dir() else Path(questions))
    return Task(dataset=MemoryDataset(samples(asked, builder, cond), name="simpatterns-qa"),
                solver=qa_answer(builder, asked, cond, seed, temperature),
                scorer=qa_scorer(questions_file),
                config=GenerateConfig(temperature=temperature, max_tokens=max_tokens),
                metadata={"condition": cond, "templates": None if templates is None else as_list_text(templates),
                          "library": library, "questions": questions})
