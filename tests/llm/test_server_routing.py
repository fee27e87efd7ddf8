"""The client against every server profile: what it recognises, what it sends, what it claims.

The table in docs/reference/llm.md ("What each server gets") is checked row by row against what the
scripted servers received and what they say they applied.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simpatterns.llm import ChatRequest, LLMBackendError, LLMConfigError, make_client, read_transcript
from simpatterns.llm.openai_backend import GRAMMAR_FIELDS, grammar_refusal, refused_param
from simpatterns.llm.server import ServerInfo, is_reasoning_model, parse_version
from simpatterns.llm.testing import PROFILES, Reply, Rule

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "llm.md"
GRAMMAR = 'start: "AND(" NAME ")"\nNAME: /[a-z]+/\n'
# the grammar field, the constrained claim and the token-limit field are in the "Server profiles"
# table (tests/llm/test_commands_per_profile.py); observe() still asserts the claim against the server
COLUMNS = ["profile", "recognised as", "n=3 goes out as", "also sent", "images"]


def req(text: str = "Say hello.", **kw) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], **kw)


def doc_table() -> dict[str, dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- profile-table -->")[1].strip()
    rows = block.split("\n\n")[0].splitlines()  # the table ends at the first blank line
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == COLUMNS
    out = {}
    for line in rows[2:]:
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        out[cells[0]] = dict(zip(COLUMNS, cells))
    return out


def profile_row(name: str) -> dict[str, str]:
    """The "Server profiles" table's row for ``name`` (column -> cell)."""
    section = DOC.read_text(encoding="utf-8").split("### Server profiles", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == f"`{name}`":
            return dict(zip(header, cells))
    raise AssertionError(f"no row for {name} in the Server profiles table")


def shape(ns: list[int]) -> str:
    """How the n=3 request went out: ``n=3``, ``3 x n=1`` or ``n=3, then 2 x n=1``."""
    if ns == [3]:
        return "n=3"
    if ns == [1, 1, 1]:
        return "3 x n=1"
    assert ns[0] == 3 and set(ns[1:]) == {1}, ns
    return f"n=3, then {len(ns) - 1} x n=1"


def observe(serve, name: str, tmp_path: Path) -> dict[str, str]:
    server = serve(default=["AND(x)", "AND(y)", "AND(z)"], profile=name)
    log = tmp_path / f"{name}.jsonl"
    with make_client("openai", base_url=server.base_url, model=PROFILES[name].model, transcript=log) as client:
        c = client.complete_one(req(n=3, seed=1, grammar=GRAMMAR, max_tokens=50))
        chat = len(server.requests)
        bodies = server.requests[:chat]
        try:
            client.require_images()
            images = "taken"
        except LLMConfigError:
            images = "refused"
        probes = len(server.requests) - chat
    assert len(c.texts) == 3 and all(t.startswith("AND(") for t in c.texts)
    # the claim holds against what the server says it applied, for every request of the answer
    applied = [s.grammar_applied for s in server.log[:chat]]
    assert c.constrained == all(applied) and (c.constrained or not any(applied))
    [rec] = read_transcript(log)
    assert rec["constrained"] == c.constrained and rec["server"] == client.server_kind
    # a server may enforce a field the client does not send (SGLang's ebnf, vLLM behind LiteLLM):
    # what goes out and what is claimed are the "Server profiles" table's
    row = profile_row(name)
    assert c.constrained == (row["constrained"] == "yes")
    sent = [f for f in GRAMMAR_FIELDS if f in bodies[0]]
    assert (", ".join(f"`{f}`" for f in sent) or "none") == row["grammar sent as"]
    also = [f"{k}: {str(bodies[0][k]).lower()}" for k in ("cache_prompt",) if k in bodies[0]]
    also += ["no temperature"] if "temperature" not in bodies[0] else []
    return {"profile": name, "recognised as": client.server_kind,
            "n=3 goes out as": shape([b.get("n", 1) for b in bodies]), "also sent": ", ".join(also) or "-",
            "images": f"{images} ({probes} probe request{'s' if probes > 1 else ''})" if probes else images}


@pytest.mark.parametrize("name", list(PROFILES))
def test_each_profile_gets_what_the_docs_table_says(serve, name, tmp_path):
    table = doc_table()
    assert set(table) == set(PROFILES)
    assert observe(serve, name, tmp_path) == table[name]


def test_vllm_before_0_11_ignores_structured_outputs_so_it_gets_guided_grammar(serve):
    server = serve(default="AND(x)", profile="vllm-0.10")
    with make_client("openai", base_url=server.base_url, grammar="on") as client:
        assert client.backend.server_info.version == "0.10.2"
        c = client.complete_one(req(grammar=GRAMMAR))
    assert "structured_outputs" not in server.requests[0] and server.log[0].grammar_field == "guided_grammar"
    assert c.constrained


def test_a_vllm_that_does_not_say_its_version_is_never_counted_as_constrained(serve):
    server = serve(default="AND(x)", owned_by="vllm")  # /version answers 404
    with make_client("openai", base_url=server.base_url) as client:
        c = client.complete_one(req(grammar=GRAMMAR))
        assert "did not say its version" in client.backend.server_info.note
    assert server.requests[0]["structured_outputs"]["grammar"] and c.constrained is False


def test_a_reasoning_model_is_recognised_from_the_servers_refusal(serve, tmp_path):
    """A model name outside the known families: the first request is refused for max_tokens,
    the client switches once and the request goes through; later ones go out right."""
    server = serve(default="AND(x)", profile="openai-reasoning")
    log = tmp_path / "t.jsonl"
    with make_client("openai", base_url=server.base_url, model="gpt-4o-mini", transcript=log) as client:
        assert not is_reasoning_model("gpt-4o-mini")
        first = client.complete_one(req(temperature=0.3, max_tokens=40))
        second = client.complete_one(req("again", temperature=0.3, max_tokens=40))
    assert first.text == second.text == "AND(x)"
    assert [s.status for s in server.log] == [400, 200, 200]
    assert "max_tokens" in server.requests[0] and "max_completion_tokens" not in server.requests[0]
    for body in server.requests[1:]:
        assert body["max_completion_tokens"] == 40 and "max_tokens" not in body and "temperature" not in body
    recs = read_transcript(log)
    assert [r["status"] for r in recs] == ["error", "ok", "ok"] and recs[0]["error"]["kind"] == "adjusted"
    assert recs[1]["sent"]["omitted"] == ["temperature"]  # the transcript says the temperature was not sent


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "openai/gpt-5.1"])
def test_reasoning_families(model):
    assert is_reasoning_model(model)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest", "Qwen/Qwen2.5-7B-Instruct",
                                   "llama-o1-finetune"])
