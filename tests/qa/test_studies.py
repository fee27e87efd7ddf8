"""Library studies with the scripted server: the library-size curve and leave-one-out importance
(API and CLI), with a model that answers right exactly when a given pattern is shown."""

from __future__ import annotations

import json

from PIL import Image
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.llm import make_client
from simpatterns.llm.testing import ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.report import write_report
from simpatterns.qa.scripted import marker_rules
from simpatterns.qa.studies import importance, library_curve, parse_sizes

MARKER = "collision start"  # fires in every rollout at frame 0 (bodies resting on the ground)


def _questions(questions, n=12):
    # questions that do not name the marker themselves ({PATTERN} templates could)
    return [q for q in questions if MARKER not in q.text][:n]


def test_library_curve_and_importance(dataset, builtin, tmp_path):
    root, questions = dataset
    qs = _questions(questions)
    builder = ContextBuilder(root, builtin)
    with ScriptedLLMServer(rules=marker_rules(qs, builder, f"{MARKER}:")) as server:
        client = make_client("openai", base_url=server.base_url, concurrency=4)
        curve = library_curve(qs, builder, client, tmp_path / "curve", parse_sizes("0,3,all", len(builtin)),
                              trials=2, seed=1)
        imp = importance(qs, builder, client, tmp_path / "imp", ["collision start", "grid cell path", "airborne"])
        client.close()
    summary = {p["size"]: p for p in curve["summary"]}
    assert sorted(summary) == [0, 3, len(builtin)]
    assert summary[0]["mean"] == 0.0 and summary[len(builtin)]["mean"] == 1.0
    assert summary[3]["trials"] == 2 and summary[0]["trials"] == 1
    for p in curve["points"]:  # right exactly when the sampled subset shows the marker pattern
        assert p["accuracy"] == (1.0 if MARKER in p["labels"] else 0.0)
        assert len(p["labels"]) == p["size"]
    rows = {r["label"]: r for r in imp["patterns"]}
    assert imp["baseline"] == 1.0
    assert rows["collision start"]["importance"] == 100.0 and rows["collision start"]["accuracy"] == 0.0
    assert "bounce" in rows["collision start"]["removed"]  # its dependents go with it
    assert builtin.dependents("collision start") == rows["collision start"]["removed"][1:]
    assert rows["grid cell path"]["importance"] == 0.0 and rows["grid cell path"]["removed"] == ["grid cell path"]
    md = write_report([tmp_path / "curve", tmp_path / "imp"], tmp_path / "report")
    text = md.read_text()
    assert "## Library-size curve" in text and "## Leave-one-out importance" in text
    for png in ("curve_library_curve.png", "imp_importance.png"):
        assert Image.open(tmp_path / "report" / png).size[0] > 500


def test_study_cli(dataset, builtin, tmp_path):
    root, questions = dataset
    qs = _questions(questions, 40)
    sub = tmp_path / "data"
    sub.mkdir()
    (sub / "questions.jsonl").write_text("".join(json.dumps(q.to_json()) + "\n" for q in qs[:8]))
    (sub / "rollouts").symlink_to(root / "rollouts")
    builder = ContextBuilder(sub, builtin)
    runner = CliRunner()
    with ScriptedLLMServer(rules=marker_rules(qs[:8], builder, f"{MARKER}:")) as server:
        common = ["--llm", "openai", "--base-url", server.base_url]
        res = runner.invoke(app, ["qa", "library-curve", str(sub), "--out", str(tmp_path / "c"), "--sizes", "0,all",
                                  "--subsets", "1", *common])
        assert res.exit_code == 0, res.output
        assert "library-size curve" in res.output and (tmp_path / "c" / "library_curve.png").is_file()
        res = runner.invoke(app, ["qa", "importance", str(sub), "--out", str(tmp_path / "i"), "--hold-out",
                                  "collision start,bounce", *common])
        assert res.exit_code == 0, res.output
        assert "+100.0" in res.output and (tmp_path / "i" / "importance.png").is_file()
        res = runner.invoke(app, ["qa", "importance", str(sub), "--out", str(tmp_path / "j"), "--hold-out", "nope",
                                  *common])
        assert res.exit_code == 2 and "not in the library: nope" in res.output
    res = runner.invoke(app, ["qa", "report", str(tmp_path / "c"), str(tmp_path / "i"), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert "2 plots" in res.output


def test_parse_sizes():
    assert parse_sizes("0, 2,all,4", 10) == [0, 2, 4, 10]
    assert parse_sizes("50", 10) == [10]
    try:
        parse_sizes("two", 10)
    except ValueError as exc:
        assert "'two'" in str(exc)
    else:
        raise AssertionError("expected a ValueError")
