"""Grammar-constrained decoding requests, record/replay, specs and transcripts."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from simpatterns.llm import (
    ChatRequest,
    LLMBackendError,
    LLMConfigError,
    LLMReplayMissing,
    LLMTranscriptError,
    make_client,
    read_transcript,
)
from simpatterns.llm.testing import Reply

GRAMMAR = 'start: "AND(" NAME ")"\nNAME: /[a-z]+/\n'
GBNF = 'root ::= start-2\nstart-2 ::= "AND(" tok-name ")"\ntok-name ::= [a-z]+\n'


def req(text: str = "goal", **kw) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], **kw)


def test_grammar_is_sent_as_structured_outputs_to_vllm(serve, fast_retry):
    server = serve("AND(x)", "free text", profile="vllm")
    with make_client("openai", base_url=server.base_url, retry=fast_retry) as client:
        c = client.complete_one(req(grammar=GRAMMAR))
        plain = client.complete_one(req("no grammar"))
    # GBNF, which xgrammar parses natively and llguidance converts; vLLM's own Lark path cannot
    # take regex terminals or %ignore
    assert server.requests[0]["structured_outputs"] == {"grammar": GBNF}
    assert "guided_grammar" not in server.requests[0]  # removed in vLLM 0.12
    assert "grammar" not in server.requests[0]
    assert c.constrained is True
    assert "structured_outputs" not in server.requests[1] and plain.constrained is False


@pytest.mark.parametrize("profile", ["llama-cpp-python", "llama-server-old"])
def test_llama_cpp_servers_get_gbnf_in_their_grammar_field(serve, fast_retry, profile, tmp_path):
    server = serve("AND(x)", "AND(y)", "AND(z)", profile=profile)
    log = tmp_path / "t.jsonl"
    with make_client("openai", base_url=server.base_url, retry=fast_retry, transcript=log) as client:
        assert client.concurrency == 1 and client.timeout_s == 600.0  # one request at a time, slow answers
        assert client.prefers_compact_prompts
        c = client.complete_one(req(grammar=GRAMMAR, n=3, seed=5))
    # the server ignores n: n requests with consecutive seeds, one answer each
    assert [b["grammar"] for b in server.requests] == [GBNF] * 3
    assert [(b["n"], b["seed"]) for b in server.requests] == [(1, 5), (1, 6), (1, 7)]
    assert all("structured_outputs" not in b for b in server.requests)
    assert c.texts == ["AND(x)", "AND(y)", "AND(z)"] and c.constrained is True
    [rec] = read_transcript(log)
    assert rec["server"] == {"llama-cpp-python": "llama-cpp-python", "llama-server-old": "llama.cpp"}[profile]
    assert rec["constrained"] is True and rec["request"]["n"] == 3 and all(s.grammar_applied for s in server.log)


def test_hosted_apis_decode_unconstrained_and_say_so(serve, fast_retry):
    server = serve("AND(x)", "AND(y)", owned_by="openai")
    with make_client("openai", base_url=server.base_url, retry=fast_retry) as client:
        assert client.concurrency == 8 and client.timeout_s == 120.0
        c = client.complete_one(req(grammar=GRAMMAR))
    assert "structured_outputs" not in server.requests[0] and "grammar" not in server.requests[0]
    assert c.constrained is False
    # "on" sends the vLLM field anyway; nothing confirms the server enforced it, so it is not "constrained"
    with make_client("openai", base_url=server.base_url, retry=fast_retry, grammar="on") as client:
        c = client.complete_one(req(grammar=GRAMMAR))
    assert server.requests[1]["structured_outputs"] == {"grammar": GBNF} and c.constrained is False


def test_an_invalid_grammar_is_never_sent(serve, fast_retry):
    server = serve("AND(x)", owned_by="me")
    with make_client("openai", base_url=server.base_url, retry=fast_retry) as client:
        with pytest.raises(LLMBackendError, match="invalid grammar, not sent: .*undefined rule 'b'") as info:
            client.complete_one(req(grammar="root ::= b\n"))
    assert info.value.kind == "grammar_invalid" and server.requests == []


def test_grammar_off_never_sends_it(serve, fast_retry):
    server = serve("AND(x)", owned_by="vllm")
    with make_client("openai", base_url=server.base_url, grammar="off", retry=fast_retry) as client:
        assert client.complete_one(req(grammar=GRAMMAR)).constrained is False
    assert "structured_outputs" not in server.requests[0]


def test_explicit_concurrency_and_timeout_win(serve):
    server = serve("x", owned_by="me")
    with make_client("openai", base_url=server.base_url, concurrency=3, timeout_s=7.5) as client:
        assert client.concurrency == 3 and client.timeout_s == 7.5
    with pytest.raises(ValueError, match="concurrency"):
        make_client("openai", base_url=server.base_url, concurrency=0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_refused_grammar_falls_back_to_unconstrained(serve, fast_retry, mode, tmp_path):
    server = serve(default="AND(x)", owned_by="openai", refuse_fields=["structured_outputs"])
    log = tmp_path / "t.jsonl"
    with make_client("openai", base_url=server.base_url, model="m", grammar="on", retry=fast_retry,
                     transcript=log) as client:
        run = (lambda rs: client.complete(rs)) if mode == "sync" else (lambda rs: asyncio.run(client.acomplete(rs)))
        [first] = run([req(grammar=GRAMMAR)])
        [second] = run([req("again", grammar=GRAMMAR)])
        assert client.backend.grammar_enabled is False
        assert client.retries == 0  # a refused grammar is not a retry of a failed request
    assert first.text == "AND(x)" and first.constrained is False and first.attempts == 1
    assert second.constrained is False
    sent = ["structured_outputs" in b for b in server.requests]
    assert sent == [True, False, False]
    recs = read_transcript(log)
    assert recs[0]["error"]["kind"] == "grammar_rejected" and "structured_outputs" in recs[0]["error"]["message"]


def test_replay_reproduces_a_recorded_run_without_a_server(serve, fast_retry, tmp_path):
    log = tmp_path / "run.jsonl"
    server = serve(Reply(status=500), Reply(content=["P(1)", "P(2)"], finish_reason="length"), "Q", "R")
    requests = [req("a", n=2, seed=1), req("b", seed=2), req("c", grammar=GRAMMAR)]
    # one at a time: the scripted sequence is then served in request order
    with make_client("openai", base_url=server.base_url, retry=fast_retry, transcript=log, concurrency=1) as client:
        recorded = client.complete(requests)
    server.stop()

    with make_client(f"replay:{log}") as replay:
        replayed = replay.complete([req("a", n=2, seed=1), req("b", seed=2), req("c", grammar=GRAMMAR)])
        assert replay.model == "scripted-model"
    for a, b in zip(recorded, replayed):
        assert (a.texts, a.finish_reasons, a.usage, a.model, a.prompt_hash, a.constrained) == \
               (b.texts, b.finish_reasons, b.usage, b.model, b.prompt_hash, b.constrained)
    assert replayed[0].texts == ["P(1)", "P(2)"] and replayed[0].finish_reasons == ["length", "length"]


def test_replay_names_a_missing_prompt(serve, fast_retry, tmp_path):
    log = tmp_path / "run.jsonl"
    server = serve("A")
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, transcript=log) as client:
        client.complete([req("recorded goal", seed=0)])
    other = req("make the red ball bounce twice", seed=0)
    with make_client(f"replay:{log}") as replay:
        with pytest.raises(LLMReplayMissing) as info:
            replay.complete([other])
        assert other.prompt_hash[:12] in str(info.value)
        assert "make the red ball bounce twice" in str(info.value)
        with pytest.raises(LLMReplayMissing):  # a different seed is a different prompt
            replay.complete([req("recorded goal", seed=1)])
        replay.complete([req("recorded goal", seed=0)])
        with pytest.raises(LLMReplayMissing) as again:
            replay.complete([req("recorded goal", seed=0)])
        assert "diverged" in str(again.value)


def test_replay_can_itself_be_recorded(serve, fast_retry, tmp_path):
    log, log2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    server = serve("A")
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, transcript=log) as client:
        client.complete([req()])
    with make_client(f"replay:{log}", transcript=log2) as replay:
        replay.complete([req()])
    assert read_transcript(log2)[0]["response"] == read_transcript(log)[0]["response"]
    with pytest.raises(LLMConfigError, match="cannot record into the transcript being replayed"):
        make_client(f"replay:{log}", transcript=log)


def test_transcript_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = ('{"v": 1, "prompt_hash": "abc", "status": "ok", "request": {}, '
            '"response": {"texts": ["x"], "finish_reasons": ["stop"]}}\n')
    bad.write_text(good + '{"v": 1, "prompt_hash": "d"')
    with pytest.raises(LLMTranscriptError, match=r"bad.jsonl:2: a torn last line"):
        read_transcript(bad)
    bad.write_text(good + "not json\n" + good)
    with pytest.raises(LLMTranscriptError, match=r"bad.jsonl:2: invalid JSON"):
        read_transcript(bad)
    bad.write_text('{"v": 1, "status": "ok"}\n')
    with pytest.raises(LLMTranscriptError, match=r"bad.jsonl:1: record lacks field\(s\) \['prompt_hash', 'request'\]"):
        read_transcript(bad)
    bad.write_text(good.replace('"v": 1', '"v": 9'))
    with pytest.raises(LLMTranscriptError, match="version 9 is not supported"):
        read_transcript(bad)
    with pytest.raises(LLMTranscriptError, match="does not exist"):
        make_client(f"replay:{tmp_path / 'nope.jsonl'}")


def test_specs_and_configuration_errors(monkeypatch):
    for var in ("SIMPATTERNS_LLM_BASE_URL", "OPENAI_BASE_URL", "SIMPATTERNS_LLM_API_KEY", "OPENAI_API_KEY",
                "SIMPATTERNS_LLM"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(LLMConfigError, match="unknown LLM backend 'gpt'"):
        make_client("gpt")
    with pytest.raises(LLMConfigError, match="replay needs a transcript"):
        make_client("replay")
    with pytest.raises(LLMConfigError, match="--base-url"):
        make_client("openai")
    with pytest.raises(LLMConfigError, match="grammar mode"):
        make_client("openai", base_url="http://127.0.0.1:9/v1", grammar="maybe")
    if importlib.util.find_spec("vllm") is None:  # the usual case here: the extra is not installed
        with pytest.raises(LLMConfigError, match=r"pip install 'simpatterns\[vllm\]'"):
            make_client("vllm:Qwen/Qwen3-Coder-30B-A3B-Instruct")


def test_unreachable_server_is_a_connection_error_after_retries(fast_retry):
    from simpatterns.llm import LLMRetriesExhausted
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with make_client("openai", base_url=f"http://127.0.0.1:{port}/v1", model="m", retry=fast_retry,
                     timeout_s=2) as client:
        with pytest.raises(LLMRetriesExhausted) as info:
            client.complete([req()])
    assert info.value.last_error.kind == "connection"


def test_model_choice_is_required_when_a_server_has_several(serve):
    server = serve("x")
    server.model = "a"
    with make_client("openai", base_url=server.base_url) as client:
        assert client.model == "a"
    with make_client("openai", base_url="http://127.0.0.1:9/v1") as client:
        with pytest.raises(LLMConfigError, match="cannot list models"):
            _ = client.model


def test_request_validation_and_hashing():
    with pytest.raises(ValueError, match=r"messages\[0\].role 'robot'"):
        ChatRequest([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="n must be"):
        ChatRequest([{"role": "user", "content": "x"}], n=0)
    with pytest.raises(ValueError, match="max_tokens"):
        ChatRequest([{"role": "user", "content": "x"}], max_tokens=0)
    with pytest.raises(TypeError):
        ChatRequest("hello")  # type: ignore[arg-type]
    a, b = req(seed=1), req(seed=1)
    assert a.prompt_hash == b.prompt_hash
    assert len({a.prompt_hash, req(seed=2).prompt_hash, req(seed=1, n=2).prompt_hash,
                req(seed=1, grammar=GRAMMAR).prompt_hash, req("other", seed=1).prompt_hash}) == 5