def test_not_reasoning_families(model):
    assert not is_reasoning_model(model)


def test_a_server_that_refuses_n_gets_single_requests_from_then_on(serve, fast_retry, tmp_path):
    refuse = Rule(match=lambda b: (b.get("n") or 1) > 1,
                  replies=[Reply(status=500, error="Only one completion choice is allowed")])
    server = serve(default=["AND(x)"], rules=[refuse], owned_by="custom")
    log = tmp_path / "t.jsonl"
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, transcript=log) as client:
        a = client.complete_one(req(n=3, seed=4))
        b = client.complete_one(req("again", n=2, seed=9))
    assert len(a.texts) == 3 and len(b.texts) == 2
    # one refusal, no retries of it; then one request per choice with consecutive seeds
    assert [(r.get("n"), r.get("seed")) for r in server.requests] == [(3, 4), (1, 4), (1, 5), (1, 6), (1, 9),
                                                                       (1, 10)]
    assert [r["status"] for r in read_transcript(log)] == ["error", "ok", "ok"]


def test_fewer_choices_than_asked_are_completed_one_at_a_time(serve):
    server = serve(default=["AND(x)", "AND(y)"], profile="proxy")  # ignores n
    with make_client("openai", base_url=server.base_url) as client:
        c = client.complete_one(req(n=4, seed=2))
    assert len(c.texts) == 4
    assert [(r.get("n"), r.get("seed")) for r in server.requests] == [(4, 2), (1, 3), (1, 4), (1, 5)]


