"""A local OpenAI-compatible server that answers from a script.

Real HTTP on 127.0.0.1 (``/v1/chat/completions``, ``/v1/models``), so the
real ``openai`` client and the whole `LLMClient` stack run against it in
tests, benchmarks and demos without model weights::

    with ScriptedLLMServer(replies=[Reply(status=500), Reply("AND(...)")]) as server:
        client = make_client("openai", base_url=server.base_url)
        ...
        assert server.requests[-1]["structured_outputs"]["grammar"]

Replies are chosen per request: the first `Rule` whose ``contains`` occurs
in the last message wins (its replies are served in order, the last one
repeating); otherwise the next reply of the sequence; otherwise
``default``; otherwise HTTP 400 "no scripted reply". A `Reply` can be an
HTTP error, a delay, a raw (malformed) body, several choices, or a
truncated answer (``finish_reason="length"``). Every request body received
is kept in ``server.requests``.

Command line (for demos): ``python -m simpatterns.llm.testing SCRIPT.json
[--port 8000]``, or ``simpatterns llm serve-script``; the script file is
``{"replies": [...], "rules": [{"contains": ..., "replies": [...]}],
"default": {...}, "model": ..., "owned_by": ...}`` with replies as objects
of `Reply`'s fields.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence


@dataclass
class Reply:
    """One scripted answer.

    ``content``: the assistant text, or a list of texts (one per choice when
    the request asks for ``n`` > 1; cycled if shorter). ``status`` != 200
    sends an OpenAI-style error body with ``error``. ``body`` replaces the
    whole response body verbatim (malformed JSON, HTML from a proxy...).
    ``delay_s`` waits before answering (timeouts).
    """

    content: str | list[str] = ""
    finish_reason: str = "stop"
    status: int = 200
    delay_s: float = 0.0
    body: str | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    usage: dict[str, int] | None = None

    @classmethod
    def truncated(cls, text: str, keep: int) -> "Reply":
        """``text`` cut after ``keep`` characters, as a server does at max_tokens."""
        return cls(content=text[:keep], finish_reason="length")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Reply":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown reply field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


@dataclass
class Rule:
    """Replies for requests whose last message contains ``contains`` (or satisfies ``match``)."""

    contains: str | None = None
    replies: list[Reply] = field(default_factory=list)
    match: Callable[[dict[str, Any]], bool] | None = None

    def matches(self, body: dict[str, Any]) -> bool:
        if self.match is not None:
            return bool(self.match(body))
        msgs = body.get("messages") or []
        last = msgs[-1].get("content", "") if msgs and isinstance(msgs[-1], dict) else ""
        return self.contains is not None and isinstance(last, str) and self.contains in last


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4) if text else 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    server: "_HTTPServer"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without TCP_NODELAY,
        # Nagle + delayed ACK add ~40 ms to every response
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), headers=headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": status}}, headers)

    def _authorised(self) -> bool:
        key = self.server.owner.api_key
        if key is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Incorrect API key provided")
        return False

    def do_GET(self) -> None:
        if not self._authorised():
            return
        owner = self.server.owner
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": owner.owned_by}
            ]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorised():
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._error(400, f"request body is not JSON: {exc}")
            return
        self.server.owner._serve_chat(self, body)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    owner: "ScriptedLLMServer"


class ScriptedLLMServer:
    """The scripted server; start/stop it or use it as a context manager."""

    def __init__(
        self,
        replies: Sequence[Reply | str] = (),
        rules: Sequence[Rule] = (),
        default: Reply | str | None = None,
        *,
        model: str = "scripted-model",
        owned_by: str = "vllm",
        api_key: str | None = None,
        refuse_fields: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._queue: deque[Reply] = deque(self._reply(r) for r in replies)
        self.rules: list[Rule] = list(rules)
        self._rule_queues = [deque(r.replies) for r in self.rules]
        self.default = self._reply(default) if default is not None else None
        self.model = model
        self.owned_by = owned_by
        self.api_key = api_key
        self.refuse_fields = tuple(refuse_fields)
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _reply(r: Reply | str) -> Reply:
        return Reply(content=r) if isinstance(r, str) else r

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> "ScriptedLLMServer":
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wake handlers sleeping in delays
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # ---- script -------------------------------------------------------------------

    def add(self, *replies: Reply | str) -> None:
        with self._lock:
            self._queue.extend(self._reply(r) for r in replies)

    def pending(self) -> int:
        """Sequence replies not yet served."""
        with self._lock:
            return len(self._queue)

    def _choose(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            for rule, q in zip(self.rules, self._rule_queues):
                if rule.matches(body) and q:
                    return q.popleft() if len(q) > 1 else q[0]
            if self._queue:
                return self._queue.popleft()
            return self.default

    def _serve_chat(self, handler: _Handler, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(handler, body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, handler: _Handler, body: dict[str, Any]) -> None:
        refused = [f for f in self.refuse_fields if f in body]
        if refused:
            handler._error(400, f"Unrecognized request argument supplied: {refused[0]}")
            return
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            handler._error(400, "'messages' must be a non-empty list")
            return
        reply = self._choose(body)
        if reply is None:
            handler._error(400, "no scripted reply for this request (script exhausted)")
            return
        if reply.delay_s > 0 and self._stop.wait(reply.delay_s):
            handler._error(503, "server shutting down")
            return
        if reply.body is not None:
            handler._send(reply.status, reply.body.encode("utf-8"), reply.content_type, reply.headers)
            return
        if reply.status != 200:
            handler._error(reply.status, reply.error or f"scripted HTTP {reply.status}", reply.headers)
            return
        n = int(body.get("n") or 1)
        contents = reply.content if isinstance(reply.content, list) else [reply.content]
        texts = [contents[i % len(contents)] for i in range(n)]
        prompt = sum(_tokens(m.get("content", "")) for m in body["messages"]
                     if isinstance(m, dict) and isinstance(m.get("content"), str))
        usage = reply.usage or {"prompt_tokens": prompt, "completion_tokens": sum(_tokens(t) for t in texts)}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        handler._json(200, {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t},
                 "finish_reason": reply.finish_reason, "logprobs": None}
                for i, t in enumerate(texts)
            ],
            "usage": usage,
        }, reply.headers)

    # ---- script files -------------------------------------------------------------

    @classmethod
    def from_script(cls, path: str | Path, **kwargs: Any) -> "ScriptedLLMServer":
        """A server from a JSON script file (see the module docstring)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a script is a JSON object with 'replies', 'rules', 'default'")

        def replies(items: Any, where: str) -> list[Reply]:
            if not isinstance(items, list):
                raise ValueError(f"{path}: {where} must be a list")
            out = []
            for i, item in enumerate(items):
                try:
                    out.append(Reply(content=item) if isinstance(item, str) else Reply.from_dict(item))
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"{path}: {where}[{i}]: {exc}") from None
            return out

        rules = []
        for i, r in enumerate(data.get("rules", [])):
            if not isinstance(r, dict) or "contains" not in r:
                raise ValueError(f"{path}: rules[{i}] needs 'contains' and 'replies'")
            rules.append(Rule(contains=str(r["contains"]), replies=replies(r.get("replies", []), f"rules[{i}].replies")))
        default = data.get("default")
        if isinstance(default, dict):
            default = Reply.from_dict(default)
        for key in ("model", "owned_by"):
            if key in data:
                kwargs.setdefault(key, data[key])
        return cls(replies=replies(data.get("replies", []), "replies"), rules=rules, default=default, **kwargs)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve scripted chat completions on 127.0.0.1.")
    ap.add_argument("script", nargs="?", help="JSON script; without one every request gets DEFAULT")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--default", default=None, help="reply text when the script has none")
    args = ap.parse_args(argv)
    if args.script:
        server = ScriptedLLMServer.from_script(args.script, port=args.port)
        if args.default is not None:
            server.default = Reply(args.default)
    else:
        server = ScriptedLLMServer(default=args.default or "OK", port=args.port)
    server.start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
