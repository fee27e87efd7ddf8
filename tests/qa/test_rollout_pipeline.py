"""`simpatterns.qa.pipeline` (what benchmarks/pipeline.py times): simulate, annotate, questions and
program labels per rollout give the same outcome inline and on a pool, with consistent counts."""

from __future__ import annotations

import pytest

from simpatterns.qa.pipeline import SHIPPED_GOALS, STAGES, pipeline_items, run_pipeline
from simpatterns.qa.templates import TEMPLATES


@pytest.fixture(scope="module")
def runs():
    items = pipeline_items(["00000", "00001"], variants=2)[::2] + pipeline_items(["00002"], variants=2)[1:]
    assert [it.kind for it in items] == ["solution", "solution", "random"]
    return items, run_pipeline(items), run_pipeline(items, workers=2)


def test_inline_and_pool_give_the_same_labels_questions_and_answers(runs):
    items, inline, pool = runs
    assert [o.item for o in inline.outcomes] == [o.item for o in pool.outcomes] == items
    for a, b in zip(inline.outcomes, pool.outcomes):
        assert (a.frames, a.success, a.events, a.labels, a.candidates) == (
            b.frames,
            b.success,
            b.events,
            b.labels,
            b.candidates,
        )
    assert inline.questions == pool.questions


def test_counts_are_consistent(runs):
    items, report, _ = runs
    for o in report.outcomes:
        assert o.error is None and o.frames > 0 and o.events > 0
        assert len(o.labels) == len(SHIPPED_GOALS) and all(0.0 <= score <= 1.0 for _, score, _ in o.labels)
        assert all(score == 1.0 for ok, score, _ in o.labels if ok)  # 1 exactly on success
        assert set(o.candidates) == {t.id for t in TEMPLATES} and set(o.cpu_s) == set(STAGES)
        assert o.maxrss_kb > 0
    assert report.outcomes[0].success and report.outcomes[1].success  # stored solutions solve
    per_rollout: dict[str, list] = {}
    for q in report.questions:
        per_rollout.setdefault(q.rollout_id, []).append(q)
        # the gold answer is one of the rollout's candidates for that template
        o = report.outcomes[int(q.rollout_id[1:])]
        assert any(c["slots"] == q.slots and c["answer"] == q.answer for c in o.candidates[q.template])
    assert len(per_rollout) == len(items)
    for rid, qs in per_rollout.items():
        o = report.outcomes[int(rid[1:])]
        assert len(qs) == min(10, sum(1 for c in o.candidates.values() if c))
        assert len({q.template for q in qs}) == len(qs)  # ten different templates
    assert len({q.id for q in report.questions}) == len(report.questions)
    assert set(report.stage_seconds()) == {*STAGES, "select questions"}