def test_stop_strings_are_applied_even_when_the_server_ignores_them(serve):
    server = serve(default="AND(x)\nand then some prose", owned_by="custom")
    with make_client("openai", base_url=server.base_url, model="m") as client:
        c = client.complete_one(req(stop=["\n"]))
    assert c.text == "AND(x)" and c.finish_reasons == ["stop"]


def test_llama_server_gets_cache_prompt_false_only_with_a_seed(serve):
    server = serve(default="ok", profile="llama-server")
    with make_client("openai", base_url=server.base_url) as client:
        client.complete_one(req(seed=3))
        client.complete_one(req("no seed"))
    assert [s.cache_prompt for s in server.log] == [False, True]


@pytest.mark.parametrize("text, field, refused", [
    ("Invalid grammar specification.", "structured_outputs", True),  # vLLM (xgrammar)
    ("Failed to parse grammar", "grammar", True),  # llama-server, old builds
    ("Failed to initialize samplers: failed to parse grammar", "grammar", True),  # llama-server
    ("1 validation error for ChatCompletionRequest\nstructured_outputs\n  Extra inputs are not permitted",
     "structured_outputs", True),  # pydantic extra="forbid"
    ("Unrecognized request argument supplied: guided_grammar", "guided_grammar", True),  # OpenAI
    ("Unsupported model: extra-large-v2", "structured_outputs", False),  # unrelated words
    ("messages: extra field 'name' is unsupported", "structured_outputs", False),
    ("Extra inputs are not permitted: logit_bias", "grammar", False),  # another field
])
def test_grammar_refusals_are_the_servers_own_words(text, field, refused):
    assert grammar_refusal(text, field) is refused


