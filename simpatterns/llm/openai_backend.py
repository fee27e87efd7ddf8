"""OpenAI-compatible HTTP backend (vLLM, llama.cpp servers, Ollama, SGLang, LM Studio, proxies, OpenAI).

Uses the ``openai`` package (its own retries off: the `LLMClient` retries,
so every attempt is budgeted and lands in the transcript). What the server
is, is asked once (`simpatterns.llm.server.probe_server`); the request is
built for it and every answer is checked against the request:

- Grammars go out as GBNF (validated first: an invalid grammar crashes a
  llama.cpp server) in the field the server reads (`ServerInfo.grammar_field`);
  ``Completion.constrained`` is true only where the server is known to
  apply it. ``grammar="on"`` also sends ``structured_outputs`` to servers
  without a known field (never counted as enforced); ``"off"`` sends none.
  A refusal of the grammar (the servers' own error texts, `grammar_refusal`)
  turns grammars off for the session and the request is sent again.
- Answers are streamed and reading stops at ``max_tokens`` per choice, so a
  server that ignores ``max_tokens`` cannot overrun the job's budget.
- Fewer choices than ``n``: the rest are asked for one at a time. A server
  that refuses ``n`` > 1, or is known to ignore it, gets ``n`` single requests.
- Reasoning models (o1/o3/o4/gpt-5) get ``max_completion_tokens`` and no
  temperature; any model whose server refuses ``max_tokens``, ``temperature``,
  ``stop``, ``seed`` or ``stream_options`` by name is switched once (stop
  strings are then applied here).
- A request with images is refused in one line when the server says the model
  takes none (or answers an image with an error about images).
- With a seed, llama-server gets ``cache_prompt: false`` (a cached prefix
  changes the numbers, so the text, between runs).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import json
import logging
import os
import random
import re
import string
import struct
import threading
import time
import urllib.error
import urllib.request
import zlib
from typing import Any

import openai

from simpatterns.llm.client import LLMBackend
from simpatterns.llm.errors import LLMBackendError, LLMConfigError
from simpatterns.llm.grammars import GBNF, GrammarError, as_gbnf
from simpatterns.llm.request import (
    BYTES_PER_TOKEN_ESTIMATE,
    MAX_BYTES_PER_TOKEN,
    ChatRequest,
    Completion,
    Usage,
    has_images,
)
from simpatterns.llm.server import LOCAL, ONE_AT_A_TIME, ServerInfo, is_reasoning_model, probe_server, root_url

log = logging.getLogger(__name__)

ENV_BASE_URL = ("SIMPATTERNS_LLM_BASE_URL", "OPENAI_BASE_URL")
ENV_MODEL = ("SIMPATTERNS_LLM_MODEL",)
ENV_API_KEY = ("SIMPATTERNS_LLM_API_KEY", "OPENAI_API_KEY")
GRAMMAR_MODES = ("auto", "on", "off")
GRAMMAR_FIELDS = ("structured_outputs", "guided_grammar", "grammar")
# The servers' own words for "this grammar is not taken" (vLLM with xgrammar/guidance/outlines,
# llama-server, llama-cpp-python); a field the server forbids is recognised by name below.
_GRAMMAR_ERRORS = ("invalid grammar", "failed to parse grammar", "error parsing grammar", "grammar error",
                   "failed to initialize sampl", "failed to convert the grammar", "grammar is not supported",
                   "ebnf", "llguidance", "xgrammar", "parse_grammar", "grammar_init")
# how servers say a request field is not theirs (pydantic extra="forbid", OpenAI, llama.cpp)
_UNKNOWN_FIELD = ("extra inputs are not permitted", "unrecognized request argument", "unsupported parameter",
                  "unexpected keyword argument", "unknown field", "is not supported with this model",
                  "unsupported value")
_IMAGE_ERRORS = ("image", "mmproj", "multimodal", "multi-modal", "vision")
_N_REFUSED = re.compile(r"only one completion choice|(['\"`]|\b)n(['\"`]|\b)\s*(must|should|>|can ?not|"
                        r"is not supported|not supported|only|= ?1)|\bparameter n\b|\bn > 1\b|\bn=\d+ is",
                        re.IGNORECASE)
# fields a server may refuse by name and what we do without them
_DROPPABLE = ("temperature", "stop", "seed", "stream_options", "cache_prompt", "stream")
NON_STREAM_SLACK_BYTES = 65536
PROBE_MAX_BYTES = 1 << 20  # a probe's answer is small; more is not read
VISION_PROBE_TEXT = "What colour is this image? One word."  # the capability probe's question
VISION_PROBE_PAD = 1200  # bytes of text chunk: >= 1600 base64 characters, hundreds of tokens as text
VISION_PROBE_SIDE = 64


def _blank_png(pad: int, side: int = VISION_PROBE_SIDE) -> bytes:
    """A white ``side`` x ``side`` PNG with a ``pad``-byte text chunk of pseudo-random letters (no
    compressible run). Big enough for every vision processor (Qwen-VL's patches are 28-32 pixels)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    letters = random.Random(pad).choices(string.ascii_letters, k=pad)
    text = chunk(b"tEXt", b"Comment\x00" + "".join(letters).encode()) if pad else b""
    rows = (b"\x00" + b"\xff" * 3 * side) * side  # filter byte 0, then RGB white
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) + text
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _env(names: tuple[str, ...]) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if body.get("detail"):
            return str(body["detail"])
        if body.get("message"):
            return str(body["message"])
    return str(exc.message)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _names(field: str, text: str) -> bool:
    return re.search(rf"(['\"`]|\b){re.escape(field)}(['\"`]|\b)", text) is not None


