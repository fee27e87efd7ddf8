"""`qa generate | eval | score | report` on the command line, and the data set's properties."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.qa.generate import GenerateConfig, generate_dataset, rollout_facts
from simpatterns.qa.questions import QuestionFormatError, read_questions
from simpatterns.qa.templates import QuestionRules, get_template
from simpatterns.trace import Trace


def test_data_set_properties(dataset, builtin):
    root, questions = dataset
    by_rollout = Counter(q.rollout_id for q in questions)
    assert len(by_rollout) == 10 and set(by_rollout.values()) == {10}
    for rid in by_rollout:  # ten different templates per rollout
        assert len({q.template for q in questions if q.rollout_id == rid}) == 10
    per_template = Counter(q.template for q in questions)
    assert len(per_template) == 27 and max(per_template.values()) - min(per_template.values()) <= 2
    yes = sum(q.answer == "yes" for q in questions if q.answer_type == "yesno")
    no = sum(q.answer == "no" for q in questions if q.answer_type == "yesno")
    assert abs(yes - no) <= 0.2 * (yes + no)
    info = json.loads((root / "dataset.json").read_text())
    assert info["thresholds"]["rest_speed"] == 1.0 and info["library"]["labels"] == builtin.order()
    kinds = Counter(r["kind"] for r in info["rollouts"])
    assert set(kinds) <= {"solution", "near-miss"} and kinds["solution"] > 0
    for q in questions[::7]:  # gold answers are what the template computes on the saved rollout
        tr = Trace.load(root / q.rollout)
        assert q.success == tr.success  # a near-miss is labelled by its real outcome
        rf = rollout_facts(tr, builtin, QuestionRules())
        assert get_template(q.template).answer(rf, q.slots, q.cut_frame) == q.answer
        assert q.stable in (True, False)
        if q.cut_frame is not None:
            assert q.window == [0.0, q.slots["tc"]] and q.cut_frame == round(q.slots["tc"] * 60)


def test_generation_is_seeded(tmp_path, builtin):
    cfg = GenerateConfig(scenes=3, seed=4, stable_check=False, question_templates=(1, 5, 18, 22, 27))
    a = generate_dataset(tmp_path / "a", cfg, builtin)
    b = generate_dataset(tmp_path / "b", cfg, builtin, workers=2)
    assert (tmp_path / "a" / "questions.jsonl").read_bytes() == (tmp_path / "b" / "questions.jsonl").read_bytes()
    assert {q.template for q in a} <= {1, 5, 18, 22, 27} and all(q.stable is None for q in b)


def test_bad_questions_file_names_the_line(tmp_path):
    p = tmp_path / "questions.jsonl"
    p.write_text('{"id": "a", "rollout": "x.npz", "template": 1, "answer_type": "integer", "text": "?", '
                 '"window": [0, 1], "answer": 1}\n{"id": "b", "rollout": "x.npz", "template": "one"}\n')
    with pytest.raises(QuestionFormatError, match=r"questions.jsonl:2: field 'template' must be int"):
        read_questions(p)
    p.write_text("{not json\n")
    with pytest.raises(QuestionFormatError, match=r"questions.jsonl:1:2: not JSON"):
        read_questions(p)


def test_cli_generate_eval_score_report(tmp_path):
    runner = CliRunner()
    data = tmp_path / "data"
    res = runner.invoke(app, ["qa", "generate", "--out", str(data), "--scenes", "3", "--questions-per-rollout", "4",
                              "--templates", "1-8,A18", "--no-stable", "--seed", "2", "-q"])
    assert res.exit_code == 0, res.output
    assert "12 questions on 3 rollouts" in res.output
    qs = read_questions(data)
    assert {q.template for q in qs} <= set(range(1, 9)) | {18}
    with ScriptedLLMServer(default=Reply("Thinking.\nANSWER: yes")) as server:
        res = runner.invoke(app, ["qa", "eval", str(data), "--out", str(tmp_path / "run"), "--llm", "openai",
                                  "--base-url", server.base_url, "--conditions", "annotation,state", "-q"])
        assert res.exit_code == 0, res.output
        assert "answered 24" in res.output and "random baseline" in res.output
        res = runner.invoke(app, ["qa", "eval", str(data), "--out", str(tmp_path / "run"), "--llm", "openai",
                                  "--base-url", server.base_url, "--conditions", "annotation", "-q"])
        assert res.exit_code == 0 and "answered 0 (already had 12)" in res.output
        res = runner.invoke(app, ["qa", "eval", str(data), "--out", str(tmp_path / "run"), "--llm", "openai",
                                  "--base-url", server.base_url, "--temperature", "0.5", "-q"])
        assert res.exit_code == 2 and "different settings" in res.output
        res = runner.invoke(app, ["qa", "eval", str(data), "--out", str(tmp_path / "x"), "--llm", "openai",
                                  "--base-url", server.base_url, "--conditions", "video"])
        assert res.exit_code == 2 and "unknown condition 'video'" in res.output
    assert (tmp_path / "run" / "transcript.jsonl").is_file()
    res = runner.invoke(app, ["qa", "score", str(tmp_path / "run")])
    assert res.exit_code == 0 and "scores.json" in res.output
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["responses"] == 24
    res = runner.invoke(app, ["qa", "report", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "run" / "report" / "report.md").is_file()
    res = runner.invoke(app, ["qa", "generate", "--out", str(tmp_path / "d2"), "--templates", "1,30"])
    assert res.exit_code == 2 and "1..27" in res.output
