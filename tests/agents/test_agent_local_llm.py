"""The language-model agent end to end with a real language model on this machine (the local llama.cpp
backend, ``--model smollm2-135m``): two attempts on one task through `evaluate`, whatever the model
chooses (its answers constrained to a menu choice by the choice grammar); the run reports, and its transcript
replays to the same episodes byte for byte. Skipped where the local backend is not installed; CI with the ``local`` extra runs it.

The backend spec and model can be changed with SIMPATTERNS_AGENTS_LOCAL_LLM (default ``local``) and
SIMPATTERNS_AGENTS_LOCAL_MODEL (default ``smollm2-135m``)."""

from __future__ import annotations

import os

import pytest

from agent_tasks import BINS, SOLVABLE
from simpatterns.agents.episode import STATUSES
from simpatterns.agents.report import write_report
from simpatterns.agents.runner import EPISODES_FILE, EvalConfig, evaluate, make_conditions
from simpatterns.llm import LLMError, make_client

pytestmark = pytest.mark.local_llm

SPEC = os.environ.get("SIMPATTERNS_AGENTS_LOCAL_LLM", "local?n_batch=128")  # attempts share most of their prompt
MODEL = os.environ.get("SIMPATTERNS_AGENTS_LOCAL_MODEL", "smollm2-135m")


def out_menu(cache):
    from simpatterns.agents.menu import MenuStore

    return MenuStore(cache, BINS).get(SOLVABLE)


@pytest.fixture
def local_client():
    try:
        make_client(SPEC, model=MODEL, concurrency=1).close()
    except (LLMError, ImportError, OSError) as exc:
        pytest.skip(f"local model backend not available ({SPEC}, {MODEL}): {exc}")
    return lambda **kw: make_client(SPEC, model=MODEL, concurrency=1, **kw)


def test_local_model_plays_two_attempts_and_replays(local_client, menu_cache, tmp_path):
    config = EvalConfig(setup=None, tasks=(SOLVABLE,), budget=2, bins=BINS)
    # the grammar keeps the small model's answer to one CHOICE line of the menu
    conds = make_conditions(["llm"], ["annotation"], {"budget_chars": 800, "max_tokens": 12, "choice_grammar": True})
    client = local_client(transcript=tmp_path / "t.jsonl")
    try:
        out = evaluate(tmp_path / "a", config, conds, cache_dir=menu_cache, client_factory=lambda _: client)
    finally:
        client.close()
    [ep] = out.episodes
    assert ep.condition == "llm/annotation" and 1 <= len(ep.attempts) and ep.used <= 2
    assert all(a.status in STATUSES and a.raw is not None for a in ep.attempts)  # every answer is logged
    menu_ids = {c.id for c in out_menu(menu_cache).choices}
    # every answer names a menu choice (a repeat is wasted, an unparsable answer cannot happen)
    assert all(a.raw.startswith("CHOICE: ") and a.choice in menu_ids for a in ep.attempts)
    assert all(a.status != "wasted" or a.repeat_of == 1 for a in ep.attempts)
    assert ep.info["requests"] == sum(a.status != "invalid" for a in ep.attempts)
    assert (ep.solved_at is not None) or ep.used == 2
    report = write_report(tmp_path / "a")
    assert report["summaries"][0].condition == "llm/annotation" and (tmp_path / "a" / "report.md").is_file()

    replay = make_client(f"replay:{tmp_path / 't.jsonl'}", concurrency=1)
    try:
        evaluate(tmp_path / "b", config, conds, cache_dir=menu_cache, client_factory=lambda _: replay)
    finally:
        replay.close()
    assert (tmp_path / "a" / EPISODES_FILE).read_bytes() == (tmp_path / "b" / EPISODES_FILE).read_bytes()