def grammar_refusal(text: str, field: str) -> bool:
    """Whether an error text says the server will not take the grammar sent in ``field``."""
    low = text.lower()
    if any(w in low for w in _GRAMMAR_ERRORS):
        return True
    return _names(field, low) and any(w in low for w in _UNKNOWN_FIELD)


def refused_param(text: str, sent: dict[str, Any]) -> str | None:
    """The sent field an error text refuses by name (``max_tokens``, ``temperature``...), or None."""
    low = text.lower()
    if not any(w in low for w in _UNKNOWN_FIELD + ("not supported", "does not support", "only the default")):
        return None
    for name in ("max_tokens",) + _DROPPABLE:
        if name in sent and _names(name, low):
            return name
    return None


@dataclasses.dataclass
class _Choice:
    text: list[str] = dataclasses.field(default_factory=list)
    deltas: int = 0
    nbytes: int = 0
    finish: str | None = None
    cut: bool = False  # we stopped reading it at max_tokens

    @property
    def tokens(self) -> int:
        """Tokens read so far: one per delta, and at least the bytes' estimate (servers may put
        several tokens in one delta, e.g. vLLM's --stream-interval)."""
        return max(self.deltas, -(-self.nbytes // BYTES_PER_TOKEN_ESTIMATE))


class _Reader:
    """Reads a streamed (SSE) or plain chat completion and says when to stop reading."""

    def __init__(self, request: ChatRequest, where: str) -> None:
        self.request = request
        self.where = where
        self.choices: dict[int, _Choice] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.cut = False

    def feed_line(self, line: str) -> bool:
        """One SSE line; True when reading should stop."""
        line = line.strip()
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise LLMBackendError(f"malformed stream from {self.where}: {data[:200]!r}", kind="malformed") from exc
        if not isinstance(chunk, dict):
            raise LLMBackendError(f"malformed stream from {self.where}: {data[:200]!r}", kind="malformed")
        if chunk.get("error") is not None or chunk.get("object") == "error":
            err = chunk.get("error", chunk)
            msg = err.get("message") if isinstance(err, dict) else err
            raise LLMBackendError(f"error in the stream from {self.where}: {msg}", kind="server")
        self.model = self.model or chunk.get("model")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for c in chunk.get("choices") or []:
            if not isinstance(c, dict):
                continue
            index = c.get("index") if isinstance(c.get("index"), int) else 0
            if index >= self.request.n:
                continue  # more choices than asked: not ours
            ch = self.choices.setdefault(index, _Choice())
            if ch.cut:
                continue
            delta = c.get("delta") or c.get("message") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(piece, str) and piece:
                raw = piece.encode("utf-8", "replace")
                room = self.request.max_tokens * BYTES_PER_TOKEN_ESTIMATE - ch.nbytes
                if ch.deltas + 1 > self.request.max_tokens or len(raw) > room:
                    # past max_tokens: the server ignores it; keep what fits, read this choice no further
                    kept = raw[:max(room, 0)].decode("utf-8", "ignore") if ch.deltas < self.request.max_tokens else ""
                    if kept:
                        ch.text.append(kept)
                        ch.deltas += 1
                        ch.nbytes += len(kept.encode("utf-8"))
                    ch.finish, ch.cut, self.cut = "length", True, True
                    continue
                ch.text.append(piece)
                ch.deltas += 1
                ch.nbytes += len(raw)
            if c.get("finish_reason"):
                ch.finish = str(c["finish_reason"])
        # a choice cut at max_tokens: stop once every choice seen has ended (the usage chunk is not waited for)
        return self.cut and all(c.finish for c in self.choices.values())

    def feed_body(self, body: bytes) -> None:
        """A whole (non-streamed) chat completion; SSE sent under another content type is read as SSE."""
        if body.lstrip().startswith(b"data:"):
            for line in body.decode("utf-8", "replace").splitlines():
                if self.feed_line(line):
                    break
            return
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise LLMBackendError(f"malformed response from {self.where}: {body[:200]!r}", kind="malformed") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise LLMBackendError(f"malformed response from {self.where}: no choices in {str(data)[:200]!r}",
                                  kind="malformed")
        self.model = data.get("model")
        if isinstance(data.get("usage"), dict):
            self.usage = data["usage"]
        for pos, c in enumerate(data["choices"]):
            msg = c.get("message") if isinstance(c, dict) else None
            if not isinstance(msg, dict) or "content" not in msg:
                raise LLMBackendError(f"malformed response from {self.where}: a choice without a message: "
                                      f"{str(c)[:200]!r}", kind="malformed")
            content = msg["content"]
            if content is not None and not isinstance(content, str):
                raise LLMBackendError(f"malformed response from {self.where}: message content is "
                                      f"{type(content).__name__}", kind="malformed")
            index = c.get("index") if isinstance(c.get("index"), int) else pos
            if index >= self.request.n:
                continue
            ch = self.choices.setdefault(index, _Choice())
            text = content or ""
            ch.text, ch.nbytes = [text], len(text.encode("utf-8", "replace"))
            ch.finish = str(c.get("finish_reason") or "unknown")
        # believed: usage within n x max_tokens and plausible for the bytes; else each answer is cut
        # to what max_tokens allows at the usual bytes per token
        told = int((self.usage or {}).get("completion_tokens") or 0)
        total = sum(ch.nbytes for ch in self.choices.values())
        if not (0 < told <= self.request.n * self.request.max_tokens and total <= told * MAX_BYTES_PER_TOKEN):
            limit = self.request.max_tokens * BYTES_PER_TOKEN_ESTIMATE
            for ch in self.choices.values():
                raw = "".join(ch.text).encode("utf-8", "replace")
                if len(raw) > limit:
                    ch.text, ch.nbytes = [raw[:limit].decode("utf-8", "ignore")], limit
                    ch.finish, ch.cut, self.cut = "length", True, True

    def completion(self, default_model: str) -> Completion:
        if not self.choices:
            raise LLMBackendError(f"malformed response from {self.where}: no choices", kind="malformed")
        order = sorted(self.choices)
        texts = ["".join(self.choices[i].text) for i in order]
        reasons = [self.choices[i].finish or "unknown" for i in order]
        read = sum(self.choices[i].tokens for i in order)
        u = self.usage or {}
        prompt = int(u.get("prompt_tokens") or 0)
        completion = int(u.get("completion_tokens") or 0)
        if self.cut or completion <= 0:
            completion = read  # we stopped reading: charge what was read
        return Completion(texts=texts, usage=Usage(prompt, completion), model=str(self.model or default_model),
                          finish_reasons=reasons)


@functools.lru_cache(maxsize=32)
def _parsed_gbnf(gbnf: str) -> GBNF:
    return GBNF.parse(gbnf)


def _apply_stop(c: Completion, stop: list[str] | None) -> Completion:
    """Stop strings applied here too: a server may have ignored them (or been told none)."""
    if not stop:
        return c
    texts, reasons = [], []
    for t, r in zip(c.texts, c.finish_reasons):
        cuts = [t.index(s) for s in stop if s and s in t]
        texts.append(t[: min(cuts)] if cuts else t)
        reasons.append("stop" if cuts else r)
    return dataclasses.replace(c, texts=texts, finish_reasons=reasons)


class OpenAIBackend(LLMBackend):
    """Chat completions over HTTP with the ``openai`` package.

    ``base_url``, ``model`` and ``api_key`` default to the environment
    (``SIMPATTERNS_LLM_BASE_URL`` / ``OPENAI_BASE_URL``,
    ``SIMPATTERNS_LLM_MODEL``, ``SIMPATTERNS_LLM_API_KEY`` /
    ``OPENAI_API_KEY``). Without a model the server's only model (from
    ``/v1/models``) is used, as a vLLM server serves one.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        grammar: str = "auto",
        extra_body: dict[str, Any] | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        if grammar not in GRAMMAR_MODES:
            raise LLMConfigError(f"grammar mode must be one of {GRAMMAR_MODES}, got {grammar!r}")
        self.base_url = base_url or _env(ENV_BASE_URL)
        self._model = model or _env(ENV_MODEL)
        key = api_key or _env(ENV_API_KEY)
        if key is None:
            if self.base_url is None:
                raise LLMConfigError(
                    "no LLM server configured: pass --base-url (e.g. http://localhost:8000/v1 for `vllm serve`) "
                    "or set SIMPATTERNS_LLM_BASE_URL; for a hosted provider also set OPENAI_API_KEY"
                )
            key = "EMPTY"  # local servers started without --api-key accept any key
        self._api_key = key
        self.grammar_mode = grammar
        self.extra_body = dict(extra_body or {})
        self._connect_timeout_s = connect_timeout_s
        self._sync = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0)
        self._async: openai.AsyncOpenAI | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._async_guard: asyncio.Task | None = None
        self._lock = threading.RLock()  # server_info holds it while server_models takes it
        self._server_models: list[dict[str, Any]] | None = None
        self._models_headers: dict[str, str] = {}
        self._info: ServerInfo | None = None
        self._grammar_refused: str | None = None
        self._split_n = False  # the server refused n > 1: one request per choice from then on
        self._reasoning: bool | None = None  # max_completion_tokens, no temperature
        self._dropped: set[str] = set()  # fields the server refused by name
        self._no_vision: str | None = None  # why the model takes no images (said by the server)
        self._grammar_ignored: str | None = None  # an answer broke the grammar: the server does not apply it

    # ---- server facts -----------------------------------------------------------

    @property
    def url(self) -> str:
        return str(self._sync.base_url).rstrip("/")

    def _fetch(self, method: str, path: str, body: Any = None, base: str | None = None
               ) -> tuple[int, Any, dict[str, str]]:
        """One probe request (status 0 when nothing answered)."""
        req = urllib.request.Request((base or root_url(self.url)) + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self._api_key}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self._connect_timeout_s) as r:
                status, raw, headers = r.status, r.read(PROBE_MAX_BYTES), r.headers
        except urllib.error.HTTPError as exc:
            status, raw, headers = exc.code, exc.read(PROBE_MAX_BYTES), exc.headers
        except (OSError, ValueError):  # refused, timed out, not HTTP
            return 0, None, {}
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw.decode("utf-8", "replace")
        return status, data, {k.lower(): v for k, v in headers.items()}

    def server_models(self) -> list[dict[str, Any]]:
        """``/v1/models`` entries (``id``, ``owned_by``, ...), fetched once."""
        with self._lock:
            if self._server_models is None:
                status, data, headers = self._fetch("GET", "/models", base=self.url)
                entries = data.get("data") if isinstance(data, dict) else None
                if status != 200 or not isinstance(entries, list):
                    said = f"HTTP {status}: {str(data)[:200]}" if status else "no answer"
                    raise LLMConfigError(
                        f"cannot list models at {self.url} ({said}); is the server running "
                        "(e.g. `vllm serve <model>`)?"
                    )
                self._server_models = [m for m in entries if isinstance(m, dict)]
                self._models_headers = headers
            return self._server_models

    @property
    def model(self) -> str:
        if self._model is None:
            models = self.server_models()
            ids = [str(m.get("id")) for m in models]
            if len(ids) != 1:
                raise LLMConfigError(
                    f"the server at {self.base_url} offers {len(ids)} models {ids}; choose one with --model "
                    "or SIMPATTERNS_LLM_MODEL"
                )
            self._model = ids[0]
        return self._model

    @property
    def server_info(self) -> ServerInfo:
        """What the server is (`probe_server`), asked once; ``unknown`` when it cannot be asked."""
        with self._lock:
            return self._probe_once()

    def _probe_once(self) -> ServerInfo:
        if self._info is None:
            try:
                models = self.server_models()
                model = self.model if len(models) == 1 or self._model else None
                info = probe_server(self._fetch, self.url, models, self._models_headers, model)
            except LLMConfigError as exc:
                info = ServerInfo("unknown", note=f"{exc}; assumed an OpenAI-compatible API without grammars")
            if info.note:
                log.warning("%s", info.note)
            self._info = info
        return self._info

    @property
    def server_kind(self) -> str:
        return self.server_info.kind

    @property
    def prefers_compact_prompts(self) -> bool:
        return self.server_kind in LOCAL

    def recommended_concurrency(self) -> int | None:
        return 1 if self.server_kind in ONE_AT_A_TIME else None

    def recommended_timeout(self) -> float | None:
        return 600.0 if self.server_kind in LOCAL else 120.0

    @property
    def reasoning(self) -> bool:
        """The model takes ``max_completion_tokens`` and only the default temperature."""
        if self._reasoning is None:
            self._reasoning = is_reasoning_model(self.model)
        return self._reasoning

    def grammar_field(self) -> str | None:
        """Where a grammar goes for this server (`ServerInfo.grammar_field`), None when none is sent."""
        if self._grammar_refused is not None or self.grammar_mode == "off":
            return None
        where = self.server_info.grammar_field
        if where is None and self.grammar_mode == "on":
            return "structured_outputs"
        return where

    @property
    def grammar_enabled(self) -> bool:
        return self.grammar_field() is not None

    @property
    def grammar_enforced(self) -> bool:
        """A grammar sent now is known to be applied (and no answer has broken one)."""
        return self.grammar_field() is not None and self.server_info.enforces_grammar and self._grammar_ignored is None

    def disable_grammar(self, reason: str) -> None:
        self._grammar_refused = reason

    @property
    def vision(self) -> bool | None:
        """Whether the model takes images: False once the server said no, else what it says (None: not said)."""
        if self._no_vision is not None:
            return False
        return self.server_info.vision

    @property
    def images_may_pass_as_text(self) -> bool:
        """llama-cpp-python's server without a multimodal chat handler templates image parts as text."""
        return self.server_kind == "llama-cpp-python"

    def no_vision(self, reason: str) -> None:
        self._no_vision = reason

    def probe_vision(self, timeout_s: float | None) -> tuple[bool | None, Usage]:
        """Ask the model about two blank images that differ only in a text chunk's size: a model
        that sees images counts the same pixels the same; one that gets the data URLs as text (a
        chat template without an image handler) counts the bigger URL as many more prompt tokens;
        an error about images means no vision. None: the server reports no usage."""
        usage, prompts = Usage(), []
        for pad in (0, VISION_PROBE_PAD):
            url = "data:image/png;base64," + base64.b64encode(_blank_png(pad)).decode()
            request = ChatRequest([{"role": "user", "content": [
                {"type": "text", "text": VISION_PROBE_TEXT},
                {"type": "image_url", "image_url": {"url": url}}]}], temperature=0.0, seed=0, max_tokens=1)
            try:  # not streamed: some servers (llama-cpp-python) report usage only then
                c = self._read_sync(request, timeout_s, stream=False)
            except LLMBackendError as exc:
                if exc.kind == "no_vision":
                    return False, usage
                raise
            usage = usage + c.usage
            prompts.append(c.usage.prompt_tokens)
        if min(prompts) <= 0:
            return None, usage
        if prompts[1] - prompts[0] >= VISION_PROBE_PAD // 8:
            self.no_vision(f"its prompt grew by {prompts[1] - prompts[0]} tokens with the image's size in bytes: "
                           "the images reach the model as text")
            return False, usage
        return True, usage

    # ---- one attempt ------------------------------------------------------------

    def _kwargs(self, request: ChatRequest, timeout_s: float | None, stream: bool = True
                ) -> tuple[dict[str, Any], str | None]:
        """The request's keyword arguments and the grammar field it carries (None: no grammar)."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages, "n": request.n}
        if stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        kwargs["max_completion_tokens" if self.reasoning else "max_tokens"] = request.max_tokens
        if not self.reasoning:
            kwargs["temperature"] = request.temperature
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        extra = dict(self.extra_body)
        where = self.grammar_field() if request.grammar else None
        if where is not None:
            try:
                gbnf = as_gbnf(request.grammar)
            except GrammarError as exc:
                raise LLMBackendError(f"invalid grammar, not sent: {exc}", kind="grammar_invalid") from exc
            extra[where] = {"grammar": gbnf} if where == "structured_outputs" else gbnf
        if request.seed is not None and self.server_info.llama_server:
            extra["cache_prompt"] = False  # a reused prefix changes the numbers, so the text
        for name in self._dropped:
            kwargs.pop(name, None)
            extra.pop(name, None)
        if "stream" in self._dropped:  # answers then come whole (read bounded, see _read_sync)
            kwargs.pop("stream_options", None)
        if extra:
            kwargs["extra_body"] = extra
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        return kwargs, where

    def _refuse_images(self, request: ChatRequest) -> None:
        if has_images(request.messages) and self.vision is False:
            raise LLMBackendError(self.no_vision_message(), kind="no_vision")

    def no_vision_message(self) -> str:
        why = self._no_vision or f"{self.server_info.describe()} says the model has no vision input"
        return (f"the model {self.model} at {self.url} does not take images ({why}); use a vision model "
                "(llama-server --mmproj, a vLLM multimodal model) or a text condition")

    def _translate(self, exc: Exception, request: ChatRequest, kwargs: dict[str, Any], where: str | None
                   ) -> LLMBackendError:
        url = self.url
        if isinstance(exc, LLMBackendError):
            return exc
        # the HTTP library's own errors surface while a stream is read (httpx, or its fork httpx2)
        from_http = type(exc).__module__.split(".")[0].startswith("httpx") or isinstance(exc, OSError)
        if isinstance(exc, openai.APITimeoutError) or (from_http and "Timeout" in type(exc).__name__):
            return LLMBackendError(f"timed out waiting for {url}", kind="timeout")
        if isinstance(exc, openai.APIConnectionError) or from_http:
            return LLMBackendError(f"cannot connect to {url}: {exc}", kind="connection")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = _error_text(exc)
            msg = f"HTTP {status} from {url}: {text}"
            if status == 429:
                return LLMBackendError(msg, kind="rate_limit", status=status, retry_after=_retry_after(exc))
            sent = {**kwargs, **kwargs.get("extra_body", {})}
            if status >= 400:
                if where is not None and grammar_refusal(text, where):
                    log.warning("the server refused the grammar; decoding unconstrained from now on: %s", msg)
                    self.disable_grammar(msg)
                    return LLMBackendError(msg, kind="grammar_rejected", status=status)
                if has_images(request.messages) and any(w in text.lower() for w in _IMAGE_ERRORS):
                    self.no_vision(f"it answered an image with HTTP {status}: {text[:200]}")
                    return LLMBackendError(self.no_vision_message(), kind="no_vision", status=status)
                if request.n > 1 and not self._split_n and _N_REFUSED.search(text):
                    log.warning("the server refused n=%d; one request per choice from now on: %s", request.n, msg)
                    self._split_n = True
                    return LLMBackendError(msg, kind="adjusted", status=status)
                param = refused_param(text, sent)
                if param == "max_tokens" or (param == "temperature" and not self.reasoning):
                    log.warning("the server refused %r: sending max_completion_tokens and no temperature from "
                                "now on (a reasoning model): %s", param, msg)
                    self._reasoning = True
                    return LLMBackendError(msg, kind="adjusted", status=status)
                if param is not None:
                    log.warning("the server refused %r: not sent from now on: %s", param, msg)
                    self._dropped.add(param)
                    return LLMBackendError(msg, kind="adjusted", status=status)
            if status >= 500:
                return LLMBackendError(msg, kind="server", status=status, retry_after=_retry_after(exc))
            if status == 408:
                return LLMBackendError(msg, kind="timeout", status=status)
            return LLMBackendError(msg, kind="client", status=status)
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMBackendError(f"malformed response from {url}: {exc}", kind="malformed")
        return LLMBackendError(f"malformed response from {url}: {type(exc).__name__}: {exc}", kind="malformed")

    def _split(self, request: ChatRequest) -> list[ChatRequest] | None:
        """``n`` single requests (seeds seed, seed+1, ...) for a server that answers one choice."""
        if request.n == 1 or not (self._split_n or self.server_info.single_choice):
            return None
        base = request.seed if request.seed is not None else 0
        return [dataclasses.replace(request, n=1, seed=base + k) for k in range(request.n)]

    def _rest(self, request: ChatRequest, got: Completion) -> list[ChatRequest]:
        """Single requests for the choices a server left out (it ignored ``n``)."""
        base = request.seed if request.seed is not None else 0
        return [dataclasses.replace(request, n=1, seed=base + k) for k in range(len(got.texts), request.n)]

    @staticmethod
    def _merge(parts: list[Completion]) -> Completion:
        usage = Usage()
        for p in parts:
            usage = usage + p.usage
        return Completion(texts=[t for p in parts for t in p.texts],
                          finish_reasons=[r for p in parts for r in p.finish_reasons], usage=usage,
                          model=parts[0].model, constrained=all(p.constrained for p in parts),
                          sent=parts[0].sent)

    def _finish(self, reader: _Reader, request: ChatRequest, kwargs: dict[str, Any], where: str | None
                ) -> Completion:
        c = reader.completion(self.model)
        asked = {"temperature": True, "stop": bool(request.stop), "seed": request.seed is not None}
        sent = {"grammar_field": where,
                "max_tokens_field": "max_completion_tokens" if "max_completion_tokens" in kwargs else "max_tokens",
                "omitted": [k for k, v in asked.items() if v and k not in kwargs],  # the server would not take them
                "streamed": bool(kwargs.get("stream"))}
        if reader.cut:
            sent["cut_at_max_tokens"] = True
        c = _apply_stop(c, list(request.stop) if request.stop else None)
        constrained = where is not None and self.server_info.enforces_grammar and self._grammar_ignored is None
        if constrained and not self._obeys_grammar(request, c):
            constrained, sent["grammar_violated"] = False, True
        return dataclasses.replace(c, constrained=constrained, sent=sent)

    def _obeys_grammar(self, request: ChatRequest, c: Completion) -> bool:
        """Whether every answer is in the grammar (a prefix of a sentence when cut off or stopped
        at a stop string). One that is not means the server did not apply it: no answer from this
        server counts as constrained from then on."""
        g = _parsed_gbnf(as_gbnf(request.grammar))
        for text, reason in zip(c.texts, c.finish_reasons):
            whole = reason not in ("length", "stop") or (reason == "stop" and not request.stop)
            if not (g.accepts(text) if whole else g.accepts_prefix(text)):
                self._grammar_ignored = f"an answer outside the grammar: {text[:80]!r}"
                log.warning("the server at %s did not apply the grammar (%s); its answers are not counted as "
                            "constrained from now on", self.url, self._grammar_ignored)
                return False
        return True

    def _body_limit(self, request: ChatRequest) -> int:
        return request.n * request.max_tokens * MAX_BYTES_PER_TOKEN + NON_STREAM_SLACK_BYTES

    def _read_sync(self, request: ChatRequest, timeout_s: float | None, stream: bool = True) -> Completion:
        kwargs, where = self._kwargs(request, timeout_s, stream)
        reader = _Reader(request, self.url)
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        try:
            with self._sync.chat.completions.with_streaming_response.create(**kwargs) as resp:
                if "text/event-stream" in resp.http_response.headers.get("content-type", ""):
                    for line in resp.iter_lines():
                        if reader.feed_line(line):
                            break
                        if deadline is not None and time.monotonic() > deadline:
                            raise LLMBackendError(f"timed out reading the answer from {self.url}", kind="timeout")
                else:  # a server that does not stream: read the body, bounded
                    body = b""
                    for chunk in resp.iter_bytes():
                        body += chunk
                        if len(body) > self._body_limit(request):
                            raise LLMBackendError(f"the answer from {self.url} is longer than n x max_tokens "
                                                  "allows; not read further", kind="client")
                    reader.feed_body(body)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one LLMBackendError
            raise self._translate(exc, request, kwargs, where) from exc
        return self._finish(reader, request, kwargs, where)

    async def _read_async(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        kwargs, where = self._kwargs(request, timeout_s)
        reader = _Reader(request, self.url)
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        try:
            async with self._async_client().chat.completions.with_streaming_response.create(**kwargs) as resp:
                if "text/event-stream" in resp.http_response.headers.get("content-type", ""):
                    async for line in resp.iter_lines():
                        if reader.feed_line(line):
                            break
                        if deadline is not None and time.monotonic() > deadline:
                            raise LLMBackendError(f"timed out reading the answer from {self.url}", kind="timeout")
                else:
                    body = b""
                    async for chunk in resp.iter_bytes():
                        body += chunk
                        if len(body) > self._body_limit(request):
                            raise LLMBackendError(f"the answer from {self.url} is longer than n x max_tokens "
                                                  "allows; not read further", kind="client")
                    reader.feed_body(body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._translate(exc, request, kwargs, where) from exc
        return self._finish(reader, request, kwargs, where)

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        self._refuse_images(request)
        split = self._split(request)
        if split is not None:
            return self._merge([self.call(r, timeout_s) for r in split])
        got = self._read_sync(request, timeout_s)
        rest = self._rest(request, got)
        return self._merge([got] + [self.call(r, timeout_s) for r in rest]) if rest else got

    def _async_client(self) -> openai.AsyncOpenAI:
        # An AsyncOpenAI's connections belong to one event loop, so each loop
        # gets its own client, closed by a guard task when that loop shuts
        # down (asyncio.run cancels it) -- not later by the garbage collector
        # on another loop, which fails with "Event loop is closed".
        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:
            client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0)
            self._async, self._async_loop = client, loop
            self._async_guard = loop.create_task(self._close_when_loop_ends(client))
        return self._async

    @staticmethod
    async def _close_when_loop_ends(client: openai.AsyncOpenAI) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await client.close()

    async def acall(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        if self._info is None:  # the look-ups block: keep them off the event loop
            await asyncio.to_thread(lambda: (self.server_info, self.model))
        self._refuse_images(request)
        split = self._split(request)
        if split is not None:
            return self._merge([await self.acall(r, timeout_s) for r in split])
        got = await self._read_async(request, timeout_s)
        rest = self._rest(request, got)
        return self._merge([got] + [await self.acall(r, timeout_s) for r in rest]) if rest else got

    def close(self) -> None:
        self._sync.close()

    async def aclose(self) -> None:
        guard = self._async_guard
        if guard is not None and self._async_loop is asyncio.get_running_loop() and not guard.done():
            guard.cancel()
            try:
                await guard
            except asyncio.CancelledError:
                pass
        self._async = self._async_guard = None
        self.close()
