"""The Q&A benchmark as an Inspect task: real Inspect evaluations (its mock model, and its
OpenAI-compatible provider against our scripted server) score every question as `qa score` does."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from simpatterns.integrations.inspect import qa
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.parse import format_answer, grade
from simpatterns.qa.report import score_run
from simpatterns.qa.runner import EvalSettings, read_responses, run_eval
from simpatterns.qa.scoring import find
from simpatterns.qa.scripted import random_rules, wrong_answer

UNSURE = "I cannot tell from this."


def _output(text: str) -> ModelOutput:
    out = ModelOutput.from_content("mockllm", text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # else mockllm fetches a tokenizer
    return out


def _run_inspect(task, model, log_dir):
    (log,) = inspect_eval(task, model=model, log_dir=str(log_dir), display="none")
    assert log.status == "success", log.error
    return log


def _request(body: dict) -> str:
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    return json.dumps([body["messages"], body.get("seed"), body.get("temperature"), limit], sort_keys=True)


def _per_sample(log) -> dict[str, tuple[float, bool]]:
    return {str(s.id): (s.scores["qa_scorer"].value, s.scores["qa_scorer"].metadata["unparsable"])
            for s in log.samples}


def test_mock_model_scores_like_our_parser_and_the_log_reads_back(qa_dataset, tmp_path):
    root, questions = qa_dataset
    replies = {}
    for i, q in enumerate(questions):  # right, wrong and unparsable answers
        replies[q.text] = [format_answer(q, q.answer), format_answer(q, wrong_answer(q)), UNSURE][i % 3]

    def reply(messages, tools, tool_choice, config):
        text = messages[-1].text
        return _output(next(r for t, r in replies.items() if t in text))

    log = _run_inspect(qa(questions=str(root), condition="annotation"),
                       get_model("mockllm/model", custom_outputs=reply), tmp_path / "logs")
    per = _per_sample(log)
    assert set(per) == {q.id for q in questions}
    for q in questions:
        g = grade(q, replies[q.text])
        assert per[q.id] == (float(g.correct), not g.parsed.ok)
    metrics = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    assert metrics["accuracy"] == pytest.approx(sum(v for v, _ in per.values()) / len(per))
    assert metrics["unparsable"] == pytest.approx(sum(u for _, u in per.values()) / len(per))
    assert 0 < metrics["accuracy"] < 1 and metrics["unparsable"] > 0
    for fam in {q.family for q in questions}:
        ids = [q.id for q in questions if q.family == fam]
        assert metrics[f"family:{fam}"] == pytest.approx(sum(per[i][0] for i in ids) / len(ids))
    for t in {q.template for q in questions}:
        assert f"template:{t}" in metrics

    on_disk = read_eval_log(log.location)
    assert on_disk.status == "success" and len(on_disk.samples) == len(questions)
    assert {str(s.id): s.scores["qa_scorer"].value for s in on_disk.samples} == {k: v for k, (v, _) in per.items()}


@pytest.mark.parametrize("condition", ["annotation", "state", "summary"])
def test_inspect_equals_qa_eval_and_qa_score_on_the_same_server(qa_dataset, builtin, tmp_path, condition):
    root, questions = qa_dataset
    builder = ContextBuilder(root, builtin)
    builder.prepare(questions, [condition])
    rules = [r for i, r in enumerate(random_rules(questions, builder, seed=5)) if i % 4]  # the rest: unparsable

    with ScriptedLLMServer(rules=rules, default=Reply(UNSURE)) as server:
        client = make_client("openai", base_url=server.base_url, concurrency=2)
        try:
            outcome = run_eval(questions, builder, client, tmp_path / "run", EvalSettings(conditions=[condition]))
        finally:
            client.close()
        assert outcome.complete
        ours = [_request(r) for r in server.requests]
        n = len(server.requests)
        model = get_model(f"openai-api/scripted/{server.model}", base_url=server.base_url, api_key="unused")
        log = _run_inspect(qa(questions=str(root), condition=condition), model, tmp_path / "logs")
        theirs = [_request(r) for r in server.requests[n:]]
    # the same requests reached the server: messages (cut included), seed, temperature, token limit
    assert sorted(theirs) == sorted(ours)

    rs = score_run(tmp_path / "run")
    per = _per_sample(log)
    graded = {g.qid: g for g in rs.graded}
    assert set(per) == set(graded)
    assert {k: (float(g.correct), g.unparsable) for k, g in graded.items()} == per
    stored = {r["qid"]: r["response"] for r in read_responses(tmp_path / "run")}
    assert {str(s.id): s.output.completion for s in log.samples} == stored
    metrics = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    overall = find(rs.scores, condition)
    assert metrics["accuracy"] == pytest.approx(overall.accuracy)
    assert metrics["unparsable"] == pytest.approx(overall.unparsable) and overall.unparsable > 0
    assert (metrics["ci_low"], metrics["ci_high"]) == pytest.approx(overall.ci)
    for s in rs.scores:
        if s.condition == condition and s.subset == "all" and s.group != "all":
            assert metrics[s.group] == pytest.approx(s.accuracy), s.group
    stable = find(rs.scores, condition, "all", "stable")
    if stable is not None:
        assert metrics["stable"] == pytest.approx(stable.accuracy)


def test_template_subset_and_prediction_cut(qa_dataset, tmp_path):
    root, questions = qa_dataset
    seen: list[str] = []

    def reply(messages, tools, tool_choice, config):
        seen.append(messages[-1].text)
        return _output(UNSURE)

    templates = sorted({q.template for q in questions})[:2]
    spec = ",".join(str(t) for t in templates)
    log = _run_inspect(qa(questions=str(root / "questions.jsonl"), condition="objects", templates=spec),
                       get_model("mockllm/model", custom_outputs=reply), tmp_path / "logs")
    asked = [q for q in questions if q.template in templates]
    assert {str(s.id) for s in log.samples} == {q.id for q in asked}
    assert log.results.scores[0].metrics["unparsable"].value == 1.0
    for q in asked:
        text = next(t for t in seen if q.text in t)
        if q.cut_frame is not None:  # a prediction question says where the recording stops
            assert f"0.00 to {q.window[1]:.2f} s only" in text
        else:
            assert "only; the simulation goes on" not in text


def test_list_parameters_as_inspect_passes_them(qa_dataset):
    """``-T templates=1-3,7`` reaches the task as a list."""
    root, questions = qa_dataset
    templates = sorted({q.template for q in questions})[:2]
    task = qa(questions=str(root), condition="objects", templates=[str(templates[0]), templates[1]])
    assert {s.id for s in task.dataset} == {q.id for q in questions if q.template in templates}
    with pytest.raises(ValueError, match="one condition per task"):
        qa(questions=str(root), condition=["annotation", "state"])


def test_bad_parameters_name_what_is_wrong(qa_dataset):
    root, _ = qa_dataset
    with pytest.raises(ValueError, match="templates"):
        qa(questions=str(root), templates="99")
    with pytest.raises(ValueError, match="one condition per task"):
        qa(questions=str(root), condition="annotation,state")
    with pytest.raises(ValueError, match="unknown condition"):
        qa(questions=str(root), condition="telepathy")


def test_frames_arrive_as_images_and_summary_asks_once_per_rollout_and_cut(qa_dataset, tmp_path):
    from inspect_ai.log import resolve_sample_attachments
    from inspect_ai.model import ContentImage

    root, questions = qa_dataset
    asked: list[list] = []

    def reply(messages, tools, tool_choice, config):
        asked.append(messages)
        last = messages[-1].text
        return _output("The ball falls." if "Summarise what happens" in last else UNSURE)

    model = get_model("mockllm/model", custom_outputs=reply)
    log = _run_inspect(qa(questions=str(root), condition="frames", image_size=64, max_images=2), model,
                       tmp_path / "frames")
    for s in map(resolve_sample_attachments, log.samples):  # the log keeps images as attachments
        images = [c for m in s.messages if m.role == "user" and not isinstance(m.content, str)
                  for c in m.content if isinstance(c, ContentImage)]
        assert len(images) == 2 and images[0].image.startswith("data:image/png;base64,")

    asked.clear()
    log = _run_inspect(qa(questions=str(root), condition="summary"), model, tmp_path / "summary")
    summaries = [m for m in asked if "Summarise what happens" in m[-1].text]
    assert len(summaries) == len({(q.rollout, q.cut_frame) for q in questions})
    answers = [m for m in asked if "Summarise what happens" not in m[-1].text]
    assert len(answers) == len(questions) and all("The ball falls." in m[-1].text for m in answers)
