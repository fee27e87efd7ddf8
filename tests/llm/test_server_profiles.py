"""The scripted server's profiles play the real servers' protocols (raw HTTP and the openai client)."""

from __future__ import annotations

import http.client
import json

import openai
import pytest

from simpatterns.llm.testing import PROFILES, Reply, ScriptedLLMServer

GBNF = 'root ::= "AND(" [a-z]+ ")"'
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def request(server: ScriptedLLMServer, method: str, path: str, body: object = None) -> tuple[int, dict, str]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read().decode("utf-8")
    conn.close()
    try:
        data = json.loads(raw) if raw and not raw.startswith("data:") else {}
    except json.JSONDecodeError:
        data = {}
    return r.status, data, raw


def chat(text: str = "hello", **kw) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **kw}


def error_text(body: dict) -> str:
    return body["error"]["message"] if "error" in body else body["message"]


@pytest.mark.parametrize("name", list(PROFILES))
def test_models_and_endpoints(serve, name):
    server = serve(profile=name)
    profile = PROFILES[name]
    status, models, _ = request(server, "GET", "/v1/models")
    assert status == 200 and models["data"][0]["owned_by"] == profile.owned_by
    assert models["data"][0]["id"] == profile.model
    assert request(server, "GET", "/version")[0] == (200 if name.startswith("vllm") else 404)
    status, props, _ = request(server, "GET", "/props")
    assert status == (200 if name.startswith("llama-server") else 404)
    if status == 200:
        assert "build_info" in props and "default_generation_settings" in props
        assert ("modalities" in props) == (name == "llama-server")


def test_vllm_versions_route_grammar_fields(serve):
    applied = {}
    for name in ("vllm-0.10", "vllm-0.11", "vllm"):
        server = serve(default="AND(x)", profile=name)
        assert request(server, "GET", "/version")[1]["version"].startswith(
            {"vllm-0.10": "0.10.", "vllm-0.11": "0.11.", "vllm": "0.12."}[name])
        for body in (chat(structured_outputs={"grammar": GBNF}), chat(guided_grammar=GBNF)):
            status, _, _ = request(server, "POST", "/v1/chat/completions", body)
            assert status == 200  # vLLM ignores fields it does not know, with a log line
        applied[name] = [(s.grammar_field, s.ignored) for s in server.log]
    assert applied == {
        "vllm-0.10": [(None, ["structured_outputs"]), ("guided_grammar", [])],
        "vllm-0.11": [("structured_outputs", []), ("guided_grammar", [])],
        "vllm": [("structured_outputs", []), (None, ["guided_grammar"])],
    }


@pytest.mark.parametrize("name, status, words", [
    ("vllm-0.10", 400, "Invalid grammar"), ("vllm", 400, "Invalid grammar"),
    ("llama-server-old", 400, "Failed to parse grammar"), ("llama-server", 400, "failed to parse grammar"),
])
def test_invalid_grammar_errors(serve, name, status, words):
    server = serve(default="x", profile=name)
    field = PROFILES[name].grammar_fields[0]
    bad = "root ::= undefined-rule"
    body = chat(**{field: {"grammar": bad} if field == "structured_outputs" else bad})
    got, data, _ = request(server, "POST", "/v1/chat/completions", body)
    assert got == status and words in error_text(data) and not server.log[-1].grammar_applied


def test_llama_cpp_python_dies_on_an_invalid_grammar(serve):
    server = serve(default="x", profile="llama-cpp-python")
    with pytest.raises(http.client.RemoteDisconnected):
        request(server, "POST", "/v1/chat/completions", chat(grammar="root ::= nope"))
    assert server.log[-1].status == 0


def test_n_handling(serve):
    got = {}
    for name in ("vllm", "llama-server-old", "llama-server", "llama-cpp-python", "proxy", "openai"):
        server = serve(default=["a", "b", "c", "d"], profile=name)
        status, data, _ = request(server, "POST", "/v1/chat/completions", chat(n=4))
        got[name] = (status, len(data.get("choices", [])))
    assert got == {"vllm": (200, 4), "llama-server-old": (500, 0), "llama-server": (200, 4),
                   "llama-cpp-python": (200, 1), "proxy": (200, 1), "openai": (200, 4)}
    server = serve(profile="llama-server-old")
    assert "Only one completion choice" in error_text(
        request(server, "POST", "/v1/chat/completions", chat(n=2))[1])


