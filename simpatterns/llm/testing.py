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
is kept in ``server.requests``. ``stream: true`` is answered with SSE
chunks (``data: {...}`` lines, then ``data: [DONE]``).

**Profiles** (``ScriptedLLMServer(profile="vllm-0.10")``, names in
`PROFILES`) play a real server's protocol while the script still decides
the text: its ``/v1/models`` ``owned_by`` and other GET endpoints
(``/version``, ``/props``...), which request fields it applies, ignores with
200 or rejects (with that server's status and error text), what it does with
``n``, images, ``max_tokens``, usage and streaming. Each chat request gets an
entry in ``server.log`` (`Served`) saying what the server applied, e.g.
whether it enforced the grammar, so a test can hold the client's
``constrained`` claim against it. ``runaway_tokens=N`` makes any server
ignore ``max_tokens`` and answer N tokens. Without a profile the server
behaves as before profiles existed (everything accepted, ``n`` honoured, no
truncation).

Command line (for demos): ``python -m simpatterns.llm.testing SCRIPT.json
[--port 8000] [--profile NAME]``, or ``simpatterns llm serve-script``; the
script file is ``{"replies": [...], "rules": [{"contains": ..., "replies":
[...]}], "default": {...}, "model": ..., "owned_by": ..., "profile": ...}``
with replies as objects of `Reply`'s fields.
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
from dataclasses import dataclass, field, fields, replace
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


# ---- server profiles ----------------------------------------------------------------------

@dataclass(frozen=True)
class Refusal:
    """An error answer as a real server words it."""

    status: int
    message: str
    param: str | None = None
    code: Any = ...  # ``...``: the status


# fields every profile reads; anything else is profile-specific
_COMMON_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "seed", "stop", "stream",
                            "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
                            "user", "response_format", "tools", "tool_choice"})
# OpenAI's chat-completions parameters: the API refuses any other top-level field
OPENAI_CHAT_FIELDS = _COMMON_FIELDS | frozenset({
    "n", "max_tokens", "max_completion_tokens", "stream_options", "parallel_tool_calls", "reasoning_effort",
    "service_tier", "store", "metadata", "modalities", "audio", "prediction", "verbosity", "web_search_options",
    "safety_identifier", "prompt_cache_key", "functions", "function_call"})
_VLLM_FIELDS = frozenset({"n", "max_tokens", "max_completion_tokens", "stream_options", "top_k", "min_p",
                          "repetition_penalty", "min_tokens", "ignore_eos", "skip_special_tokens",
                          "chat_template_kwargs", "add_generation_prompt", "priority"})
_VLLM_GUIDED = frozenset({"guided_grammar", "guided_json", "guided_regex", "guided_choice",
                          "guided_decoding_backend"})
_LLAMA_SERVER_FIELDS = frozenset({"n_predict", "max_tokens", "grammar", "json_schema", "cache_prompt", "top_k",
                                  "min_p", "repeat_penalty", "n_probs", "id_slot", "samplers", "stream_options"})
_LLAMA_CPP_PYTHON_FIELDS = frozenset({"n", "max_tokens", "min_tokens", "grammar", "top_k", "min_p", "repeat_penalty",
                                      "mirostat_mode", "mirostat_tau", "mirostat_eta", "logit_bias_type",
                                      "functions", "function_call"})


@dataclass(frozen=True)
class Profile:
    """How one real server treats a chat request (protocol only; the script decides text).

    ``fields``: request fields it reads; others are ignored with 200 (and
    listed in `Served.ignored`), or refused when ``strict`` (OpenAI).
    ``grammar_fields``: the fields whose grammar it enforces. ``n``: ``all``
    (n choices), ``one`` (``n`` ignored: one choice) or ``refuse``
    (``n_refusal``). Images: seen with ``vision``; else ``image_refusal``, or
    without one they pass through the chat template as text, unseen.
    ``grammar_invalid`` None: an invalid grammar kills the server (the
    connection drops). ``reasoning``: refuses ``max_tokens`` and a
    temperature other than 1, spends ``reasoning_tokens`` hidden tokens of
    the limit first. ``stream_usage``: ``option`` (a usage chunk when
    ``stream_options.include_usage``), ``last`` (usage in the last chunk
    always) or ``never``. ``error_style``: ``openai`` (``{"error": {...}}``)
    or ``vllm-0.10`` (``{"object": "error", "message": ...}``).
    """

    name: str
    summary: str
    owned_by: str
    model: str
    fields: frozenset[str]
    grammar_fields: tuple[str, ...] = ()
    strict: bool = False
    other_models: tuple[str, ...] = ()
    model_entry: dict[str, Any] = field(default_factory=dict)
    get: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    n: str = "all"
    n_refusal: Refusal | None = None
    vision: bool = False
    image_refusal: Refusal | None = None
    grammar_invalid: Refusal | None = None
    reasoning: bool = False
    reasoning_tokens: int = 0
    max_tokens_fields: tuple[str, ...] = ("max_tokens",)
    usage: bool = True
    stream_usage: str = "option"
    stream_options_refusal: Refusal | None = None
    error_style: str = "openai"
    cache_prompt_field: bool = False


