"""The language-model agent end to end with the real openai client against the scripted server."""

from __future__ import annotations


import numpy as np
import pytest

from agent_tasks import SOLVABLE
from simpatterns.agents.episode import TaskContext, run_episode
from simpatterns.agents.feedback import FeedbackOptions, parse_choice
from simpatterns.agents.llm_agent import LLMAgent
from simpatterns.agents.menu import NOT_SOLVED
from simpatterns.agents.tasks import Task
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule
from simpatterns.qa.context import ANNOTATION_HEADER, SUMMARY_HEADER

ANNOTATION_MARK = ANNOTATION_HEADER


def last_text(body) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def choices(store):
    menu = store.get(SOLVABLE)
    solving = menu.choices[menu.solving[0]].id
    failing = next(c.id for k, c in enumerate(menu.choices) if menu.status(k) == NOT_SOLVED)
    return menu, solving, failing


def run(store, server, options, budget=5, seed=0):
    menu = store.get(SOLVABLE)
    with make_client("openai", base_url=server.base_url) as client:
        agent = LLMAgent(client, options)
        ctx = TaskContext(Task.from_id(SOLVABLE), menu, budget, seed, np.random.default_rng(seed))
        return run_episode(agent, ctx, agent.condition)


def annotation_reader(serve, solving, failing):
    """A scripted model: it tries `failing`; once shown an annotation it answers `solving`."""
    rule = Rule(match=lambda body: ANNOTATION_MARK in last_text(body), replies=[Reply(f"It rolled off.\nCHOICE: {solving}")])
    return serve(rules=[rule], default=Reply(f"Let me drop a ball first.\nCHOICE: {failing}"))


def test_model_that_reads_the_annotation_solves_on_attempt_two(store, serve):
    menu, solving, failing = choices(store)
    server = annotation_reader(serve, solving, failing)
    ep = run(store, server, FeedbackOptions(feedback="annotation"))
    assert ep.solved_at == 2 and ep.used == 2
    assert [a.status for a in ep.attempts] == ["not_solved", "solved"]
    assert [a.choice for a in ep.attempts] == [failing, solving]
    assert ep.attempts[0].raw.endswith(f"CHOICE: {failing}")
    first, second = server.requests
    assert ANNOTATION_MARK not in last_text(first)
    # the second request shows the first rollout's annotation (a timeline of events), under the menu
    shown = last_text(second)
    assert "Attempt 1 (" + failing + "): not solved" in shown and "Timeline" in shown
    assert menu.text() in second["messages"][1]["content"]
    assert ep.info["requests"] == 2


def test_without_the_annotation_the_same_model_never_solves(store, serve):
    _, solving, failing = choices(store)
    server = annotation_reader(serve, solving, failing)
    ep = run(store, server, FeedbackOptions(feedback="outcome"), budget=4)
    assert ep.solved_at is None and ep.used == 4
    # it repeats its choice: the repeats are wasted attempts, logged with the answer
    assert [a.status for a in ep.attempts] == ["not_solved", "wasted", "wasted", "wasted"]
    assert all(a.repeat_of == 1 and a.reason == "repeats attempt 1" for a in ep.attempts[1:])
    assert "Attempt 2 (" + failing + "): wasted (repeats attempt 1)" in last_text(server.requests[2])


def test_unparsable_and_off_menu_answers_are_wasted(store, serve):
    _, solving, _ = choices(store)
    server = serve("I am not sure.", "CHOICE: A999", f"CHOICE: {solving}")
    ep = run(store, server, FeedbackOptions(feedback="outcome"))
    assert [a.status for a in ep.attempts] == ["wasted", "wasted", "solved"]
    assert ep.attempts[0].reason == "no 'CHOICE: <id>' line in the answer" and ep.attempts[0].raw == "I am not sure."
    assert ep.attempts[1].reason == "A999 is not on the menu" and ep.attempts[1].choice == "A999"
    assert ep.solved_at == 3


def test_frames_are_sent_as_image_parts_and_the_scene_image_on_request(store, serve):
    _, solving, failing = choices(store)
    server = serve(f"CHOICE: {failing}", f"CHOICE: {solving}")
    ep = run(store, server, FeedbackOptions(feedback="frames", scene_view="objects+image", max_images=4))
    assert ep.solved_at == 2
    task_parts = server.requests[0]["messages"][1]["content"]
    kinds = [p["type"] for p in task_parts]
    assert kinds.count("image_url") == 1  # the initial scene, right after its caption
    k = kinds.index("image_url")
    assert task_parts[k - 1]["text"] == "The initial scene:"
    assert task_parts[k]["image_url"]["url"].startswith("data:image/png;base64,")
    feedback = server.requests[1]["messages"][-1]["content"]
    images = [p for p in feedback if p["type"] == "image_url"]
    assert len(images) == 4 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    assert ANNOTATION_MARK not in last_text(server.requests[1])


