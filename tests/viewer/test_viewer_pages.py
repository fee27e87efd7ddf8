"""`simpatterns view` end to end without a browser: what each page holds, size, companions, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from simpatterns.annotation import Annotation
from simpatterns.cli import app
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.trace import Trace


def page_data(path: Path) -> dict:
    text = path.read_text()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.DOTALL)
    assert m, "no data in the page"
    return json.loads(m.group(1))


def test_a_1000_frame_phyre_page_is_self_contained_and_well_under_1_mb(t19, tmp_path):
    out = tmp_path / "v.html"
    res = CliRunner().invoke(app, ["view", str(t19), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert out.stat().st_size < 500_000
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "the page loads something from the network"
    d = page_data(out)
    trace, ann = Trace.load(t19), Annotation.load(t19.with_name("t19.annotation.jsonl"))
    assert d["num_frames"] == trace.num_frames == 1001
    assert len(d["events"]) == ann.num_events  # every event, none decimated
    assert [(e["pattern"], e["frame"]) for e in d["events"]] == [(e.pattern, e.frame) for e in ann.events]
    assert {b["name"]: b["rgb"] for b in d["scene"]["bodies"]}["purple pad"] == "#4b4aa4"  # PHYRE's purple
    # an interval event is drawn as a bar of its length in frames
    airborne = next(e for e in d["events"] if e["pattern"] == "airborne")
    assert airborne["length"] == airborne["params"]["frames"] > 0 and airborne["bodies"] == [airborne["params"]["object"]]


def test_drawing_is_decimated_but_events_are_not(t19, tmp_path):
    out = tmp_path / "v.html"
    res = CliRunner().invoke(app, ["view", str(t19), "-o", str(out), "--max-frames", "100"])
    assert res.exit_code == 0, res.output
    d = page_data(out)
    frames = d["scene"]["frames"]
    assert len(frames) <= 101 and frames[0] == 0 and frames[-1] == 1000
    moving = [p for p in d["scene"]["position"] if len(p) > 1]
    assert moving and all(len(p) == len(frames) for p in moving)
    assert len(d["events"]) == Annotation.load(t19.with_name("t19.annotation.jsonl")).num_events


def test_bad_inputs_get_one_line_naming_the_file(t19, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["view", str(tmp_path / "missing.npz"), "-o", str(tmp_path / "v.html")])
    assert res.exit_code == 2 and "missing.npz" in res.output
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a trace")
    res = runner.invoke(app, ["view", str(bad), "-o", str(tmp_path / "v.html")])
    assert res.exit_code != 0 and "bad.npz" in res.output
    goal = tmp_path / "g.rwd"
    goal.write_text('TOUCHING("green ball", "blue ball")\n')  # template 00019 has no blue ball
    res = runner.invoke(app, ["view", str(t19), "--program", str(goal), "-o", str(tmp_path / "v.html")])
    assert res.exit_code != 0 and "blue ball" in res.output
    assert not (tmp_path / "v.html").exists()


def test_program_over_time_and_the_frame_deciding_each_clause(t19, tmp_path):
    from simpatterns.dsl import RewardProgram
    from simpatterns.viewer.data import prefix

    goal = tmp_path / "g.rwd"
    goal.write_text('AND(\n    TOUCHING("green ball", "purple pad", hold=0.05),\n'
                    '    NEVER(TOUCHING("red ball", "purple pad")),\n)\n')
    out = tmp_path / "v.html"
    res = CliRunner().invoke(app, ["view", str(t19), "--program", str(goal), "-o", str(out)])
    assert res.exit_code == 0, res.output
    p = page_data(out)["program"]
    trace = Trace.load(t19)
    program = RewardProgram.load(goal)
    final = program.evaluate(None, trace)
    assert (p["success"], p["score"]) == (final.success, final.score)
    assert p["over_time"]["frames"][-1] == 1000 and p["over_time"]["success"][-1] == final.success
    touch, never = p["clauses"]
    # TOUCHING with hold is settled once the touch has lasted long enough: before, it was not
    f = touch["decided"]
    assert 0 < f < 1000
    assert program.evaluate(None, prefix(trace, f + 1)).clauses[0].success
    assert not program.evaluate(None, prefix(trace, f)).clauses[0].success
    # NEVER is only decided by the whole rollout
    assert never["decided"] == 1000


def test_dataset_folder_gives_an_index_linking_one_page_per_trace(tmp_path):
    runner = CliRunner()
    data = tmp_path / "data"
    res = runner.invoke(app, ["dataset", "--templates", "0,19", "--variants", "1", "--actions", "solution,random:2",
                              "-o", str(data), "-q"])
    assert res.exit_code == 0, res.output
    index = tmp_path / "site" / "index.html"
    res = runner.invoke(app, ["view", str(data), "-o", str(index)])
    assert res.exit_code == 0, res.output
    rows = page_data(index)
    listed = [json.loads(x) for x in (data / "index.jsonl").read_text().splitlines()]
    assert sorted(r["file"] for r in rows) == sorted(r["file"] for r in listed)
    by_file = {r["file"]: r for r in listed}
    for r in rows:
        page = index.parent / r["page"]
        assert page.is_file()
        d = page_data(page)
        assert r["kind"] == by_file[r["file"]]["kind"] and r["success"] == by_file[r["file"]]["success"]
        assert r["events"] == len(d["events"]) == sum(r["counts"].values())
        assert d["num_frames"] == r["frames"]
        assert 'href="../index.html"' in page.read_text()
    # a program about template 00019's bodies: its pages show it, the others say why they do not
    goal = tmp_path / "g.rwd"
    goal.write_text('TOUCHING("green ball", "purple pad")\n')
    res = runner.invoke(app, ["view", str(data), "--program", str(goal), "-o", str(index)])
    assert res.exit_code == 0, res.output
    for r in page_data(index):
        page = index.parent / r["page"]
        assert ("program" in page_data(page)) == (r["template"] == "00019")
        assert ("names bodies this scene does not have" in page.read_text()) == (r["template"] != "00019")


def test_qa_run_shows_question_what_was_shown_answer_and_gold(tmp_path):
    from simpatterns.qa.questions import dataset_root, read_questions

    runner = CliRunner()
    data = tmp_path / "data"
    res = runner.invoke(app, ["qa", "generate", "--out", str(data), "--scenes", "2", "--questions-per-rollout", "4",
                              "--seed", "3", "-q"])
    assert res.exit_code == 0, res.output
    with ScriptedLLMServer(default=Reply("Thinking.\nANSWER: yes")) as server:
        res = runner.invoke(app, ["qa", "eval", str(data), "--out", str(tmp_path / "run"), "--llm", "openai",
                                  "--base-url", server.base_url, "--conditions", "annotation,frames", "-q"])
        assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["qa", "score", str(tmp_path / "run")]).exit_code == 0
    questions = read_questions(data)
    rollout = dataset_root(data) / questions[0].rollout
    mine = [q for q in questions if q.rollout == questions[0].rollout]
    out = tmp_path / "v.html"
    res = runner.invoke(app, ["view", str(rollout), "--qa", str(tmp_path / "run"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    d = page_data(out)
    assert d["cut_frames"] == sorted({q.cut_frame for q in mine if q.cut_frame is not None})
    for q in mine:
        assert json.dumps(q.text)[1:-1].replace("<", "&lt;")[:40] in text or q.text[:40] in text
    assert text.count('<div class="qa">') == 2 * len(mine)  # each question under both conditions
    assert text.count("ANSWER: yes") == 2 * len(mine)  # the raw answer of each
    assert "what the model was shown" in text and "annotation" in text.lower()
    # the frames condition showed pictures: the page has them, inline
    assert text.count('<img class="shown" src="data:image/png;base64,') >= len(mine)
    for q in mine:  # the span the model saw, as frame links
        assert f"it sees {q.window[0]:.2f}-{q.window[1]:.2f} s" in text


def test_agent_run_shows_the_attempts_on_the_traces_task(tmp_path):
    runner = CliRunner()
    run = tmp_path / "run"
    res = runner.invoke(app, ["agent", "eval", "--out", str(run), "--tasks", "00000:003", "--bins", "3",
                              "--seeds", "0", "--attempts", "4", "--agents", "random", "--cache", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    episodes = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    res = runner.invoke(app, ["simulate", "-t", "0", "-v", "3", "-o", str(tmp_path / "t.npz")])
    assert res.exit_code == 0, res.output
    out = tmp_path / "v.html"
    res = runner.invoke(app, ["view", str(tmp_path / "t.npz"), "--agent", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "task 00000:003" in text
    attempts = episodes[0]["attempts"]
    assert 0 < len(attempts) <= 4
    assert text.count("<tr><td>") >= len(attempts)
    for a in attempts:
        assert f"<td>{a['status']}</td>" in text


def test_a_rollout_stopped_at_success_is_decided_as_reward_eval_says(tmp_path):
    """PHYRE stops at success: what follows the last frame is known, so the last point of the
    curve is the program's verdict on the whole rollout."""
    from simpatterns.dsl import RewardProgram

    runner = CliRunner()
    assert runner.invoke(app, ["simulate", "-t", "19", "-o", str(tmp_path / "s.npz")]).exit_code == 0
    trace = Trace.load(tmp_path / "s.npz")
    assert trace.meta.get("stopped") == "success" and trace.num_frames < trace.horizon
    goal = tmp_path / "g.rwd"
    goal.write_text('TOUCHING("green ball", "purple pad", t=1.0)\n')
    out = tmp_path / "v.html"
    assert runner.invoke(app, ["view", str(tmp_path / "s.npz"), "--program", str(goal), "-o", str(out)]).exit_code == 0
    p = page_data(out)["program"]
    final = RewardProgram.load(goal).evaluate(None, trace)
    assert final.success and p["success"] and p["over_time"]["success"][-1]
    assert p["clauses"][0]["decided"] == trace.num_frames - 1  # the stop at success decides it


