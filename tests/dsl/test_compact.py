"""Compact prompts for small models, and synthesis against a llama.cpp-like server (scripted)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl import parse
from simpatterns.dsl.compact import compact_prompt, select_bodies, select_examples, select_patterns
from simpatterns.dsl.constrained import specialised_grammar
from simpatterns.dsl.synthesize import (
    SynthesisConfig, build_messages, load_goal_examples, phyre_scene_bodies, synthesize_reward,
    with_agent_ball,
)
from simpatterns.envs.scenes import three_buckets
from simpatterns.llm import make_client, read_transcript
from simpatterns.llm.testing import ScriptedLLMServer

A3 = ("Make the red ball touch the green object after the green object has already touched the left wall, "
      "while preventing the green object from touching the right wall.")
A10 = ("Make the green object touch the blue object while preventing any object from contacting the scene "
       "boundaries (left, right, or top walls) at any time during the simulation.")
GOOD = 'AND(EVENT("collision start", {"object_a": "green ball", "object_b": "blue ball"}))'


@pytest.fixture(scope="module")
def library() -> PatternLibrary:
    return PatternLibrary.builtin()


@pytest.fixture(scope="module")
def scene():
    return phyre_scene_bodies("00000:0")


@pytest.fixture(scope="module")
def examples(library):
    return load_goal_examples(library=library)


def names(bodies) -> list[str]:
    return [b.name for b in bodies]


def test_bodies_the_goal_names(scene):
    assert names(select_bodies(A3, scene)) == ["left wall", "right wall", "green ball", "red ball"]
    assert names(select_bodies(A10, scene)) == ["left wall", "top wall", "right wall", "green ball", "blue ball",
                                                "red ball"]
    assert names(select_bodies("Do something interesting", scene)) == names(scene)  # none named: all
    buckets = with_agent_ball(three_buckets().trace_bodies())
    chosen = names(select_bodies("Get the green ball in the first bucket", buckets))
    assert chosen == ["green ball", "black jar 1", "black jar 2", "black jar 3", "red ball"]


def test_examples_by_similarity_never_the_goal_itself(examples):
    shots = select_examples(A3, examples, k=3)
    assert shots[0].source.endswith("a10_no_boundary_contacts.rwd")  # the other goal about walls
    assert all(not e.source.endswith("a03_left_wall_then_red.rwd") for e in select_examples(A3, examples, k=99))
    bucket = select_examples("Get the green ball in the second bucket", examples, k=3)
    assert all("bucket" in e.source for e in bucket) and not any(e.source.endswith("bucket_second.rwd")
                                                                 for e in bucket)


def test_patterns_the_goal_points_at(library, examples):
    near = select_patterns("the red ball passes very close to the blue ball without a collision", library)
    assert "near collision" in near
    with_shots = select_patterns(A3, library, select_examples(A3, examples, k=2))
    assert "collision start" in with_shots and len(with_shots) <= 8


def test_compact_prompt_fits_its_budget_and_shows_canonical_programs(library, scene, examples):
    cp = compact_prompt(A10, library, bodies=scene, examples=examples, budget_tokens=1200)
    full = build_messages(A10, library, bodies=scene, examples=examples)
    assert cp.estimated_tokens <= 1200 < sum(len(m["content"]) for m in full) // 4 / 5
    system, user = cp.messages[0]["content"], cp.messages[1]["content"]
    assert all(f'"{p}"' in system for p in cp.patterns) and "#" not in system  # examples without comments
    assert user.endswith("Program:") and A10 in user and '"top wall"' in user and '"ground"' not in user
    tiny = compact_prompt(A10, library, bodies=scene, examples=examples, budget_tokens=300)
    assert tiny.examples == [] and len(cp.examples) >= 1  # examples go first when over budget


def test_synthesis_against_a_llama_cpp_server_is_compact_and_specialised(library, scene, examples, tmp_path):
    log = tmp_path / "run.jsonl"
    # a program in the compact grammar (GOOD's "collision start" is not among the patterns the prompt shows)
    in_grammar = GOOD.replace("collision start", "touch start")
    with ScriptedLLMServer(replies=[in_grammar], owned_by="me") as server:
        with make_client("openai", base_url=server.base_url, transcript=log) as client:
            result = synthesize_reward(A10, client, library=library, bodies=scene, examples=examples,
                                       config=SynthesisConfig(n=1))
        [body] = server.requests
    cp = compact_prompt(A10, library, bodies=scene, examples=examples)
    assert body["messages"] == cp.messages
    assert body["grammar"] == specialised_grammar(library, cp.bodies, patterns=cp.patterns)
    assert result.ok and result.prompt == "compact" and result.grammar == "specialised"
    assert result.attempts[0].constrained and result.text.strip() == in_grammar
    # an answer outside the grammar it was sent: the server did not apply it, so it is not "constrained"
    with ScriptedLLMServer(default=GOOD, owned_by="me") as server:
        with make_client("openai", base_url=server.base_url) as client:
            outside = synthesize_reward(A10, client, library=library, bodies=scene, examples=examples,
                                        config=SynthesisConfig(n=1))
    assert outside.ok and not outside.attempts[0].constrained
    # the replayed run asks for the same compact prompt (the transcript says a llama.cpp server answered)
    with make_client(f"replay:{log}") as replay:
        again = synthesize_reward(A10, replay, library=library, bodies=scene, examples=examples,
                                  config=SynthesisConfig(n=1))
    assert again.text == result.text and again.prompt == "compact"
    assert read_transcript(log)[0]["server"] == "llama-cpp-python"


def test_cli_prompt_and_grammar_options(scene, tmp_path):
    with ScriptedLLMServer(default=GOOD, owned_by="me") as server:
        runner = CliRunner()
        res = runner.invoke(app, ["reward", "compile", A10, "--scene", "00000:0", "--llm", "openai", "--base-url",
                                  server.base_url, "-n", "1", "--prompt", "full", "--grammar-kind", "generic",
                                  "--timeout", "30", "--concurrency", "1"])
        assert res.exit_code == 0, res.output
        assert "grammar-constrained: yes (generic grammar), full prompt" in res.output
        assert "root ::= gap predicate-top" in server.requests[-1]["grammar"]
        res = runner.invoke(app, ["reward", "compile", A10, "--llm", "openai", "--base-url", server.base_url,
                                  "--prompt", "tiny"])
        assert res.exit_code == 2 and "prompt must be one of" in res.output
        res = runner.invoke(app, ["reward", "compile", A10, "--llm", "openai", "--base-url", server.base_url,
                                  "--concurrency", "0"])
        assert res.exit_code == 2 and "--concurrency must be >= 1" in res.output
    assert parse(GOOD)