def test_openai_refuses_unknown_fields_and_reasoning_parameters(serve):
    server = serve(default="ok", profile="openai")
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(structured_outputs={"grammar": GBNF}))
    assert status == 400 and data["error"]["message"] == "Unrecognized request argument supplied: structured_outputs"
    server = serve(default="ok", profile="openai-reasoning")
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(max_tokens=50))
    assert (status, data["error"]["code"], data["error"]["param"]) == (400, "unsupported_parameter", "max_tokens")
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(temperature=0.7, max_completion_tokens=50))
    assert (status, data["error"]["code"], data["error"]["param"]) == (400, "unsupported_value", "temperature")
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(max_completion_tokens=50))
    assert status == 200
    # hidden reasoning tokens count against the limit and in the usage
    assert data["usage"]["completion_tokens_details"]["reasoning_tokens"] == PROFILES["openai-reasoning"].reasoning_tokens
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(max_completion_tokens=20))
    assert data["choices"][0]["message"]["content"] == "" and data["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("name, status, seen", [
    ("vllm", 400, False), ("llama-server-old", 500, False), ("llama-server", 400, False),
    ("llama-cpp-python", 200, False), ("openai", 200, True), ("proxy", 200, True),
])
def test_images(serve, name, status, seen):
    server = serve(default="a picture", profile=name)
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, IMAGE]}]}
    assert request(server, "POST", "/v1/chat/completions", body)[0] == status
    assert server.log[-1].images == 1 and server.log[-1].images_seen is seen


def test_vision_override_shows_in_props(serve):
    server = serve(default="a picture", profile="llama-server", vision=True)
    assert request(server, "GET", "/props")[1]["modalities"]["vision"] is True
    body = {"model": "m", "messages": [{"role": "user", "content": [IMAGE]}]}
    assert request(server, "POST", "/v1/chat/completions", body)[0] == 200 and server.log[-1].images_seen


def test_max_tokens_truncates_unless_runaway(serve):
    long = "word " * 100  # 125 tokens at 4 characters a token
    server = serve(default=long, profile="vllm")
    data = request(server, "POST", "/v1/chat/completions", chat(max_tokens=10))[1]
    assert data["choices"][0]["finish_reason"] == "length" and len(data["choices"][0]["message"]["content"]) == 40
    assert data["usage"]["completion_tokens"] == 10
    runaway = serve(default="AND(x)", profile="proxy", runaway_tokens=5000)
    data = request(runaway, "POST", "/v1/chat/completions", chat(max_tokens=10))[1]
    assert len(data["choices"][0]["message"]["content"]) == 20000 and "usage" not in data  # the proxy omits usage
    assert runaway.log[-1].completion_tokens == 5000 and runaway.log[-1].max_tokens is None


def sse(raw: str) -> list:
    events = [line[len("data: "):] for line in raw.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


@pytest.mark.parametrize("name, usage_where", [
    ("vllm", "own"), ("llama-server-old", "last"), ("llama-server", "own"),
    ("llama-cpp-python", None), ("openai", "own"), ("proxy", None),
])
def test_streaming(serve, name, usage_where):
    text = "AND(x) " * 30
    server = serve(default=text, profile=name)
    status, _, raw = request(server, "POST", "/v1/chat/completions",
                             chat(stream=True, stream_options={"include_usage": True}))
    chunks = sse(raw)
    assert status == 200 and len(chunks) > 3
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == text
    with_usage = [i for i, c in enumerate(chunks) if c.get("usage")]
    if usage_where is None:
        assert not with_usage
    elif usage_where == "own":
        assert with_usage == [len(chunks) - 1] and chunks[-1]["choices"] == []
    else:
        assert with_usage == [len(chunks) - 1] and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert server.log[-1].stream and server.log[-1].stream_complete


def test_stream_options_without_stream_refused_where_real(serve):
    for name, status in (("openai", 400), ("vllm", 400), ("llama-cpp-python", 200)):
        server = serve(default="x", profile=name)
        assert request(server, "POST", "/v1/chat/completions",
                       chat(stream_options={"include_usage": True}))[0] == status


@pytest.mark.parametrize("name", ["vllm", "openai", "llama-server"])
def test_openai_client_streams_with_usage(serve, name):
    server = serve(default="AND(x) and more", profile=name)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    stream = client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=3, stream=True, stream_options={"include_usage": True})
    parts, usage, finish = [], None, None
    for chunk in stream:
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
        usage = chunk.usage or usage
    client.close()
    assert "".join(parts) == "AND(x) and m" and finish == "length" and usage.completion_tokens == 3