def test_odd_params_reach_the_page_as_strict_json(t19, tmp_path):
    """A NaN or a string that closes a script element in an event's params must not break the page."""
    from simpatterns.annotation import PatternEvent
    from simpatterns.viewer import TracePage

    trace = Trace.load(t19)
    ann = Annotation.from_events(
        [PatternEvent("odd", 5, {"object": "red ball", "speed": float("nan"), "note": "</script><b>x"})],
        num_frames=trace.num_frames, patterns=["odd"])
    out = TracePage(trace, "odd <page>", annotation=ann).write(tmp_path / "odd.html")
    text = out.read_text()
    assert "<title>odd &lt;page&gt;</title>" in text and "</script><b>" not in text
    (event,) = page_data(out)["events"]
    assert event["params"] == {"object": "red ball", "speed": None, "note": "</script><b>x"}


def test_pictures_use_phyre_s_own_colours(t19):
    """PHYRE's phyre/vis.py WAD_COLORS: its "purple" is #4b4aa4 (a dark blue) and its "green"
    #6bcebb (a teal); the PNG render and the page draw those, not the words' usual hues."""
    from simpatterns.simulators.phyre.render import render_frame
    from simpatterns.viewer.data import colour_hex

    phyre = {"red": "f34f46", "green": "6bcebb", "blue": "1877f2", "purple": "4b4aa4", "gray": "b9cad2",
             "black": "000000"}
    trace = Trace.load(t19)
    img = render_frame(trace, 0, size=256)
    w, h = trace.meta["world_size"]
    for name in ("green ball", "purple pad"):
        body = trace.body(name)
        i = trace.body_index(name)
        a = trace.angle[0, i]  # a ball's white spoke points along its angle: look the other way
        x, y = trace.position[0, i] - 0.5 * body.bounding_radius * np.array([np.cos(a), np.sin(a)])
        pixel = img.getpixel((int(x * 256 / w), int((h - y) * 256 / h)))
        assert "".join(f"{c:02x}" for c in pixel) == phyre[body.color]
        assert colour_hex(body.color) == "#" + phyre[body.color]
