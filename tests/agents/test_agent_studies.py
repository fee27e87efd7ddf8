"""Library studies on the agent benchmark with the scripted server: a "model" that picks the solving
choice exactly when the first rollout's annotation shows one pattern (``collision start``, which fires
in every failing rollout of these tasks), else repeats its failing choice. The curve and the
leave-one-out table then follow from which views show that pattern (API and CLI)."""

from __future__ import annotations

import json

import pytest
from PIL import Image
from typer.testing import CliRunner

from agent_tasks import ADDED, BINS, SOLVABLE
from simpatterns.agents.menu import NOT_SOLVED
from simpatterns.agents.metrics import auccess
from simpatterns.agents.report import write_report, write_study_report
from simpatterns.agents.runner import EvalConfig, make_conditions
from simpatterns.agents.studies import importance, library_curve, view_condition
from simpatterns.cli import app
from simpatterns.detectors.library import PatternLibrary
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer
from simpatterns.qa.scripted import last_user_text

MARKER = "collision start"
TASKS = (SOLVABLE, ADDED)
BUDGET = 3
SOLVED_AT_2 = auccess([2], 1)  # one task's AUCCESS when solved on its second attempt


def marker_model(store) -> ScriptedLLMServer:
    """Per task: the failing choice, until the last feedback shows a ``collision start`` event."""
    rules = []
    for tid in TASKS:
        menu = store.get(tid)
        template, variant = tid.split(":")
        head = f"Task (template {template}, variant {int(variant)})"
        solving = menu.choices[menu.solving[0]].id
        failing = next(c.id for k, c in enumerate(menu.choices) if menu.status(k) == NOT_SOLVED)

        def is_task(body, head=head) -> bool:
            first = body["messages"][1]["content"]
            return head in (first if isinstance(first, str) else first[0]["text"])

        rules.append(Rule(match=lambda b, t=is_task: t(b) and f"{MARKER}:" in last_user_text(b),
                          replies=[Reply(f"The {MARKER} events say where it went.\nCHOICE: {solving}")]))
        rules.append(Rule(match=is_task, replies=[Reply(f"Try this.\nCHOICE: {failing}")]))
    return ScriptedLLMServer(rules=rules)


@pytest.fixture(scope="module")
def lib():
    return PatternLibrary.builtin()