def test_llama_server_records_prompt_cache(serve):
    server = serve(default="x", profile="llama-server")
    request(server, "POST", "/v1/chat/completions", chat(seed=1))
    request(server, "POST", "/v1/chat/completions", chat(seed=1, cache_prompt=False))
    assert [s.cache_prompt for s in server.log] == [True, False]


def test_vllm_010_error_shape(serve):
    server = serve(Reply(status=400, error="bad"), profile="vllm-0.10")
    data = request(server, "POST", "/v1/chat/completions", chat())[1]
    assert data == {"object": "error", "message": "bad", "type": "BadRequestError", "param": None, "code": 400}


def test_unknown_profile_is_named():
    with pytest.raises(ValueError, match="unknown server profile 'vllm-9'"):
        ScriptedLLMServer(profile="vllm-9")


def test_serve_script_cli_takes_a_profile(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"default": "AND(x)", "profile": "llama-server"}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # SIGTERM's default action ends it: no handler needed
    for args in (["--profile", "vllm-0.10"], [str(script)]):
        proc = subprocess.Popen([sys.executable, "-m", "simpatterns.cli", "llm", "serve-script", "--port", "0", *args],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            base = proc.stdout.readline().strip()
            host, port = base.split("//")[1].split("/")[0].split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("GET", "/v1/models")
            owned_by = json.loads(conn.getresponse().read())["data"][0]["owned_by"]
            conn.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        assert owned_by == ("vllm" if args[0] == "--profile" else "llamacpp")
    bad = subprocess.run([sys.executable, "-m", "simpatterns.cli", "llm", "serve-script", "--profile", "vllm-9"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode != 0 and "vllm-9" in bad.stderr


@pytest.mark.parametrize("name, path, check", [
    ("ollama", "/api/version", lambda b: b["version"].count(".") == 2),
    ("lmstudio", "/api/v0/models", lambda b: b["data"][0]["type"] == "vlm" and b["data"][0]["state"] == "loaded"),
    ("sglang", "/get_model_info", lambda b: b["is_generation"] is True and b["model_path"]),
    ("llama-swap", "/running", lambda b: b["running"][0]["state"] == "ready"),
    ("litellm", "/health/liveliness", lambda b: b == "I'm alive!"),
])
def test_proxies_and_other_servers_answer_their_own_endpoints(serve, name, path, check):
    server = serve(profile=name)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    body = json.loads(r.read())
    headers = dict(r.getheaders())
    conn.close()
    assert r.status == 200 and check(body)
    assert ("x-litellm-version" in headers) == (name == "litellm")


def test_llama_swap_passes_llama_server_through(serve):
    server = serve(default=["a", "b"], profile="llama-swap")
    model = PROFILES["llama-swap"].model
    status, props, _ = request(server, "GET", f"/upstream/{model}/props")
    assert status == 200 and props["modalities"]["vision"] is False
    status, data, _ = request(server, "POST", "/v1/chat/completions", chat(n=2, grammar=GBNF))
    assert status == 200 and len(data["choices"]) == 2 and server.log[-1].grammar_field == "grammar"


def test_prompt_tokens_of_images_seen_and_passed_through_as_text(serve):
    def prompt_tokens(name: str, url_chars: int) -> int:
        server = serve(default="white", profile=name)
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * url_chars}}
        body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "abcd" * 5}, image]}]}
        return request(server, "POST", "/v1/chat/completions", body)[1]["usage"]["prompt_tokens"]

    # a model that sees the image counts its pixels, not its bytes
    assert prompt_tokens("openai", 100) == prompt_tokens("openai", 4000) == 5 + 256
    # llama-cpp-python without an image handler reads the data URL as text
    assert prompt_tokens("llama-cpp-python", 4000) - prompt_tokens("llama-cpp-python", 100) == 3900 // 4
