"""The lm-evaluation-harness tasks: a real harness run (its local-chat-completions model against our
scripted server) sends our runner's messages and scores every question as `qa score` does."""

from __future__ import annotations

import json

import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.tasks import TaskManager

from simpatterns.integrations.lmeval import GROUP, TASKS, include_path
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.report import score_run
from simpatterns.qa.runner import EvalSettings, run_eval
from simpatterns.qa.scoring import find
from simpatterns.qa.scripted import random_rules


def _harness(server, tasks, metadata):
    manager = TaskManager(include_path=str(include_path()), include_defaults=False, metadata=metadata)
    return lm_eval.simple_evaluate(
        model="local-chat-completions", apply_chat_template=True, task_manager=manager, tasks=list(tasks),
        model_args=f"model={server.model},base_url={server.base_url}/chat/completions,num_concurrent=1,"
                   "max_retries=1,tokenizer_backend=None,eos_string=<|im_end|>", log_samples=True)


@pytest.mark.parametrize("condition", ["annotation", "objects"])
def test_harness_scores_equal_qa_score_on_the_same_answers(qa_dataset, builtin, tmp_path, condition):
    root, questions = qa_dataset
    builder = ContextBuilder(root, builtin)
    builder.prepare(questions, [condition])
    rules = [r for i, r in enumerate(random_rules(questions, builder, seed=9)) if i % 3]  # the rest: unparsable
    with ScriptedLLMServer(rules=rules, default=Reply("No idea.")) as server:
        client = make_client("openai", base_url=server.base_url)
        try:
            assert run_eval(questions, builder, client, tmp_path / "run", EvalSettings(conditions=[condition])).complete
        finally:
            client.close()
        ours = sorted(json.dumps(r["messages"], sort_keys=True) for r in server.requests)
        n = len(server.requests)
        res = _harness(server, [f"simpatterns_qa_{condition}"], {"questions": str(root)})
        theirs = sorted(json.dumps(r["messages"], sort_keys=True) for r in server.requests[n:])
    assert theirs == ours  # the same system and user messages reached the server

    rs = score_run(tmp_path / "run")
    graded = {g.qid: g for g in rs.graded}
    samples = res["samples"][f"simpatterns_qa_{condition}"]
    assert {s["doc"]["qid"] for s in samples} == set(graded)
    for s in samples:
        g = graded[s["doc"]["qid"]]
        assert (s["acc"], s["unparsable"]) == (float(g.correct), float(g.unparsable))
    metrics = res["results"][f"simpatterns_qa_{condition}"]
    overall = find(rs.scores, condition)
    assert metrics["acc,none"] == pytest.approx(overall.accuracy)
    assert metrics["unparsable,none"] == pytest.approx(overall.unparsable) and overall.unparsable > 0


def test_the_group_runs_every_text_condition_and_a_template_subset(qa_dataset):
    root, questions = qa_dataset
    templates = sorted({q.template for q in questions})[:3]
    with ScriptedLLMServer(default=Reply("ANSWER: yes")) as server:
        res = _harness(server, [GROUP], {"questions": str(root / "questions.jsonl"),
                                         "templates": ",".join(map(str, templates))})
    asked = [q for q in questions if q.template in templates]
    for task in TASKS:
        assert {s["doc"]["qid"] for s in res["samples"][task]} == {q.id for q in asked}
    want = sum(q.answer == "yes" for q in asked) / len(asked)
    assert res["results"][TASKS[0]]["acc,none"] == pytest.approx(want)


def test_missing_questions_are_named():
    manager = TaskManager(include_path=str(include_path()), include_defaults=False)
    with pytest.raises(ValueError, match="give the questions with --metadata"):
        manager.load([TASKS[0]])