def _vllm(version: str, grammar_fields: tuple[str, ...], extra: frozenset[str], error_style: str) -> Profile:
    model = "Qwen/Qwen2.5-7B-Instruct"
    return Profile(
        name=f"vllm-{version.rsplit('.', 1)[0]}" if version < "0.12" else "vllm",
        summary=f"vLLM {version} (`vllm serve`, a text-only model)",
        owned_by="vllm", model=model, fields=_COMMON_FIELDS | _VLLM_FIELDS | extra, grammar_fields=grammar_fields,
        model_entry={"root": model, "parent": None, "max_model_len": 32768,
                     "permission": [{"object": "model_permission", "allow_sampling": True}]},
        get={"/version": {"version": version}, "/health": None},
        # vllm/multimodal: a text-only model takes no image item
        image_refusal=Refusal(400, "At most 0 image(s) may be provided in one prompt."),
        grammar_invalid=Refusal(400, "Invalid grammar specification."),
        stream_options_refusal=Refusal(400, "Stream options can only be defined when `stream=True`."),
        error_style=error_style,
    )


def _llama_server(old: bool) -> Profile:
    model = "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    props: dict[str, Any] = {
        "default_generation_settings": {"n_ctx": 4096, "params": {"n_predict": -1, "temperature": 0.8,
                                                                   "cache_prompt": True}},
        "total_slots": 1 if old else 4,
        "chat_template": "{% for message in messages %}<|im_start|>{{ message.role }}\n"
                         "{{ message.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n",
        "build_info": "b4719-2eb4d1f" if old else "b7100-a1b2c3d",
    }
    if not old:
        props["modalities"] = {"vision": False, "audio": False}
    return Profile(
        name="llama-server-old" if old else "llama-server",
        summary=("llama.cpp `llama-server` before multimodal support (early 2025 builds)" if old
                 else "llama.cpp `llama-server`, current build, no `--mmproj`"),
        owned_by="llamacpp", model=model,
        fields=_COMMON_FIELDS | _LLAMA_SERVER_FIELDS | (frozenset() if old else {"n", "max_completion_tokens"}),
        grammar_fields=("grammar",),
        model_entry={"meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768, "n_params": 1543714304}},
        get={"/props": props, "/health": {"status": "ok"}},
        # old builds threw from the request parser: httplib's handler answers 500
        n="refuse" if old else "all",
        n_refusal=Refusal(500, "Only one completion choice is allowed") if old else None,
        image_refusal=(Refusal(500, "image input is not supported by this server") if old else
                       Refusal(400, "image input is not supported - hint: if this is unexpected, "
                                    "you may need to provide the mmproj")),
        grammar_invalid=Refusal(400, "Failed to parse grammar" if old
                                else "Failed to initialize samplers: failed to parse grammar"),
        max_tokens_fields=("n_predict", "max_tokens") if old else ("n_predict", "max_tokens", "max_completion_tokens"),
        stream_usage="last" if old else "option",
        cache_prompt_field=True,
    )


_OPENAI_STREAM_OPTIONS = Refusal(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                                 param="stream_options", code="invalid_value")

_VLLM_CURRENT = _vllm("0.12.0", ("structured_outputs",), frozenset({"structured_outputs"}), "openai")
_LLAMA_SERVER_CURRENT = _llama_server(old=False)

PROFILES: dict[str, Profile] = {p.name: p for p in (
    _vllm("0.10.2", ("guided_grammar",), _VLLM_GUIDED, "vllm-0.10"),
    # 0.11 added structured_outputs and still maps the deprecated guided_* fields onto it
    _vllm("0.11.0", ("structured_outputs", "guided_grammar"), _VLLM_GUIDED | {"structured_outputs"}, "openai"),
    # 0.12 removed guided_*: they are extra fields now, logged and ignored
    _VLLM_CURRENT,
    _llama_server(old=True),
    _LLAMA_SERVER_CURRENT,
    Profile(
        name="llama-cpp-python", summary="`python -m llama_cpp.server` (llama-cpp-python), no chat handler for images",
        owned_by="me", model="models/qwen2.5-1.5b-instruct-q4_k_m.gguf", fields=_COMMON_FIELDS | _LLAMA_CPP_PYTHON_FIELDS,
        grammar_fields=("grammar",), model_entry={"permissions": []},
        n="one",  # parsed, then excluded from the call
        stream_usage="never",
    ),
    Profile(
        name="openai", summary="OpenAI API, a chat model", owned_by="system", model="gpt-4o-mini",
        other_models=("gpt-4.1-mini", "gpt-5-mini", "o4-mini"), fields=OPENAI_CHAT_FIELDS, strict=True,
        headers={"openai-organization": "org-scripted", "openai-processing-ms": "1"}, vision=True,
        stream_options_refusal=_OPENAI_STREAM_OPTIONS,
    ),
    Profile(
        name="openai-reasoning", summary="OpenAI API, a reasoning model (o-series, GPT-5)", owned_by="system",
        model="gpt-5-mini", other_models=("gpt-4o-mini", "o4-mini"), fields=OPENAI_CHAT_FIELDS, strict=True,
        headers={"openai-organization": "org-scripted", "openai-processing-ms": "1"}, vision=True,
        reasoning=True, reasoning_tokens=32, max_tokens_fields=("max_completion_tokens",),
        stream_options_refusal=_OPENAI_STREAM_OPTIONS,
    ),
    Profile(
        name="proxy", summary="an unknown OpenAI-compatible proxy: ignores unknown fields and `n`, reports no usage",
        owned_by="custom", model="team/chat-model", fields=_COMMON_FIELDS | {"max_tokens"}, n="one", vision=True,
        usage=False, stream_usage="never",
    ),
    Profile(
        name="ollama", summary="Ollama's OpenAI-compatible API (`/v1`), a vision model", owned_by="library",
        model="gemma3:4b", fields=_COMMON_FIELDS | {"max_tokens", "stream_options", "reasoning_effort"},
        get={"/api/version": {"version": "0.12.3"},
             "/api/tags": {"models": [{"name": "gemma3:4b", "model": "gemma3:4b", "size": 3338801804,
                                       "details": {"family": "gemma3", "parameter_size": "4.3B",
                                                   "quantization_level": "Q4_K_M"}}]}},
        n="one", vision=True,  # its request struct has no `n`
    ),
    Profile(
        name="lmstudio", summary="LM Studio's server, a vision model", owned_by="organization_owner",
        model="qwen2.5-vl-7b-instruct", fields=_COMMON_FIELDS | {"max_tokens", "stream_options", "top_k"},
        get={"/api/v0/models": {"object": "list", "data": [
            {"id": "qwen2.5-vl-7b-instruct", "object": "model", "type": "vlm", "publisher": "lmstudio-community",
             "arch": "qwen2_vl", "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
             "max_context_length": 32768}]}},
        n="one", vision=True,
    ),
    Profile(
        name="sglang", summary="SGLang (`python -m sglang.launch_server`), a vision model", owned_by="sglang",
        model="Qwen/Qwen2.5-VL-7B-Instruct",
        fields=_COMMON_FIELDS | {"n", "max_tokens", "max_completion_tokens", "stream_options", "ebnf", "regex",
                                 "top_k", "min_p", "repetition_penalty", "separate_reasoning"},
        grammar_fields=("ebnf",),
        get={"/get_model_info": {"model_path": "Qwen/Qwen2.5-VL-7B-Instruct",
                                 "tokenizer_path": "Qwen/Qwen2.5-VL-7B-Instruct", "is_generation": True},
             "/get_server_info": {"version": "0.5.3"}, "/health": None},
        vision=True, grammar_invalid=Refusal(400, "Invalid grammar request"),
    ),
    replace(_LLAMA_SERVER_CURRENT, name="llama-swap", owned_by="llama-swap",
            summary="llama-swap in front of a current `llama-server`",
            get={"/running": {"running": [{"model": _LLAMA_SERVER_CURRENT.model, "state": "ready"}]},
                 f"/upstream/{_LLAMA_SERVER_CURRENT.model}/props": _LLAMA_SERVER_CURRENT.get["/props"],
                 "/health": "OK"}),
    replace(_VLLM_CURRENT, name="litellm", owned_by="openai", summary="LiteLLM proxy in front of vLLM 0.12",
            model="qwen", model_entry={}, get={"/health/liveliness": "I'm alive!"},
            headers={"x-litellm-version": "1.77.5", "x-litellm-model-api-base": "http://vllm:8000/v1"},
            image_refusal=Refusal(400, "litellm.BadRequestError: Hosted_vllmException - "
                                       "At most 0 image(s) may be provided in one prompt."),
            error_style="openai"),
)}


@dataclass
class Served:
    """What a profiled server did with one chat request (``server.log``)."""

    status: int
    grammar_field: str | None = None  # the field whose grammar was enforced
    ignored: list[str] = field(default_factory=list)  # fields sent but ignored with 200
    n_requested: int = 1
    n_returned: int = 0
    max_tokens: int | None = None  # the limit applied (None: none)
    completion_tokens: int = 0  # generated, hidden reasoning included
    images: int = 0
    images_seen: bool = False
    stream: bool = False
    stream_complete: bool | None = None  # False: the client hung up first
    cache_prompt: bool | None = None  # llama-server's prompt cache for this request
    error: str | None = None

    @property
    def grammar_applied(self) -> bool:
        return self.grammar_field is not None


def _image_parts(messages: list[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
               for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")


IMAGE_TOKENS = 256  # prompt tokens of an image the model sees, whatever its bytes (a fixed patch grid)


def _prompt_tokens(messages: list[Any], images_seen: bool, profiled: bool) -> int:
    """Text at 4 characters a token; an image a model sees costs `IMAGE_TOKENS`, one passed
    through the chat template as text costs its data URL (without a profile: nothing)."""
    total = 0
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for p in parts if isinstance(parts, list) else []:
            if not isinstance(p, dict):
                continue
            if p.get("type") == "text":
                total += _tokens(str(p.get("text", "")))
            elif p.get("type") == "image_url" and profiled:
                url = p.get("image_url", {}).get("url", "") if isinstance(p.get("image_url"), dict) else ""
                total += IMAGE_TOKENS if images_seen else _tokens(str(url))
    return total


def _grammar_text(name: str, value: Any) -> str | None:
    if name == "structured_outputs":
        return value.get("grammar") if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


def _grammar_ok(text: str) -> bool:
    from simpatterns.llm.grammars import GBNF, GrammarError

    try:
        GBNF.parse(text)
    except GrammarError:
        return False
    return True



_CRASH = object()  # `_protocol`'s answer when the real server would die on the request


def _stream_events(cid: str, created: int, model: str, texts: list[str], reasons: list[str],
                   usage: dict[str, Any] | None, mode: str) -> Any:
    """Chat-completion chunks as the servers send them: a role delta, content deltas,
    a finish chunk per choice; usage in the last chunk (``mode="last"``) or its own
    chunk with no choices; then ``[DONE]``."""
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}

    def chunk(i: int, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {**base, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    for i, (text, reason) in enumerate(zip(texts, reasons)):
        yield chunk(i, {"role": "assistant", "content": ""}, None)
        step = max(16, -(-len(text) // 500))  # a few tokens a chunk, at most ~500 chunks a choice
        for k in range(0, len(text), step):
            yield chunk(i, {"content": text[k:k + step]}, None)
        last = chunk(i, {}, reason)
        if usage is not None and mode == "last" and i == len(texts) - 1:
            last["usage"] = usage
        yield last
    if usage is not None and mode != "last":
        yield {**base, "choices": [], "usage": usage}
    yield "[DONE]"


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

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None,
               param: str | None = None, code: Any = ...) -> None:
        profile = self.server.owner.profile
        kind = "invalid_request_error" if status < 500 else "server_error"
        if profile is not None and profile.error_style == "vllm-0.10":
            body: dict[str, Any] = {"object": "error", "message": message, "type": "BadRequestError",
                                    "param": param, "code": status}
        else:
            body = {"error": {"message": message, "type": kind, "param": param,
                              "code": status if code is ... else code}}
        self._json(status, body, {**(profile.headers if profile else {}), **(headers or {})})

    def _refuse(self, refusal: Refusal) -> None:
        self._error(refusal.status, refusal.message, param=refusal.param, code=refusal.code)

    def _stream(self, events: Any, headers: dict[str, str] | None = None,
                done: Callable[[bool], None] = lambda ok: None) -> None:
        """SSE in chunked transfer encoding; ``done(True)`` just before the last event
        goes out (the client may stop reading at it), ``done(False)`` when the client
        hung up first."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            for event in events:
                if event == "[DONE]":
                    done(True)
                data = f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode("utf-8")
                self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            done(False)

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
        profile = owner.profile
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            ids = [owner.model] + [m for m in (profile.other_models if profile else ()) if m != owner.model]
            entry = profile.model_entry if profile else {}
            created = {} if profile is not None and profile.owned_by == "me" else {"created": 0}
            self._json(200, {"object": "list", "data": [
                {"id": i, "object": "model", **created, "owned_by": owner.owned_by, **entry} for i in ids
            ]}, profile.headers if profile else None)
        elif profile is not None and path in profile.get:
            body = profile.get[path]
            if isinstance(body, dict) and "modalities" in body:  # llama-server's /props
                body = {**body, "modalities": {**body["modalities"], "vision": owner.vision}}
            if body is None:  # vLLM's /health: 200, empty body
                self._send(200, b"", headers=profile.headers)
            else:
                self._json(200, body, profile.headers)
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

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hung up (its timeout, a cancelled request) is no error of the server's:
        # socketserver would print a traceback for each one
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class ScriptedLLMServer:
    """The scripted server; start/stop it or use it as a context manager."""

    def __init__(
        self,
        replies: Sequence[Reply | str] = (),
        rules: Sequence[Rule] = (),
        default: Reply | str | None = None,
        *,
        model: str | None = None,
        owned_by: str | None = None,
        api_key: str | None = None,
        refuse_fields: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        profile: str | Profile | None = None,
        vision: bool | None = None,
        runaway_tokens: int | None = None,
    ) -> None:
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"unknown server profile {profile!r}; known: {', '.join(PROFILES)}")
            profile = PROFILES[profile]
        self.profile: Profile | None = profile
        self._queue: deque[Reply] = deque(self._reply(r) for r in replies)
        self.rules: list[Rule] = list(rules)
        self._rule_queues = [deque(r.replies) for r in self.rules]
        self.default = self._reply(default) if default is not None else None
        self.model = model or (profile.model if profile else "scripted-model")
        self.owned_by = owned_by or (profile.owned_by if profile else "vllm")
        # whether the model takes images (a profile's default unless overridden)
        self.vision = (profile.vision if vision is None else vision) if profile else vision
        self.runaway_tokens = runaway_tokens
        self.log: list[Served] = []
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
    def _reply(r: Reply | str | list[str]) -> Reply:
        return Reply(content=r) if isinstance(r, (str, list)) else r

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
        served = Served(status=200, n_requested=int(body.get("n") or 1), stream=bool(body.get("stream")),
                        images=_image_parts(body["messages"]))
        if self.profile is not None:  # logged first: filled in before the client can read the answer
            with self._lock:
                self.log.append(served)
        self._serve(handler, body, served)

    def _serve(self, handler: _Handler, body: dict[str, Any], served: Served) -> None:
        profile = self.profile
        if profile is not None:
            refusal = self._protocol(profile, body, served)
            if refusal is _CRASH:  # the real server dies: the client sees the connection drop
                served.status, served.error = 0, "connection dropped (invalid grammar)"
                handler.close_connection = True
                return
            if isinstance(refusal, Refusal):
                served.status, served.error = refusal.status, refusal.message
                handler._refuse(refusal)
                return
        reply = self._choose(body)
        if reply is None:
            served.status, served.error = 400, "script exhausted"
            handler._error(400, "no scripted reply for this request (script exhausted)")
            return
        if reply.delay_s > 0 and self._stop.wait(reply.delay_s):
            served.status = 503
            handler._error(503, "server shutting down")
            return
        if reply.body is not None:
            served.status = reply.status
            handler._send(reply.status, reply.body.encode("utf-8"), reply.content_type, reply.headers)
            return
        if reply.status != 200:
            served.status, served.error = reply.status, reply.error
            handler._error(reply.status, reply.error or f"scripted HTTP {reply.status}", reply.headers)
            return
        n = served.n_requested if profile is None or profile.n == "all" else 1
        contents = reply.content if isinstance(reply.content, list) else [reply.content]
        texts = [contents[i % len(contents)] for i in range(n)]
        reasons = [reply.finish_reason] * n
        hidden = profile.reasoning_tokens if profile is not None and profile.reasoning else 0
        limit = None
        if self.runaway_tokens:  # a server that ignores max_tokens and keeps talking
            filler = " and so on" * (self.runaway_tokens * 4 // 10 + 1)
            texts = [(t + filler)[: self.runaway_tokens * 4] for t in texts]
            reasons = ["stop"] * n
        elif profile is not None:
            limit = next((int(body[f]) for f in profile.max_tokens_fields if body.get(f) is not None), None)
            if limit is not None:
                room = max(limit - hidden, 0)
                for i, t in enumerate(texts):
                    if _tokens(t) > room:
                        texts[i], reasons[i] = t[: room * 4], "length"
        prompt = _prompt_tokens(body["messages"], served.images_seen, profile is not None)
        usage = reply.usage or {"prompt_tokens": prompt,
                                "completion_tokens": sum(_tokens(t) for t in texts) + hidden * n}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        if hidden:
            usage["completion_tokens_details"] = {"reasoning_tokens": hidden * n}
        served.n_returned, served.max_tokens, served.completion_tokens = n, limit, usage["completion_tokens"]
        report_usage = profile.usage if profile is not None else True
        headers = {**(profile.headers if profile else {}), **reply.headers}
        cid, created, model = f"chatcmpl-{next(self._ids)}", int(time.time()), body.get("model", self.model)
        if served.stream:
            mode = profile.stream_usage if profile is not None else "option"
            options = body.get("stream_options")
            wants = isinstance(options, dict) and bool(options.get("include_usage"))
            events = _stream_events(cid, created, model, texts, reasons,
                                    usage if mode == "last" or (mode == "option" and wants) else None, mode)
            handler._stream(events, headers, done=lambda ok: setattr(served, "stream_complete", ok))
            return
        out: dict[str, Any] = {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t},
                 "finish_reason": r, "logprobs": None}
                for i, (t, r) in enumerate(zip(texts, reasons))
            ],
        }
        if report_usage:
            out["usage"] = usage
        handler._json(200, out, headers)

    def _protocol(self, profile: Profile, body: dict[str, Any], served: Served) -> Refusal | object | None:
        """What ``profile`` refuses before generating (None: it generates); fills ``served``."""
        unknown = sorted(set(body) - profile.fields)
        if profile.strict and unknown:
            return Refusal(400, f"Unrecognized request argument supplied: {unknown[0]}", code=None)
        served.ignored = unknown
        if profile.reasoning:
            if "max_tokens" in body:
                return Refusal(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                    "Use 'max_completion_tokens' instead.", param="max_tokens",
                               code="unsupported_parameter")
            t = body.get("temperature")
            if t is not None and t != 1:
                return Refusal(400, f"Unsupported value: 'temperature' does not support {t} with this model. "
                                    "Only the default (1) value is supported.", param="temperature",
                               code="unsupported_value")
        if ("stream_options" in body and not body.get("stream") and "stream_options" in profile.fields
                and profile.stream_options_refusal is not None):
            return profile.stream_options_refusal
        if served.n_requested > 1 and profile.n == "refuse":
            return profile.n_refusal
        if served.images:
            if self.vision:
                served.images_seen = True
            elif profile.image_refusal is not None:
                return profile.image_refusal
        for name in profile.grammar_fields:
            text = _grammar_text(name, body.get(name))
            if text is None:
                continue
            if not _grammar_ok(text):
                return profile.grammar_invalid or _CRASH
            served.grammar_field = name
            break
        if profile.cache_prompt_field:
            served.cache_prompt = bool(body.get("cache_prompt", True))
        return None

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
        for key in ("model", "owned_by", "profile"):
            if key in data:
                kwargs.setdefault(key, data[key])
        try:
            return cls(replies=replies(data.get("replies", []), "replies"), rules=rules, default=default, **kwargs)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve scripted chat completions on 127.0.0.1.")
    ap.add_argument("script", nargs="?", help="JSON script; without one every request gets DEFAULT")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--default", default=None, help="reply text when the script has none")
    ap.add_argument("--profile", default=None, choices=sorted(PROFILES),
                    help="play this real server's protocol (see PROFILES)")
    args = ap.parse_args(argv)
    options: dict[str, Any] = {"port": args.port}
    if args.profile is not None:
        options["profile"] = args.profile
    try:
        if args.script:
            server = ScriptedLLMServer.from_script(args.script, **options)
            if args.default is not None:
                server.default = Reply(args.default)
        else:
            server = ScriptedLLMServer(default=args.default or "OK", **options)
    except ValueError as exc:  # a bad script or profile: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
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
