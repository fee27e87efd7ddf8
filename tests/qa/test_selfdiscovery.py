"""Self-discovery with Q&A retention: a proposed pattern is kept only if held-out accuracy rises by the
margin, and the run records why each candidate was kept or dropped (scripted server, real sandbox)."""

from __future__ import annotations

import json

from simpatterns.evolve.config import EvolveConfig
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.scripted import marker_rules
from simpatterns.qa.selfdiscovery import SelfDiscoveryConfig, reasoning_texts, self_discover, split_rollouts


def test_split_is_seeded_and_leaves_three_to_discover_on(dataset):
    _, questions = dataset
    a = split_rollouts(questions, 0.5, seed=3)
    assert a == split_rollouts(questions, 0.5, seed=3)
    disc, held = a
    assert len(disc) == 5 and len(held) == 5 and not set(disc) & set(held)
    disc, held = split_rollouts(questions, 0.95, seed=3)
    assert len(disc) == 3


# runs, but its events sit at fixed frames unrelated to what happens: no evidence, so the evolver rejects it
TICKER = '''import numpy as np

PATTERN = "ticker"
DESCRIPTION = "Fires every 37 frames."
DEPENDS = []
PARAMS = ["object"]
BODY_PARAMS = ["object"]


def detect(trace, events):
    first = trace.names[int(np.flatnonzero(trace.dynamic_mask)[0])]
    return [(f, {"object": first}) for f in range(7, trace.num_frames, 37)]
'''


def test_kept_only_if_heldout_accuracy_improves(dataset, builtin, tmp_path):
    """The evolver's own acceptance (the default evidence fitness, theta 3 sd) decides which proposals become
    candidates; the held-out Q&A decides which candidates stay."""
    root, questions = dataset
    qs = [q for q in questions if q.template not in (2, 22)]  # no question names a pattern
    base = builtin.subset(["collision start", "collision end", "task complete"])
    proposal = json.dumps([{"label": "airborne", "description": "A dynamic body touches nothing for a while."},
                           {"label": "rebound", "description": "A body hits another and bounces back."},
                           {"label": "ticker", "description": "Something happens every 37 frames."},
                           {"label": "wall graze", "description": "A body brushes a wall."}])

    def answer(code: str) -> Reply:
        return Reply("```python\n" + code + "```")

    rules = [Rule(contains="Propose up to", replies=[Reply(proposal)]),
             Rule(contains="Pattern to detect: 'airborne'", replies=[answer(builtin.get("airborne").source)]),
             Rule(contains="Pattern to detect: 'rebound'",
                  replies=[answer(builtin.get("bounce").source.replace('"bounce"', '"rebound"'))]),
             Rule(contains="Pattern to detect: 'ticker'", replies=[answer(TICKER)]),
             Rule(contains="Pattern to detect: 'wall graze'", replies=[Reply("no code today")])]
    builder = ContextBuilder(root, base)
    # the Q&A "model" is right exactly when the annotation shows airborne events
    rules += marker_rules(qs, builder, "airborne:")
    ecfg = EvolveConfig(samples_per_label=2, batch_size=2, seed=5, sandbox=SandboxLimits(timeout_s=5, smoke_timeout_s=2))
    assert ecfg.fitness.kind == "evidence" and ecfg.fitness.resolved().theta == 3.0
    cfg = SelfDiscoveryConfig(k=4, margin=0.05, seed=1, evolve=ecfg)
    with ScriptedLLMServer(rules=rules) as server:
        client = make_client("openai", base_url=server.base_url, concurrency=4)
        record = self_discover(qs, root, base, client, tmp_path / "sd", cfg)
        client.close()
        asked = [r for r in server.requests if "Propose up to" in r["messages"][-1]["content"]]
    # the reasoning of the Q&A run reached the proposal prompt
    assert len(asked) == 1 and "Reasoning: Hard to say." in asked[0]["messages"][-1]["content"]
    decisions = {d["label"]: d for d in record["rounds"][0]["decisions"]}
    assert set(decisions) == {"airborne", "rebound", "ticker", "wall graze"}
    airborne = decisions["airborne"]  # accepted by the evolver and the answers improve: kept
    assert airborne["kept"] and airborne["stage"] == "q&a" and airborne["fitness"] > 3.0
    assert airborne["accuracy_without"] == 0.0 and airborne["accuracy_with"] == 1.0 and airborne["gain"] >= 0.05
    assert airborne["heldout_questions"] == sum(q.rollout_id in record["heldout_rollouts"] for q in qs)
    rebound = decisions["rebound"]  # accepted by the evolver, but the answers do not improve: dropped
    assert not rebound["kept"] and rebound["stage"] == "q&a" and rebound["fitness"] > 3.0
    assert rebound["gain"] == 0.0 and "< margin" in rebound["why"]
    ticker = decisions["ticker"]  # runs, but the evidence fitness rejects it: never asked about
    assert not ticker["kept"] and ticker["stage"] == "discovery" and "does not exceed theta 3" in ticker["why"]
    assert not decisions["wall graze"]["kept"] and decisions["wall graze"]["stage"] == "discovery"
    saved = json.loads((tmp_path / "sd" / "decisions.json").read_text())
    assert saved["rounds"][0]["library"] == base.order() + ["airborne"]
    assert json.loads((tmp_path / "sd" / "library" / "library.json").read_text())["patterns"][-1]["label"] == "airborne"
    asked_about = sorted(p.name for p in (tmp_path / "sd" / "round0").glob("heldout_with_*"))
    assert asked_about == ["heldout_with_airborne", "heldout_with_rebound"]


def test_reasoning_texts_put_wrong_answers_first(dataset):
    _, questions = dataset
    qs = [q for q in questions if q.answer_type == "yesno"][:4]
    responses = [{"qid": q.id, "condition": "annotation",
                  "response": f"because {i}\nANSWER: {q.answer if i % 2 else ('no' if q.answer == 'yes' else 'yes')}"}
                 for i, q in enumerate(qs)]
    texts = reasoning_texts(qs, responses, 3)
    assert len(texts) == 3 and texts[0].endswith("(wrong)") and texts[1].endswith("(wrong)")
    assert "Reasoning: because 0" in texts[0] and "ANSWER" not in texts[0]


def test_a_round_without_proposals_says_why(dataset, builtin, tmp_path):
    root, questions = dataset
    base = builtin.subset(["collision start", "collision end"])
    rules = [Rule(contains="Propose up to", replies=[Reply("Nothing new comes to mind.")])]
    rules += marker_rules(questions, ContextBuilder(root, base), "airborne:")
    ecfg = EvolveConfig(samples_per_label=1, batch_size=1, seed=5, sandbox=SandboxLimits(timeout_s=5, smoke_timeout_s=2))
    with ScriptedLLMServer(rules=rules) as server:
        client = make_client("openai", base_url=server.base_url, concurrency=4)
        record = self_discover(questions, root, base, client, tmp_path / "sd",
                               SelfDiscoveryConfig(k=2, rounds=3, evolve=ecfg))
        client.close()
    [only] = record["rounds"]  # no proposal ends the loop
    assert only["proposed"] == [] and only["decisions"] == [] and only["library"] == base.order()
    assert only["why_none"] == "the LLM's answer named no new label: 'Nothing new comes to mind.'"