def test_library_curve_and_importance(store, menu_cache, lib, tmp_path):
    config = EvalConfig(setup=None, tasks=TASKS, budget=BUDGET, bins=BINS)
    [cond] = make_conditions(["llm"], ["annotation"], {"max_tokens": 64})
    n = len(lib)
    with marker_model(store) as server:
        client = make_client("openai", base_url=server.base_url)
        curve = library_curve(config, cond, client, tmp_path / "curve", [0, 5, n], trials=2, seed=3,
                              library=lib, cache_dir=menu_cache)
        imp = importance(config, cond, client, tmp_path / "imp", [MARKER, "grid cell path"], library=lib,
                         cache_dir=menu_cache)
        requests = len(server.requests)
        # a finished study resumes without a request
        again = library_curve(config, cond, client, tmp_path / "curve", [0, 5, n], trials=2, seed=3, library=lib,
                              cache_dir=menu_cache)
        assert len(server.requests) == requests and again["summary"] == curve["summary"]
        client.close()
    assert curve["metric"] == "AUCCESS" and curve["episodes"] == 2 and curve["condition"] == "llm/annotation"
    summary = {p["size"]: p for p in curve["summary"]}
    assert sorted(summary) == [0, 5, n] and summary[5]["trials"] == 2 and summary[0]["trials"] == 1
    assert summary[0]["mean"] == 0.0 and summary[n]["mean"] == pytest.approx(SOLVED_AT_2)
    for p in curve["points"]:  # solved on attempt 2 exactly when the subset shows the marker pattern
        assert p["AUCCESS"] == pytest.approx(SOLVED_AT_2 if MARKER in p["labels"] else 0.0)
        assert len(p["labels"]) == p["size"]
        # each view is an ordinary agent run whose condition shows only that subset
        run = json.loads((tmp_path / "curve" / p["run"] / "run.json").read_text())
        assert run["conditions"][0]["options"]["patterns"] == p["labels"]
    rows = {r["label"]: r for r in imp["patterns"]}
    assert imp["baseline"] == pytest.approx(SOLVED_AT_2) and imp["metric"] == "AUCCESS"
    assert rows[MARKER]["importance"] == pytest.approx(100.0) and rows[MARKER]["AUCCESS"] == 0.0
    assert rows[MARKER]["removed"] == [MARKER] + lib.dependents(MARKER) and "bounce" in rows[MARKER]["removed"]
    assert rows["grid cell path"]["importance"] == 0.0 and rows["grid cell path"]["removed"] == ["grid cell path"]

    # the study's page (the Q&A report's sections, scored by AUCCESS) and each view's own report
    md = write_study_report(tmp_path / "imp", tmp_path / "report")
    text = md.read_text()
    assert "## Leave-one-out importance" in text and "| pattern | removed | AUCCESS % | importance % |" in text
    assert f"| {MARKER} | {len(rows[MARKER]['removed'])} | 0.0 | +100.0 |" in text
    assert Image.open(tmp_path / "report" / "imp_importance.png").size[0] > 500
    text = write_study_report(tmp_path / "curve").read_text()
    assert "## Library-size curve" in text and "mean AUCCESS %" in text
    view = write_report(tmp_path / "imp" / "full_library_r0")
    assert view["summaries"][0].auccess == pytest.approx(SOLVED_AT_2)


def test_view_condition():
    [cond] = make_conditions(["llm"], ["summary"], {})
    v = view_condition(cond, ["bounce"], repeat=2)
    assert v.name == cond.name and v.options["patterns"] == ["bounce"] and v.options["sample_seed"] == 2
    assert "patterns" not in view_condition(v, None).options and "sample_seed" not in view_condition(v, None).options
    [random] = make_conditions(["random"])
    with pytest.raises(RuntimeError, match="language-model condition"):
        view_condition(random, None)


def test_study_cli(store, menu_cache, tmp_path):
    runner = CliRunner()
    with marker_model(store) as server:
        common = ["--tasks", ",".join(TASKS), "--bins", str(BINS), "--attempts", str(BUDGET), "--cache",
                  str(menu_cache), "--llm", "openai", "--base-url", server.base_url, "--max-tokens", "64"]
        res = runner.invoke(app, ["agent", "importance", "--out", str(tmp_path / "i"), "--hold-out",
                                  f"{MARKER},bounce", *common])
        assert res.exit_code == 0, res.output
        assert "| collision start |" in res.output and "+100.0" in res.output
        assert (tmp_path / "i" / "i_importance.png").is_file() and (tmp_path / "i" / "transcript.jsonl").is_file()
        res = runner.invoke(app, ["agent", "library-curve", "--out", str(tmp_path / "c"), "--sizes", "0,all",
                                  "--subsets", "1", "--cap", "10", *common])
        assert res.exit_code == 0, res.output
        assert "mean AUCCESS@10 %" in res.output and (tmp_path / "c" / "c_library_curve.png").is_file()
        res = runner.invoke(app, ["agent", "importance", "--out", str(tmp_path / "j"), "--hold-out", "nope", *common])
        assert res.exit_code == 2 and "not in the library: nope" in res.output
        res = runner.invoke(app, ["agent", "library-curve", "--out", str(tmp_path / "k"), "--feedback", "frames",
                                  *common])
        assert res.exit_code == 2 and "needs feedback that shows the annotation" in res.output
    res = runner.invoke(app, ["agent", "report", str(tmp_path / "c"), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert "## Library-size curve" in (tmp_path / "r" / "report.md").read_text()
