"""End to end through the real openai client against the project's scripted server: the oracle scores
100 % with annotations, random answers score near the random baseline, conditions build the right
messages, runs resume after a kill, Ctrl-C stops promptly, transcripts replay byte for byte, the report
renders."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder, ContextOptions
from simpatterns.qa.report import score_run, write_report
from simpatterns.qa.runner import RESPONSES_FILE, EvalSettings, read_responses, run_eval
from simpatterns.qa.scoring import find
from simpatterns.qa.scripted import last_user_text, oracle_rules, random_rules

ROOT = Path(__file__).resolve().parents[2]


def _eval(server, builder, questions, out, conditions, **kwargs):
    client = make_client("openai", base_url=server.base_url, transcript=kwargs.pop("transcript", None),
                         concurrency=kwargs.pop("concurrency", 4), **kwargs)
    try:
        return run_eval(questions, builder, client, out, EvalSettings(conditions=conditions),
                        run_info={"questions_path": str(builder.root / "questions.jsonl"),
                                  "llm": {"spec": "openai", "model": "scripted-model"}})
    finally:
        client.close()


def test_oracle_scores_100_with_annotations_and_report_renders(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    builder.prepare(questions, ["annotation"])
    with ScriptedLLMServer(rules=oracle_rules(questions, builder), default=Reply("I cannot tell.")) as server:
        out = _eval(server, builder, questions, tmp_path / "run", ["annotation", "objects"])
    assert out.complete and out.answered == 2 * len(questions)
    rs = score_run(tmp_path / "run")
    ann, obj = find(rs.scores, "annotation"), find(rs.scores, "objects")
    assert ann.n == len(questions) and ann.accuracy == 1.0 and ann.unparsable == 0.0
    assert obj.accuracy == 0.0 and obj.unparsable == 1.0  # the oracle needs the annotation
    for fam in ("counts", "identification", "prediction"):
        assert find(rs.scores, "annotation", f"family:{fam}").accuracy == 1.0
    md = write_report([tmp_path / "run"])
    text = md.read_text()
    assert "accuracy by condition and family" in text and "| annotation | 100.0" in text
    assert "random baseline" in text and "### Per template" in text and "Stable questions only" in text
    for png in ("run_accuracy.png", "run_templates.png", "run_accuracy_stable.png"):
        img = Image.open(md.parent / png)
        assert img.size[0] > 600 and img.size[1] > 300


def test_random_answers_score_near_the_random_baseline(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    accs = []
    for seed in range(3):
        with ScriptedLLMServer(rules=random_rules(questions, builder, seed=seed)) as server:
            _eval(server, builder, questions, tmp_path / f"run{seed}", ["objects"])
        rs = score_run(tmp_path / f"run{seed}")
        s = find(rs.scores, "objects")
        assert s.unparsable == 0.0
        accs.append(s.accuracy)
    chance = np.array([g.chance for g in rs.graded])
    sd = np.sqrt((chance * (1 - chance)).sum()) / chance.size / np.sqrt(len(accs))
    assert abs(np.mean(accs) - chance.mean()) < 3.5 * sd, (accs, chance.mean())
    # yes/no answers are balanced per template: always answering the majority gets little more than half
    assert 0.5 <= find(rs.scores, "objects", "family:prediction").majority <= 0.75


def test_conditions_build_their_messages(dataset, builtin):
    root, questions = dataset
    builder = ContextBuilder(root, builtin, options=ContextOptions(budget_chars=1500, fps=1.0, max_images=5,
                                                                  image_size=96))
    q = next(x for x in questions if x.cut_frame is None)
    frames = builder.messages(q, "frames")[1]["content"]
    images = [p for p in frames if p["type"] == "image_url"]
    assert 2 <= len(images) <= 5
    png = base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1])
    assert Image.open(io.BytesIO(png)).size == (96, 96)
    assert q.text in frames[-1]["text"] and "Annotation" not in frames[-1]["text"]
    both = builder.messages(q, "frames+annotation")[1]["content"]
    assert "Annotation" in both[-1]["text"] and sum(p["type"] == "image_url" for p in both) == len(images)
    state = builder.messages(q, "state")[1]["content"]
    ann = builder.messages(q, "annotation")[1]["content"]
    table = builder.table(q)
    assert state.startswith(table) and ann.startswith(table)
    assert len(state) - len(table) - len(builder.ask(q)) <= 1500 + 10
    assert "Raw state at" in state and "Timeline" in ann
    objects = builder.messages(q, "objects")[1]["content"]
    assert objects == f"{table}\n\n{builder.ask(q)}"
    system = builder.messages(q, "objects")[0]["content"]
    assert "at least 1 px/s" in system and "ANSWER:" in system  # the shared thresholds, the answer line
    for name in ("red ball", "ground", "left wall"):
        assert f". {name}:" in table


def test_summary_condition_summarises_once_per_rollout_and_span(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    qs = questions[:20]
    rules = [Rule(contains="Summarise what happens", replies=[Reply("SUMMARY: the red ball falls and rolls.")])]
    rules += [Rule(match=lambda body, q=q: "SUMMARY: the red ball falls" in last_user_text(body)
                   and q.text in last_user_text(body) and "Timeline" not in last_user_text(body),
                   replies=[Reply("ANSWER: yes")]) for q in qs]
    with ScriptedLLMServer(rules=rules) as server:
        out = _eval(server, builder, qs, tmp_path / "run", ["summary"])
        asked = [r for r in server.requests if "Summarise what happens" in r["messages"][-1]["content"]]
    assert out.complete
    assert len(asked) == len({(q.rollout, q.cut_frame) for q in qs})
    recs = read_responses(tmp_path / "run")
    assert len(recs) == 20 and all(r["summary"].startswith("SUMMARY") and r["response"] == "ANSWER: yes" for r in recs)


def test_replay_reproduces_responses_byte_for_byte(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    qs = questions[:25]
    with ScriptedLLMServer(rules=random_rules(qs, builder, seed=5)) as server:
        _eval(server, builder, qs, tmp_path / "a", ["annotation", "state"], transcript=tmp_path / "t.jsonl")
    client = make_client(f"replay:{tmp_path / 't.jsonl'}", concurrency=4)
    run_eval(qs, builder, client, tmp_path / "b", EvalSettings(conditions=["annotation", "state"]))
    client.close()
    a, b = (tmp_path / "a" / RESPONSES_FILE).read_bytes(), (tmp_path / "b" / RESPONSES_FILE).read_bytes()
    assert a == b and a.count(b"\n") == 50


def test_budget_stop_then_resume_and_a_torn_line(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    qs = questions[:30]
    with ScriptedLLMServer(default=Reply("ANSWER: no")) as server:
        out = _eval(server, builder, qs, tmp_path / "run", ["objects"], max_requests=12)
        assert out.stopped and "budget" in out.stopped and out.answered == 12
        with open(tmp_path / "run" / RESPONSES_FILE, "a") as fh:
            fh.write('{"qid": "torn')  # a kill in the middle of a write
        out = _eval(server, builder, qs, tmp_path / "run", ["objects"])
        assert out.complete and out.already == 12 and out.answered == 18
        assert len(server.requests) == 30
    lines = (tmp_path / "run" / RESPONSES_FILE).read_text().splitlines()
    assert [json.loads(x)["qid"] for x in lines] == [q.id for q in qs]  # rewritten in question order


def _cli(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.Popen([sys.executable, "-m", "simpatterns.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def _wait_lines(path: Path, n: int, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {n} lines")


def test_killed_run_resumes_and_ctrl_c_stops_promptly(dataset, tmp_path):
    root, questions = dataset
    run = tmp_path / "run"
    args = ["qa", "eval", str(root), "--out", str(run), "--llm", "openai", "--conditions", "objects",
            "--concurrency", "2", "--limit", "40", "-q"]
    with ScriptedLLMServer(default=Reply("ANSWER: yes", delay_s=0.05)) as server:
        proc = _cli(args + ["--base-url", server.base_url])
        _wait_lines(run / RESPONSES_FILE, 8)
        proc.kill()
        proc.wait(timeout=10)
        killed_at = len(read_responses(run))
        assert 8 <= killed_at < 40
        proc = _cli(args + ["--base-url", server.base_url])
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        assert f"already had {killed_at}" in out
        assert len(read_responses(run)) == 40
        assert len(server.requests) <= 40 + 2  # at most the requests in flight at the kill were asked twice
    # Ctrl-C: slow answers; the run stops at once and keeps what it had
    with ScriptedLLMServer(default=Reply("ANSWER: yes", delay_s=2.0)) as server:
        run2 = tmp_path / "run2"
        proc = _cli(["qa", "eval", str(root), "--out", str(run2), "--llm", "openai", "--conditions", "objects",
                     "--concurrency", "2", "-q", "--base-url", server.base_url])
        _wait_lines(run2 / RESPONSES_FILE, 2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - t0
        kept = len(read_responses(run2))
        # promptly: the questions left would take (left / 2 in flight) x 2 s; it must not wait for them
        left_s = (len(questions) - kept) / 2 * 2.0
        assert left_s >= 20 and took < left_s / 2, (took, left_s, out)
        assert proc.returncode == 130 and "run the same command to resume" in out
        assert kept >= 2


def test_a_server_that_refuses_everything_stops_the_run(dataset, builtin, tmp_path):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    with ScriptedLLMServer(default=Reply(status=400, error="model not loaded")) as server:
        out = _eval(server, builder, questions[:40], tmp_path / "run", ["objects"], concurrency=1)
        asked = len(server.requests)
    assert out.stopped and "failed in a row" in out.stopped and "model not loaded" in out.stopped
    assert out.failed == asked == 8 and out.answered == 0
