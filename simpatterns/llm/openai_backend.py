"""OpenAI-compatible HTTP backend (vLLM server, llama.cpp server, hosted providers).

Uses the ``openai`` package: a sync client for `LLMClient.complete` (thread
pool) and an async client for `LLMClient.acomplete`. The package's own
retries are off (``max_retries=0``): the `LLMClient` retries, so every
attempt is budgeted and lands in the transcript.

Grammars: with ``grammar="auto"`` a request's Lark grammar is sent as
``extra_body={"structured_outputs": {"grammar": ...}}`` (the vLLM >= 0.12
field) when ``/v1/models`` says the server is vLLM; ``"on"`` sends it to any
server, ``"off"`` never. If the server refuses it (HTTP 400/422 about the
field or the grammar), the client logs it, stops sending grammars and
decodes unconstrained; synthesis then relies on parse-and-repair.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import openai

from simpatterns.llm.client import Backend
from simpatterns.llm.errors import LLMBackendError, LLMConfigError
from simpatterns.llm.request import ChatRequest, Completion, Usage

ENV_BASE_URL = ("SIMPATTERNS_LLM_BASE_URL", "OPENAI_BASE_URL")
ENV_MODEL = ("SIMPATTERNS_LLM_MODEL",)
ENV_API_KEY = ("SIMPATTERNS_LLM_API_KEY", "OPENAI_API_KEY")
GRAMMAR_MODES = ("auto", "on", "off")
# words in a 400/422 body that mean "the server will not take this grammar"
_GRAMMAR_REFUSAL_WORDS = ("structured_output", "grammar", "guided", "extra", "unrecognized", "not permitted",
                          "unsupported", "unknown field", "unexpected keyword")


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
        self._vllm: bool | None = None

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

    def is_vllm(self) -> bool:
        """Whether ``/v1/models`` says vLLM serves it (decided once; unreachable counts as no)."""
        if self._vllm is None:
            try:
                models = self.server_models()
            except LLMConfigError:
                self._vllm = False
            else:
                self._vllm = any(str(m.get("owned_by", "")).lower() == "vllm" for m in models)
        return self._vllm

    @property
    def grammar_enabled(self) -> bool:
        if self._grammar_refused is not None or self.grammar_mode == "off":
            return False
        return self.grammar_mode == "on" or self.is_vllm()

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
        constrained = bool(request.grammar) and self.grammar_enabled
        if constrained:
            extra["structured_outputs"] = {"grammar": request.grammar}
        if extra:
            kwargs["extra_body"] = extra
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        return kwargs, constrained

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

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        kwargs, constrained = self._kwargs(request, timeout_s)
        try:
            resp = self._sync.chat.completions.create(**kwargs)
        except LLMBackendError:
            raise
        except openai.OpenAIError as exc:
            raise self._translate(exc, constrained) from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self._translate(exc, constrained) from exc
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
        if request.grammar and self.grammar_mode == "auto" and self._vllm is None:
            await asyncio.to_thread(self.is_vllm)
        kwargs, constrained = self._kwargs(request, timeout_s)
        try:
            resp = await self._async_client().chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise self._translate(exc, constrained) from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise self._translate(exc, constrained) from exc
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