def test_summary_condition_asks_for_a_summary_then_shows_it(store, serve):
    _, solving, failing = choices(store)
    summary = Rule(contains="Summarise what happens", replies=[Reply("The red ball fell beside the green ball.")])
    server = serve(f"CHOICE: {failing}", f"CHOICE: {solving}", rules=[summary])
    ep = run(store, server, FeedbackOptions(feedback="summary"))
    assert ep.solved_at == 2 and ep.info["requests"] == 3
    assert "Timeline" in server.requests[1]["messages"][-1]["content"]  # the summary request reads the annotation
    shown = last_text(server.requests[2])
    assert f"{SUMMARY_HEADER}\nThe red ball fell beside the green ball." in shown and "Timeline" not in shown


@pytest.mark.parametrize("history, turns_shown", [("full", 3), ("windowed", 2), ("stateless", 1)])
def test_history_modes(store, serve, history, turns_shown):
    menu, _, _ = choices(store)
    failing = [c.id for k, c in enumerate(menu.choices) if menu.status(k) == NOT_SOLVED][:4]
    server = serve(*[f"CHOICE: {c}" for c in failing])
    run(store, server, FeedbackOptions(feedback="outcome", history=history, window=2), budget=4)
    last = server.requests[3]["messages"]
    assert sum(m["role"] == "assistant" for m in last) == turns_shown
    first_user = last[1]["content"]
    assert ("Earlier attempts:" in first_user) == (history == "windowed")
    if history == "windowed":
        assert f"Attempt 1 ({failing[0]}): not solved" in first_user


def test_parse_choice():
    assert parse_choice("thinking...\nCHOICE: A12") == ("A12", "")
    assert parse_choice("CHOICE: 7") == ("A7", "")
    assert parse_choice("choice = **a3**") == ("A3", "")
    assert parse_choice("CHOICE: A1\nno wait\nCHOICE: A2") == ("A2", "")
    assert parse_choice("A12")[0] is None


def test_feedback_is_built_as_the_qa_conditions(store, serve):
    """Every feedback condition shows the rollout as the Q&A condition of the same name shows a
    recording: the same pieces, in the same words (`qa.context.evidence_parts`)."""
    from simpatterns.agents.feedback import feedback_parts, scene_table
    from simpatterns.annotate import annotate
    from simpatterns.annotate.text import timeline_text
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.qa.context import evidence_parts, merge_parts
    from simpatterns.simulators.phyre import simulate

    menu, solving, failing = choices(store)
    scene = Task.from_id(SOLVABLE).scene
    trace = simulate(scene, menu.choices[menu.index(failing)].action).trace
    text = timeline_text(trace, annotate(trace, PatternLibrary.builtin()), 3000)
    for fb in ("frames", "annotation", "frames+annotation", "state"):
        opts = FeedbackOptions(feedback=fb, max_images=3, image_size=64)
        server = serve(f"CHOICE: {failing}", f"CHOICE: {solving}")
        ep = run(store, server, opts)
        assert ep.solved_at == 2
        expected = evidence_parts(fb, trace, opts, lambda: text)
        line = f"Attempt 1 ({failing}): not solved. The rollout ran {float(trace.time[-1]):.1f} s."
        sent = server.requests[1]["messages"][-1]["content"]
        assert sent == merge_parts([{"type": "text", "text": line}] + expected + [
            {"type": "text", "text": "Choose your next action. End with 'CHOICE: <id>'."}])
        assert feedback_parts(trace, opts, text) == expected
    state = server.requests[1]["messages"][-1]["content"]
    assert "Raw state at" in state and "velocity (vx, vy)" in state and "Timeline" not in state
    # the object table is the Q&A one: ids, colours, walls; no recording span before the scene runs
    table = scene_table(scene)
    assert "red ball" not in table  # not placed yet
    assert "green" in table and "static, scene border" in table and "Recording" not in table
    assert table in server.requests[0]["messages"][1]["content"]


def test_choice_grammar_is_sent_and_accepts_exactly_the_menu(store, serve):
    from simpatterns.llm.grammars import GBNF

    menu, solving, failing = choices(store)
    server = serve(f"CHOICE: {failing}", f"CHOICE: {solving}", profile="llama-server")
    with make_client("openai", base_url=server.base_url, grammar="auto") as client:
        agent = LLMAgent(client, FeedbackOptions(feedback="outcome"), choice_grammar=True)
        ep = run_episode(agent, TaskContext(Task.from_id(SOLVABLE), menu, 3, 0, np.random.default_rng(0)))
    assert ep.solved_at == 2
    sent = [r["grammar"] for r in server.requests]
    assert len(sent) == 2 and sent[0] == sent[1]
    g = GBNF.parse(sent[0])
    assert all(g.accepts(f"CHOICE: {c.id}") for c in menu.choices)
    assert not g.accepts(f"CHOICE: A{len(menu) + 1}") and not g.accepts(f"I think {solving}")
    # without the option no grammar goes out
    server = serve(f"CHOICE: {solving}", profile="llama-server")
    with make_client("openai", base_url=server.base_url, grammar="auto") as client:
        run_episode(LLMAgent(client, FeedbackOptions(feedback="outcome")),
                    TaskContext(Task.from_id(SOLVABLE), menu, 3, 0, np.random.default_rng(0)))
    assert "grammar" not in server.requests[0]
