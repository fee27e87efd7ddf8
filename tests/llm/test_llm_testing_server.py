"""The scripted server itself, over raw HTTP (no openai client)."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer


def post(server: ScriptedLLMServer, body: object, path: str = "/v1/chat/completions") -> tuple[int, dict]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data)


def chat(text: str, **kw) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **kw}


def test_models_and_routes(serve):
    server = serve(model="Qwen/Qwen3-VL-8B-Thinking")
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    conn.request("GET", "/v1/models")
    models = json.loads(conn.getresponse().read())
    assert models["data"][0]["id"] == "Qwen/Qwen3-VL-8B-Thinking" and models["data"][0]["owned_by"] == "vllm"
    assert post(server, chat("x"), path="/v1/completions")[0] == 404


def test_rules_then_sequence_then_default_then_exhausted(serve):
    server = serve("first", "second", rules=[Rule(contains="special", replies=[Reply("s1"), Reply("s2")])])
    texts = []
    for prompt in ["a", "special one", "b", "special two", "special three"]:
        status, body = post(server, chat(prompt))
        texts.append(body["choices"][0]["message"]["content"])
    assert texts == ["first", "s1", "second", "s2", "s2"]  # a rule's last reply repeats
    status, body = post(server, chat("c"))
    assert status == 400 and "script exhausted" in body["error"]["message"]
    server.default = Reply("fallback")
    assert post(server, chat("c"))[1]["choices"][0]["message"]["content"] == "fallback"
    assert [r["messages"][0]["content"] for r in server.requests][:2] == ["a", "special one"]


def test_errors_usage_and_stop(serve):
    server = serve(Reply(status=503, error="busy"), Reply("abcdefgh", usage={"prompt_tokens": 7, "completion_tokens": 3}))
    status, body = post(server, chat("x"))
    assert status == 503 and body["error"]["message"] == "busy"
    status, body = post(server, chat("x"))
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert post(server, {"model": "m", "messages": []})[0] == 400


def test_stop_interrupts_delayed_answers():
    server = ScriptedLLMServer(default=Reply("late", delay_s=30)).start()
    import threading

    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", post(server, chat("x"))))
    t.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    server.stop()
    t.join(5)
    assert time.perf_counter() - t0 < 5
    assert result["r"][0] == 503


def test_script_files(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "model": "scripted", "replies": ["one", {"content": "two", "finish_reason": "length"}],
        "rules": [{"contains": "hi", "replies": ["hello"]}], "default": {"status": 500},
    }))
    server = ScriptedLLMServer.from_script(script)
    assert server.model == "scripted" and server.default.status == 500 and server.pending() == 2
    script.write_text('{"replies": [{"text": "x"}]}')
    with pytest.raises(ValueError, match=r"replies\[0\]: unknown reply field\(s\) \['text'\]"):
        ScriptedLLMServer.from_script(script)
    script.write_text('{"replies": [')
    with pytest.raises(ValueError, match=r"s.json:1:\d+: invalid JSON"):
        ScriptedLLMServer.from_script(script)


def test_a_client_that_hangs_up_prints_no_traceback_and_the_server_goes_on(capfd):
    import socket
    import struct

    with ScriptedLLMServer(default="fine") as server:
        for _ in range(3):  # half a request line, then a reset (SO_LINGER 0), as a timed-out client leaves
            s = socket.create_connection((server.host, server.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Le")
            s.close()
        assert post(server, chat("x"))[1]["choices"][0]["message"]["content"] == "fine"
        # the server's own error hook, as socketserver calls it: quiet for a hang-up only
        for error in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"),
                      ValueError("a real bug")):
            try:
                raise error
            except Exception:
                server._httpd.handle_error(None, ("127.0.0.1", 1))
    err = capfd.readouterr().err
    assert err.count("Traceback") == 1 and "ValueError: a real bug" in err and "Connection" not in err, err