def test_refused_parameters_are_recognised_by_name():
    sent = {"max_tokens": 5, "temperature": 0.7, "stop": ["\n"], "stream_options": {}}
    assert refused_param("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                         "'max_completion_tokens' instead.", sent) == "max_tokens"
    assert refused_param("Unsupported value: 'temperature' does not support 0.7 with this model. Only the "
                         "default (1) value is supported.", sent) == "temperature"
    assert refused_param("Unsupported parameter: 'stop' is not supported with this model.", sent) == "stop"
    assert refused_param("The model is overloaded; temperature of the GPU too high", sent) is None


def test_an_unrelated_400_is_a_client_error_and_keeps_the_grammar(serve, fast_retry):
    server = serve(Reply(status=400, error="Unsupported model: extra-large-v2"), "AND(x)", profile="vllm")
    with make_client("openai", base_url=server.base_url, retry=fast_retry) as client:
        with pytest.raises(LLMBackendError) as info:
            client.complete_one(req(grammar=GRAMMAR))
        assert info.value.kind == "client" and client.backend.grammar_enabled
        assert client.complete_one(req(grammar=GRAMMAR)).constrained


def test_a_grammar_the_server_cannot_take_is_dropped_once(serve, fast_retry, tmp_path):
    server = serve(Reply(status=400, error="Invalid grammar specification."), default="AND(x)", profile="vllm")
    with make_client("openai", base_url=server.base_url, retry=fast_retry) as client:
        c = client.complete_one(req(grammar=GRAMMAR))
        d = client.complete_one(req("again", grammar=GRAMMAR))
    assert c.text == d.text == "AND(x)" and not c.constrained and not d.constrained
    assert ["structured_outputs" in b for b in server.requests] == [True, False, False]


def test_images_are_refused_in_one_line_without_retries(serve):
    server = serve(default="red", profile="llama-server-old")  # answers an image with HTTP 500
    with make_client("openai", base_url=server.base_url) as client:
        with pytest.raises(LLMConfigError, match="does not take images .*HTTP 500: image input is not supported"):
            client.require_images()
    assert len(server.requests) == 1


def test_images_the_server_would_pass_as_text_are_refused(serve):
    """llama-cpp-python without an image handler: nothing says whether the model sees images;
    the probe sees the data URLs counted as text (the prompt grows with the image's bytes)."""
    server = serve(default="red", profile="llama-cpp-python")
    with make_client("openai", base_url=server.base_url) as client:
        with pytest.raises(LLMConfigError, match="does not take images .*prompt grew by .* as text"):
            client.require_images()
        assert client.budget.used_tokens > 0  # the probe is charged


def test_an_unknown_server_that_cannot_tell_is_refused_images(serve):
    server = serve(default="red", profile="proxy")  # says nothing about vision, reports no usage
    with make_client("openai", base_url=server.base_url) as client:
        with pytest.raises(LLMConfigError, match="could not establish that the model .* takes images"):
            client.require_images()
    assert len(server.requests) == 2  # the probe's two requests, nothing more


def test_a_vision_model_is_taken(serve):
    server = serve(default="red", profile="llama-server", vision=True)
    with make_client("openai", base_url=server.base_url) as client:
        client.require_images()
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        c = client.complete_one(ChatRequest([{"role": "user", "content": [{"type": "text", "text": "colour?"},
                                                                            image]}]))
    assert c.text == "red" and server.log[-1].images_seen and len(server.requests) == 1


def test_versions_parse_and_route():
    assert parse_version("0.10.2") == (0, 10, 2) and parse_version("v0.12.0+cu128") == (0, 12, 0)
    assert parse_version("0.11.0rc1") == (0, 11, 0) and parse_version("main") is None
    route = {v: (ServerInfo("vllm", version=v).grammar_field, ServerInfo("vllm", version=v).enforces_grammar)
             for v in ("0.6.3", "0.10.2", "0.11.0", "0.12.0", "0.1.dev9+g1a2b3c", None)}
    assert route == {"0.6.3": ("guided_grammar", True), "0.10.2": ("guided_grammar", True),
                     "0.11.0": ("structured_outputs", True), "0.12.0": ("structured_outputs", True),
                     "0.1.dev9+g1a2b3c": ("structured_outputs", False), None: ("structured_outputs", False)}


def test_servers_recognised_by_their_endpoints(serve):
    """Servers whose owned_by says nothing: recognised by the endpoints they document."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    routes = {
        "ollama": {"/v1/models": {"data": [{"id": "qwen3:4b", "owned_by": "library"}]},
                   "/api/version": {"version": "0.12.3"}, "/api/show": {"capabilities": ["completion", "vision"]}},
        "lmstudio": {"/v1/models": {"data": [{"id": "qwen3-4b", "owned_by": "organization_owner"}]},
                     "/api/v0/models": {"data": [{"id": "qwen3-4b", "type": "llm"}]}},
        "sglang": {"/v1/models": {"data": [{"id": "Qwen/Qwen3-4B", "owned_by": "sglang"}]},
                   "/get_model_info": {"model_path": "Qwen/Qwen3-4B"}, "/get_server_info": {"version": "0.5.2"}},
        "litellm": {"/v1/models": {"data": [{"id": "qwen", "owned_by": "openai"}]}, "/health/liveliness": "I'm alive!"},
        "llama-swap": {"/v1/models": {"data": [{"id": "qwen", "owned_by": "llama-swap"}]}, "/running": {"running": []}},
        "llama.cpp": {"/v1/models": {"data": [{"id": "qwen", "owned_by": "llama-swap"}]},
                      "/upstream/qwen/props": {"default_generation_settings": {}, "build_info": "b6000",
                                               "modalities": {"vision": True}}},
    }
    expect = {"ollama": ("ollama", "0.12.3", True, None), "lmstudio": ("lmstudio", None, False, None),
              "sglang": ("sglang", "0.5.2", None, None), "litellm": ("litellm", None, None, None),
              "llama-swap": ("llama-swap", None, None, None), "llama.cpp": ("llama.cpp", "b6000", True, "llama-swap")}
    for name, table in routes.items():
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self):
                body = table.get(self.path)
                data = json.dumps(body).encode() if body is not None else b'{"detail": "Not Found"}'
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = answer

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            with make_client("openai", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1") as client:
                info = client.backend.server_info
        finally:
            httpd.shutdown()
            httpd.server_close()
        assert (info.kind, info.version, info.vision, info.via) == expect[name], name
        assert info.enforces_grammar == (name == "llama.cpp")
        assert info.grammar_field == ("grammar" if name == "llama.cpp" else None)


def test_the_table_names_every_column_value_the_code_can_produce():
    for row in doc_table().values():
        assert re.fullmatch(r"(taken|refused)( \(\d probe requests?\))?", row["images"]), row


def test_an_answer_outside_the_grammar_ends_the_constrained_claim(serve, tmp_path):
    """A server that takes the grammar field but answers outside it did not apply it: that
    answer and every later one are reported unconstrained (a cut-off answer only has to be a
    prefix of a sentence)."""
    server = serve(Reply.truncated("AND(abc", 7), "AND(x)", "I think AND(x)", "AND(y)", profile="llama-server")
    log = tmp_path / "t.jsonl"
    with make_client("openai", base_url=server.base_url, transcript=log) as client:
        cut = client.complete_one(req(grammar=GRAMMAR))
        good = client.complete_one(req("b", grammar=GRAMMAR))
        bad = client.complete_one(req("c", grammar=GRAMMAR))
        later = client.complete_one(req("d", grammar=GRAMMAR))
    assert cut.constrained and good.constrained and cut.finish_reasons == ["length"]
    assert not bad.constrained and bad.sent["grammar_violated"] and not later.constrained
    assert "grammar" in server.requests[3]  # still sent: it may help, but nothing is claimed
    assert [r["constrained"] for r in read_transcript(log)] == [True, True, False, False]



def test_a_server_that_refuses_streaming_gets_whole_answers_read_bounded(serve, fast_retry):
    refuse = Rule(match=lambda b: bool(b.get("stream")),
                  replies=[Reply(status=400, error="Unsupported parameter: 'stream' is not supported here")])
    server = serve(default="word " * 5000, rules=[refuse], owned_by="custom")
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry) as client:
        a = client.complete_one(req(max_tokens=100))
        b = client.complete_one(req("again", max_tokens=100))
    assert [bool(r.get("stream")) for r in server.requests] == [True, False, False]
    for c in (a, b):  # the server ignored max_tokens: the answer is cut to what it allows
        assert c.finish_reasons == ["length"] and c.usage.completion_tokens == 100 and not c.sent["streamed"]


def test_llama_server_without_props_still_gets_its_grammar(serve):
    server = serve(default="AND(x)", owned_by="llamacpp")  # no /props: only owned_by says what it is
    with make_client("openai", base_url=server.base_url) as client:
        c = client.complete_one(req(grammar=GRAMMAR, seed=1))
        info = client.backend.server_info
    assert info.kind == "llama.cpp" and info.vision is None and "did not answer /props" in info.note
    assert server.requests[0]["grammar"] and server.requests[0]["cache_prompt"] is False and c.constrained


def test_server_sent_events_under_a_json_content_type_are_read_as_events(serve):
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "AND(x)"}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    server = serve(default=Reply(body=body), owned_by="custom")  # content type application/json
    with make_client("openai", base_url=server.base_url, model="m") as client:
        c = client.complete_one(req())
    assert c.text == "AND(x)" and c.finish_reasons == ["stop"]
