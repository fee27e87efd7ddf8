"""The agent benchmark as an Inspect agent task: the menu as a tool, feedback as its result, our
episode rules (repeats wasted, budget), AUCCESS by `agents.metrics.score`."""

from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from simpatterns.agents.menu import MenuStore
from simpatterns.agents.metrics import score
from simpatterns.integrations.inspect import agent

TASKS = ("00000:001", "00002:003")
BINS = 3


@pytest.fixture(scope="module")
def menus(tmp_path_factory):
    cache = tmp_path_factory.mktemp("menus")
    store = MenuStore(cache, BINS, "full")
    return cache, {t: store.get(t) for t in TASKS}


def _usage(out: ModelOutput) -> ModelOutput:
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # else mockllm fetches a tokenizer
    return out


def _call(choice: str) -> ModelOutput:
    return _usage(ModelOutput.for_tool_call("mockllm", "choose", {"action_id": choice}))


def _text(text: str) -> ModelOutput:
    return _usage(ModelOutput.from_content("mockllm", text))


def _run(tmp_path, cache, script, **params):
    """``script``: task id -> the model's replies for that task, in order."""
    queues = {t: iter(r) for t, r in script.items()}

    def reply(messages, tools, tool_choice, config):
        first = messages[1].text
        return next(queues[next(t for t in script if f"variant {int(t.split(':')[1])})" in first
                                and f"template {t.split(':')[0]}" in first)])

    model = get_model("mockllm/model", custom_outputs=reply)
    (log,) = inspect_eval(agent(tasks=",".join(script), bins=BINS, menu_cache=str(cache), **params), model=model,
                          log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    return log


def test_tool_choices_follow_our_episode_rules_and_auccess_is_ours(menus, tmp_path):
    cache, menu = menus
    a, b = TASKS
    losing = {t: [c.id for k, c in enumerate(menu[t].choices) if k not in menu[t].solving] for t in TASKS}
    win_a = menu[a].choices[menu[a].solving[0]].id
    script = {
        # a loss, a repeat (wasted), a text answer with a CHOICE line, one with none (wasted), the win
        a: [_call(losing[a][0]), _call(losing[a][0]), _text(f"I think\nCHOICE: {losing[a][1]}"), _text("hmm"),
            _call(win_a)],
        b: [_call(c) for c in losing[b][:6]],  # never solves: the budget stops it
    }
    log = _run(tmp_path, cache, script, budget=5, feedback="state")
    meta = {str(s.id): s.scores["episode_scorer"].metadata for s in log.samples}
    assert meta[a]["solved_at"] == 5 and meta[a]["wasted"] == 2 and meta[a]["used"] == 5
    statuses = [x["status"] for x in meta[a]["attempts"]]
    assert statuses == ["not_solved", "wasted", "not_solved", "wasted", "solved"]
    assert meta[b]["solved_at"] is None and meta[b]["used"] == 5
    want = score({t: meta[t]["solved_at"] for t in TASKS}, {t: meta[t]["used"] for t in TASKS}, 5)
    metrics = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    assert metrics["auccess"] == pytest.approx(want.auccess) and metrics["auccess@5"] == pytest.approx(
        want.auccess_at[5])
    assert metrics["success@5"] == 0.5 and metrics["mean_attempts"] == 5.0

    sample = next(s for s in log.samples if str(s.id) == a)
    tool_results = [m for m in sample.messages if m.role == "tool"]
    assert "Attempt 1 (" in tool_results[0].text and "Raw state at" in tool_results[0].text  # the condition's feedback
    assert "repeats attempt 1" in tool_results[1].text and "SOLVED" in tool_results[-1].text
    assert len(sample.messages) <= 2 + 2 * 5  # the budget as the message limit
    assert read_eval_log(log.location).results.scores[0].metrics["auccess"].value == metrics["auccess"]


def test_the_model_stopping_early_gives_up_the_rest(menus, tmp_path):
    cache, menu = menus
    a = TASKS[0]
    loss = next(c.id for k, c in enumerate(menu[a].choices) if k not in menu[a].solving)
    script = {a: [_call(loss), _text("I give up."), _text("Still nothing."), _text("no")]}
    log = _run(tmp_path, cache, script, budget=3, feedback="outcome")
    meta = log.samples[0].scores["episode_scorer"].metadata
    assert meta["used"] == 3 and meta["solved_at"] is None and meta["wasted"] == 2


def test_bad_parameters():
    with pytest.raises(ValueError, match="give tasks"):
        agent()
    with pytest.raises(ValueError, match="summary"):
        agent(tasks=TASKS[0], feedback="summary")


def test_tasks_given_as_a_list(menus):
    """``inspect eval -T tasks=00000:001,00002:003`` hands the task a list."""
    cache, _ = menus
    task = agent(tasks=list(TASKS), bins=BINS, menu_cache=str(cache))
    assert [s.id for s in task.dataset] == list(TASKS)
