"""`simpatterns agent eval | report | menu | folds`: runs, resume, the report, an LLM run end to end."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agent_tasks import BINS, SOLVABLE
from simpatterns.agents.metrics import auccess
from simpatterns.agents.report import write_report
from simpatterns.agents.runner import EPISODES_FILE, EvalConfig, RunError, evaluate, make_conditions, read_run
from simpatterns.cli import app
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule
from simpatterns.qa.context import ANNOTATION_HEADER

TASKS = f"{SOLVABLE},00006:011"


def eval_args(run, cache, *extra):
    return ["agent", "eval", "--out", str(run), "--tasks", TASKS, "--bins", str(BINS), "--seeds", "0,1",
            "--attempts", "30", "--cache", str(cache), *extra]


def test_eval_resume_report(tmp_path, menu_cache):
    runner = CliRunner()
    run = tmp_path / "run"
    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "random,oracle"))
    assert res.exit_code == 0, res.output
    assert "8 episodes run, 0 already" in res.output
    rows = {line.split(" | ")[0].strip("| "): line for line in res.output.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"condition", "random", "oracle", "random (expected)"}
    assert "| oracle | 2 | 2 | 100.0 |" in rows["oracle"]
    for name in ("report.md", "summary.json", "success_vs_attempts.png", "success_curve.png", "run.json"):
        assert (run / name).stat().st_size > 0
    lines = (run / EPISODES_FILE).read_text().splitlines()
    assert len(lines) == 8 and [json.loads(x)["condition"] for x in lines] == ["oracle"] * 4 + ["random"] * 4

    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "random,oracle"))
    assert "0 episodes run, 8 already" in res.output  # resumed: nothing to do
    # a kill mid-write leaves a torn last line: dropped, and that episode runs again
    with open(run / EPISODES_FILE, "a") as fh:
        fh.write(lines[0][: len(lines[0]) // 2])
    (run / EPISODES_FILE).write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])
    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "random,oracle,anneal"))
    assert res.exit_code == 0, res.output
    assert "5 episodes run, 7 already" in res.output  # the torn random episode and 4 new anneal ones

    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "random", "--attempts", "50"))
    assert res.exit_code == 1 and "holds a run with a different config" in res.output

    summary = json.loads((run / "summary.json").read_text())
    conds = [c["condition"] for c in summary["conditions"]]
    assert conds == ["random", "oracle", "anneal"] and summary["expected_random"]["condition"] == "random (expected)"
    res = runner.invoke(app, ["agent", "report", str(run), "--cap", "5", "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0 and "AUCCESS@5" in res.output and (tmp_path / "rep" / "report.md").exists()


def test_cli_errors_and_helpers(tmp_path, menu_cache):
    runner = CliRunner()
    res = runner.invoke(app, eval_args(tmp_path / "r", menu_cache, "--agents", "memory"))
    assert res.exit_code == 1 and "the memory agent trains on a fold's training tasks" in res.output
    res = runner.invoke(app, eval_args(tmp_path / "r", menu_cache, "--agents", "telepathy"))
    assert res.exit_code == 2 and "unknown agent 'telepathy'" in res.output
    res = runner.invoke(app, ["agent", "eval", "--out", str(tmp_path / "r"), "--tasks", "00007:400"])
    assert res.exit_code == 2 and "template 00007 has variants 0..99" in res.output
    res = runner.invoke(app, ["agent", "menu", SOLVABLE, "--bins", str(BINS), "--cache", str(menu_cache),
                              "--solutions"])
    assert res.exit_code == 0 and res.output.startswith("A1: x=") and res.output.count("<- solves") >= 1
    res = runner.invoke(app, ["agent", "folds", "--seeds", "0"])
    assert "ball_within_template seed 0: train 1600, dev 400, test 500 (25 templates)" in res.output
    res = runner.invoke(app, ["agent", "report", str(tmp_path / "nothing")])
    assert res.exit_code == 1 and "not an agent run directory" in res.output


def test_annealer_programs_are_checked_before_any_episode(tmp_path, menu_cache):
    runner = CliRunner()
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "00002.rwd").write_text('# goal\nTOUCH("green ball", "purple floor")\n')
    run = tmp_path / "run"
    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "anneal", "--programs", str(progs)))
    assert res.exit_code == 2 and f"{progs / '00002.rwd'}:2:1" in res.output and "TOUCHING" in res.output
    assert not (run / EPISODES_FILE).exists()
    # parses, but names a body task 00002:002 does not have: the run stops on that task, naming it
    (progs / "00002.rwd").write_text('TOUCHING("purple jar", "red ball")\n')
    res = runner.invoke(app, eval_args(run, menu_cache, "--agents", "anneal", "--programs", str(progs)))
    assert res.exit_code == 1 and "scene 00002" in res.output and 'unknown body "purple jar"' in res.output


def test_memory_on_a_fold(tmp_path, menu_cache):
    config = EvalConfig(setup="ball_within_template", seeds=(0,), per_template=1, train_per_template=2, bins=2,
                        budget=20)
    out = evaluate(tmp_path / "run", config, make_conditions(["memory"]), cache_dir=menu_cache)
    assert len(out.episodes) == 25 and {e.task[:5] for e in out.episodes} == {f"{t:05d}" for t in range(25)}
    table = json.loads((tmp_path / "run" / "memory-seed0.json").read_text())
    assert table["train_tasks"] == 50 and len(table["solved"]["*"]) == 8


def test_llm_conditions_through_the_runner(tmp_path, menu_cache, serve):
    store_menu = __import__("simpatterns.agents.menu", fromlist=["MenuStore"]).MenuStore(menu_cache, BINS).get(SOLVABLE)
    solving = store_menu.choices[store_menu.solving[0]].id
    failing = next(c.id for k, c in enumerate(store_menu.choices) if store_menu.status(k) == -1)
    rule = Rule(match=lambda b: ANNOTATION_HEADER in str(b["messages"][-1]["content"]),
                replies=[Reply(f"CHOICE: {solving}")])
    server = serve(rules=[rule], default=Reply(f"CHOICE: {failing}"))
    config = EvalConfig(setup=None, tasks=(SOLVABLE,), seeds=(0, 1), bins=BINS, budget=5)
    conds = make_conditions(["llm"], ["outcome", "annotation"])
    transcript = tmp_path / "run" / "transcript.jsonl"
    out = evaluate(tmp_path / "run", config, conds, cache_dir=menu_cache,
                   client_factory=lambda d: make_client("openai", base_url=server.base_url, transcript=transcript))
    by = {(e.condition, e.seed): e for e in out.episodes}
    assert by[("llm/annotation", 0)].solved_at == 2 and by[("llm/annotation", 1)].solved_at == 2
    assert by[("llm/outcome", 0)].solved_at is None and by[("llm/outcome", 0)].count("wasted") == 4
    assert len(transcript.read_text().splitlines()) == len(server.requests) == 2 * 2 + 2 * 5
    report = write_report(tmp_path / "run")
    rows = {r[0]: r for r in report["rows"]}
    assert rows["llm/annotation"][3] == f"{100 * auccess([2], 1):.1f}"  # solved at attempt 2 on both seeds
    assert float(rows["llm/outcome"][3].split()[0]) == 0.0 and rows["llm/outcome"][-1] == "4.00"
    # the transcript replays the whole run, offline, to the same episodes
    replayed = evaluate(tmp_path / "replayed", config, conds, cache_dir=menu_cache,
                        client_factory=lambda d: make_client(f"replay:{transcript}"))
    assert [e.to_json() for e in replayed.episodes] == [e.to_json() for e in out.episodes]
    with pytest.raises(RunError, match="need a language model"):
        evaluate(tmp_path / "run2", config, conds, cache_dir=menu_cache)
    run, eps = read_run(tmp_path / "run")
    assert run["conditions"][1]["options"]["feedback"] == "annotation" and len(eps) == 4


def test_ctrl_c_keeps_finished_episodes_and_the_run_resumes(tmp_path, menu_cache, serve):
    import os
    import signal

    menu = __import__("simpatterns.agents.menu", fromlist=["MenuStore"]).MenuStore(menu_cache, BINS).get(SOLVABLE)
    solving = menu.choices[menu.solving[0]].id
    seen = {"n": 0}

    def ctrl_c_on_second_request(body) -> bool:
        seen["n"] += 1
        if seen["n"] == 2:  # a real SIGINT, delivered while the runner waits for the answer
            os.kill(os.getpid(), signal.SIGINT)
        return False

    server = serve(rules=[Rule(match=ctrl_c_on_second_request)], default=Reply(f"CHOICE: {solving}", delay_s=0.5))
    config = EvalConfig(setup=None, tasks=(SOLVABLE,), seeds=(0, 1), bins=BINS, budget=5)
    conds = make_conditions(["llm"], ["outcome"])
    with pytest.raises(KeyboardInterrupt):
        evaluate(tmp_path / "run", config, conds, cache_dir=menu_cache,
                 client_factory=lambda d: make_client("openai", base_url=server.base_url))
    _, eps = read_run(tmp_path / "run")
    assert [(e.seed, e.solved_at) for e in eps] == [(0, 1)]  # the finished episode is on disk
    again = serve(default=Reply(f"CHOICE: {solving}"))
    out = evaluate(tmp_path / "run", config, conds, cache_dir=menu_cache,
                   client_factory=lambda d: make_client("openai", base_url=again.base_url))
    assert (out.done, out.already) == (1, 1) and len(again.requests) == 1


def llm_args(run, cache, server, *extra):
    return ["agent", "eval", "--out", str(run), "--tasks", SOLVABLE, "--bins", str(BINS), "--seeds", "0",
            "--attempts", "3", "--cache", str(cache), "--agents", "llm", "--feedback", "outcome",
            "--base-url", server.base_url, "--no-report", *extra]


def test_choice_grammar_goes_out_wherever_the_server_takes_one(tmp_path, menu_cache, serve):
    menu = __import__("simpatterns.agents.menu", fromlist=["MenuStore"]).MenuStore(menu_cache, BINS).get(SOLVABLE)
    solving = menu.choices[menu.solving[0]].id
    runner = CliRunner()
    server = serve(default=Reply(f"CHOICE: {solving}"), profile="llama-server")
    res = runner.invoke(app, llm_args(tmp_path / "a", menu_cache, server, "--choice-grammar"))
    assert res.exit_code == 0, res.output
    # no --grammar needed: the server takes one, and says it applied it
    assert server.requests and all("grammar" in b for b in server.requests)
    assert all(s.grammar_applied for s in server.log)
    res = runner.invoke(app, llm_args(tmp_path / "b", menu_cache, server, "--choice-grammar", "--grammar", "off"))
    assert res.exit_code != 0 and "--choice-grammar" in res.output and "--grammar off" in res.output
    hosted = serve(default=Reply(f"CHOICE: {solving}"), profile="openai")
    res = runner.invoke(app, llm_args(tmp_path / "c", menu_cache, hosted, "--choice-grammar", "--model", "gpt-4o-mini"))
    assert res.exit_code == 0, res.output
    assert "takes no grammar here" in res.output and not any("grammar" in b for b in hosted.requests)


def test_an_image_scene_view_is_refused_before_any_episode_when_the_model_takes_no_images(tmp_path, menu_cache,
                                                                                          serve):
    server = serve(default=Reply("CHOICE: A1"), profile="llama-server")  # /props: modalities.vision false
    res = CliRunner().invoke(app, llm_args(tmp_path / "run", menu_cache, server, "--scene-view", "image"))
    assert res.exit_code == 1 and "does not take images" in res.output
    assert server.requests == []


def test_value_agent_through_the_harness_on_two_templates(tmp_path, menu_cache):
    """`--agents value:PATH`: on two templates each episode tries the menu best first by the
    model's own scores, once each, and the summary's AUCCESS is PHYRE's formula on those episodes."""
    torch = pytest.importorskip("torch")
    import math

    import numpy as np

    from simpatterns.agents.menu import MenuStore
    from simpatterns.agents.tasks import Task
    from simpatterns.value.model import NetConfig
    from simpatterns.value.scene import scene_image
    from simpatterns.value.train import Examples, TrainConfig, load_model, train

    tasks = TASKS.split(",")
    assert len({t.split(":")[0] for t in tasks}) == 2
    rng = np.random.default_rng(0)
    acts = rng.random((16, 3))
    cols = {"task": tasks * 8, "x": acts[:, 0], "y": acts[:, 1], "r": acts[:, 2],
            "label": (acts[:, 0] > 0.5).astype(float)}
    net = NetConfig(resolution=32, width=4, stages=2, action_hidden=16)
    train(Examples.from_columns(cols, net.resolution), tmp_path / "m", TrainConfig(steps=2, batch=8, net=net))
    model = tmp_path / "m" / "model.pt"
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["agent", "eval", "--out", str(run), "--tasks", TASKS, "--bins", str(BINS),
                                   "--seeds", "0", "--attempts", "30", "--cache", str(menu_cache),
                                   "--agents", f"random,value:{model}"])
    assert res.exit_code == 0, res.output
    episodes = [json.loads(x) for x in (run / EPISODES_FILE).read_text().splitlines()]
    value = {e["task"]: e for e in episodes if e["condition"].startswith("value:")}
    assert sorted(value) == sorted(tasks)

    loaded = load_model(model)  # the network the agent ranks with
    store = MenuStore(menu_cache, bins=BINS)
    solved = []
    for task_id, episode in value.items():
        task = Task.from_id(task_id)
        menu = store.cached(task)
        img = torch.from_numpy(scene_image(task.scene, net.resolution))
        with torch.no_grad():
            scores = loaded.rank_scores(img, torch.tensor([c.action for c in menu.choices],
                                                              dtype=torch.float32)).numpy()
        by_id = {c.id: float(s) for c, s in zip(menu.choices, scores)}
        tried = [a["choice"] for a in episode["attempts"]]
        assert len(set(tried)) == len(tried)  # no choice twice
        assert all(by_id[a] >= by_id[b] - 1e-6 for a, b in zip(tried, tried[1:]))  # best first
        assert episode["solved_at"] is None or episode["attempts"][-1]["status"] == "solved"
        solved.append(episode["solved_at"])
    weights = [math.log(k + 1) - math.log(k) for k in range(1, 101)]
    expected = sum(w * sum(1 for s in solved if s is not None and s <= k) / len(solved)
                   for k, w in enumerate(weights, start=1)) / sum(weights)
    summary = json.loads((run / "summary.json").read_text())
    (cond,) = [c for c in summary["conditions"] if c["condition"].startswith("value:")]
    assert cond["auccess"] == pytest.approx(expected, abs=1e-9)
