"""The Q&A pipeline end to end with a real language model on this machine (the local llama.cpp backend,
``--model smollm2-135m``): it runs and scores whatever the accuracy, and its transcript replays byte for
byte. Skipped where the local backend is not installed; CI with the ``local`` extra runs it.

The backend spec and model can be changed with SIMPATTERNS_QA_LOCAL_LLM (default ``local``) and
SIMPATTERNS_QA_LOCAL_MODEL (default ``smollm2-135m``)."""

from __future__ import annotations

import os

import pytest

from simpatterns.llm import LLMError, make_client
from simpatterns.qa.context import ContextBuilder, ContextOptions
from simpatterns.qa.report import score_run
from simpatterns.qa.runner import RESPONSES_FILE, EvalSettings, read_responses, run_eval
from simpatterns.qa.scoring import find

pytestmark = pytest.mark.local_llm

SPEC = os.environ.get("SIMPATTERNS_QA_LOCAL_LLM", "local?n_batch=128")  # questions share most of their prompt
MODEL = os.environ.get("SIMPATTERNS_QA_LOCAL_MODEL", "smollm2-135m")


@pytest.fixture
def local_client():
    """A factory of local-model clients; skips (before the data set is built) when there is none."""
    try:
        make_client(SPEC, model=MODEL, concurrency=1).close()
    except (LLMError, ImportError, OSError) as exc:
        pytest.skip(f"local model backend not available ({SPEC}, {MODEL}): {exc}")
    return lambda **kw: make_client(SPEC, model=MODEL, concurrency=1, **kw)


def test_local_model_answers_scores_and_replays(local_client, dataset, builtin, tmp_path):
    root, questions = dataset
    qs = [q for q in questions if q.cut_frame is None][:2] + [q for q in questions if q.cut_frame is not None][:2]
    builder = ContextBuilder(root, builtin, options=ContextOptions(budget_chars=1200))
    settings = EvalSettings(conditions=["annotation"], temperature=0.0, max_tokens=48, seed=0)
    client = local_client(transcript=tmp_path / "t.jsonl")
    try:
        out = run_eval(qs, builder, client, tmp_path / "a", settings,
                       run_info={"questions_path": str(root / "questions.jsonl"), "llm": {"spec": SPEC, "model": MODEL}})
    finally:
        client.close()
    assert out.complete and len(read_responses(tmp_path / "a")) == 4
    s = find(score_run(tmp_path / "a").scores, "annotation")
    assert s.n == 4 and 0.0 <= s.accuracy <= 1.0  # whatever the small model gets right
    replay = make_client(f"replay:{tmp_path / 't.jsonl'}", concurrency=1)
    try:
        run_eval(qs, builder, replay, tmp_path / "b", settings)
    finally:
        replay.close()
    assert (tmp_path / "a" / RESPONSES_FILE).read_bytes() == (tmp_path / "b" / RESPONSES_FILE).read_bytes()
