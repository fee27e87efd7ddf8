"""OpenAI-compatible HTTP backend (vLLM server, llama.cpp server, hosted providers).

Uses the ``openai`` package: a sync client for `LLMClient.complete` (thread
pool) and an async client for `LLMClient.acomplete`. The package's own
retries are off (``max_retries=0``): the `LLMClient` retries, so every
attempt is budgeted and lands in the transcript.

Grammars: a request's grammar goes out as GBNF (a Lark grammar is
translated, see `simpatterns.llm.grammars`), validated first: an invalid
grammar crashes a llama.cpp server. With ``grammar="auto"`` the field
depends on what ``/v1/models`` says the server is: vLLM (``owned_by:
"vllm"``) gets ``structured_outputs: {"grammar": ...}`` (its xgrammar and
guidance backends both take GBNF); a llama.cpp server (``owned_by: "me"``
for ``python -m llama_cpp.server``, ``"llamacpp"`` for ``llama-server``)
gets its top-level ``grammar`` field; any other server (a hosted API)
decodes unconstrained and synthesis relies on repair. ``"on"`` also sends
the vLLM field to servers that do not say what they are (reported as
unconstrained: nothing confirms the server enforced it); ``"off"`` never
sends a grammar. ``Completion.constrained`` is true only when a server that
enforces the field got it. If the server refuses the grammar (HTTP 400/422
about the field or the grammar), the client logs it, stops sending
grammars and decodes unconstrained.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from typing import Any

import openai

from simpatterns.llm.client import Backend
from simpatterns.llm.errors import LLMBackendError, LLMConfigError
from simpatterns.llm.grammars import GrammarError, as_gbnf
from simpatterns.llm.request import ChatRequest, Completion, Usage

ENV_BASE_URL = ("SIMPATTERNS_LLM_BASE_URL", "OPENAI_BASE_URL")
ENV_MODEL = ("SIMPATTERNS_LLM_MODEL",)
ENV_API_KEY = ("SIMPATTERNS_LLM_API_KEY", "OPENAI_API_KEY")
GRAMMAR_MODES = ("auto", "on", "off")
# words in a 400/422 body that mean "the server will not take this grammar"
_GRAMMAR_REFUSAL_WORDS = ("structured_output", "grammar", "guided", "extra", "unrecognized", "not permitted",
                          "unsupported", "unknown field", "unexpected keyword")


# what /v1/models says in owned_by -> the server kind
SERVER_KINDS = {"vllm": "vllm", "me": "llama.cpp", "llamacpp": "llama.cpp", "llama.cpp": "llama.cpp"}


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
    return str(exc.message)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


class OpenAIBackend(Backend):
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
        self._lock = threading.Lock()
        self._server_models: list[dict[str, Any]] | None = None
        self._grammar_refused: str | None = None
        self._kind: str | None = None

    # ---- server facts -----------------------------------------------------------

    def server_models(self) -> list[dict[str, Any]]:
        """``/v1/models`` entries (``id``, ``owned_by``, ...), fetched once."""
        with self._lock:
            if self._server_models is None:
                try:
                    page = self._sync.models.list(timeout=self._connect_timeout_s)
                except openai.APIError as exc:
                    raise LLMConfigError(
                        f"cannot list models at {self.base_url or 'the default endpoint'}: {exc}; "
                        "is the server running (e.g. `vllm serve <model>`)?"
                    ) from exc
                self._server_models = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in page.data]
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
    def server_kind(self) -> str:
        """``vllm``, ``llama.cpp`` or ``hosted`` from ``/v1/models`` (decided once;
        ``unknown`` when the server cannot be asked)."""
        if self._kind is None:
            try:
                models = self.server_models()
            except LLMConfigError:
                self._kind = "unknown"  # asked once: every transcript record reads it
                return self._kind
            owners = {str(m.get("owned_by", "")).lower() for m in models}
            kinds = {SERVER_KINDS[o] for o in owners if o in SERVER_KINDS}
            self._kind = kinds.pop() if len(kinds) == 1 else "hosted"
        return self._kind

    def is_vllm(self) -> bool:
        return self.server_kind == "vllm"

    def recommended_concurrency(self) -> int | None:
        return 1 if self.server_kind == "llama.cpp" else None

    def grammar_field(self) -> str | None:
        """Where a grammar goes for this server: ``structured_outputs``, ``grammar`` or None."""
        if self._grammar_refused is not None or self.grammar_mode == "off":
            return None
        kind = self.server_kind
        if kind == "llama.cpp":
            return "grammar"
        if kind == "vllm" or self.grammar_mode == "on":
            return "structured_outputs"
        return None

    @property
    def grammar_enabled(self) -> bool:
        return self.grammar_field() is not None

    def disable_grammar(self, reason: str) -> None:
        self._grammar_refused = reason

    # ---- one attempt ------------------------------------------------------------

    def _kwargs(self, request: ChatRequest, timeout_s: float | None) -> tuple[dict[str, Any], bool]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "n": request.n,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
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
            if where == "grammar":
                extra["grammar"] = gbnf
            else:
                extra["structured_outputs"] = {"grammar": gbnf}
        # only a server known to enforce the field counts as constrained
        constrained = where is not None and self.server_kind in ("vllm", "llama.cpp")
        sent = where is not None
        if extra:
            kwargs["extra_body"] = extra
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        return kwargs, constrained, sent

    def _translate(self, exc: Exception, constrained: bool) -> LLMBackendError:
        where = f"{self.base_url or 'OpenAI'}"
        if isinstance(exc, openai.APITimeoutError):
            return LLMBackendError(f"timed out waiting for {where}", kind="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return LLMBackendError(f"cannot connect to {where}: {exc}", kind="connection")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = _error_text(exc)
            msg = f"HTTP {status} from {where}: {text}"
            if status == 429:
                return LLMBackendError(msg, kind="rate_limit", status=status, retry_after=_retry_after(exc))
            if status >= 500:
                return LLMBackendError(msg, kind="server", status=status, retry_after=_retry_after(exc))
            if status in (400, 422) and constrained and any(w in text.lower() for w in _GRAMMAR_REFUSAL_WORDS):
                return LLMBackendError(msg, kind="grammar_rejected", status=status)
            if status == 408:
                return LLMBackendError(msg, kind="timeout", status=status)
            return LLMBackendError(msg, kind="client", status=status)
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMBackendError(f"malformed response from {where}: {exc}", kind="malformed")
        # the package failed to decode the body (not JSON, wrong shape)
        return LLMBackendError(f"malformed response from {where}: {type(exc).__name__}: {exc}", kind="malformed")

    def _parse(self, resp: Any, request: ChatRequest, constrained: bool) -> Completion:
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMBackendError(
                f"malformed response from {self.base_url}: no choices in {str(resp)[:200]!r}", kind="malformed"
            )
        texts: list[str] = []
        reasons: list[str] = []
        for c in sorted(choices, key=lambda c: getattr(c, "index", None) or 0):
            message = getattr(c, "message", None)
            if message is None or not hasattr(message, "content"):
                raise LLMBackendError(
                    f"malformed response from {self.base_url}: a choice without a message: {str(c)[:200]!r}",
                    kind="malformed",
                )
            content = message.content
            if content is not None and not isinstance(content, str):
                raise LLMBackendError(
                    f"malformed response from {self.base_url}: message content is {type(content).__name__}",
                    kind="malformed",
                )
            texts.append(content or "")
            reasons.append(str(getattr(c, "finish_reason", None) or "unknown"))
        u = getattr(resp, "usage", None)
        if u is not None and getattr(u, "prompt_tokens", None) is not None:
            usage = Usage(int(u.prompt_tokens or 0), int(u.completion_tokens or 0))
        else:  # some servers omit usage: estimate, so budgets still bite
            usage = Usage(request.estimated_prompt_tokens(), sum(len(t) // 4 + 1 for t in texts))
        return Completion(
            texts=texts,
            usage=usage,
            model=str(getattr(resp, "model", None) or self.model),
            finish_reasons=reasons,
            constrained=constrained,
        )

    def _one_at_a_time(self, request: ChatRequest) -> list[ChatRequest] | None:
        """A llama.cpp server ignores ``n`` (one choice): ``n`` requests with seeds seed, seed+1, ..."""
        if request.n == 1 or self.server_kind != "llama.cpp":
            return None
        base = request.seed if request.seed is not None else 0
        return [dataclasses.replace(request, n=1, seed=base + k) for k in range(request.n)]

    @staticmethod
    def _merge(parts: list[Completion]) -> Completion:
        usage = Usage()
        for p in parts:
            usage = usage + p.usage
        return Completion(texts=[t for p in parts for t in p.texts],
                          finish_reasons=[r for p in parts for r in p.finish_reasons], usage=usage,
                          model=parts[0].model, constrained=all(p.constrained for p in parts))

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        split = self._one_at_a_time(request)
        if split is not None:
            return self._merge([self.call(r, timeout_s) for r in split])
        kwargs, constrained, sent = self._kwargs(request, timeout_s)
        try:
            resp = self._sync.chat.completions.create(**kwargs)
        except LLMBackendError:
            raise
        except openai.OpenAIError as exc:
            raise self._translate(exc, sent) from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self._translate(exc, sent) from exc
        return self._parse(resp, request, constrained)

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
        # the lazy /v1/models look-ups block: keep them off the event loop
        if self._model is None:
            await asyncio.to_thread(lambda: self.model)
        if (request.grammar or request.n > 1) and self._kind is None:
            await asyncio.to_thread(lambda: self.server_kind)
        split = self._one_at_a_time(request)
        if split is not None:
            return self._merge([await self.acall(r, timeout_s) for r in split])
        kwargs, constrained, sent = self._kwargs(request, timeout_s)
        try:
            resp = await self._async_client().chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise self._translate(exc, sent) from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self._translate(exc, sent) from exc
        return self._parse(resp, request, constrained)

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
