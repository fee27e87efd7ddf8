"""`LLMClient`: batches of chat requests with concurrency, retries, a budget and a transcript.

The client owns the policy; a backend only makes one attempt::

    client = make_client("openai", base_url="http://localhost:8000/v1")
    [c] = client.complete([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
    print(c.text, c.usage)

    # the evolver keeps several requests in flight from asyncio:
    completions = await client.acomplete(requests)

Retries: timeouts, connection errors, 429, 5xx and malformed bodies are
retried with exponential backoff (and the server's ``Retry-After``); other
4xx fail at once. ``timeout_s`` bounds each attempt.

Budget: a hard cap on requests sent and on tokens (prompt + completion).
Before each attempt a reservation of ``n * max_tokens`` plus an estimate of
the prompt is checked against what was used and what requests in flight
reserved: a request that fits starts; one that would fit once the requests
in flight have settled waits for them (their reservations are released when
they finish, fail or are cancelled, and what they really used is counted);
one that cannot fit even then is refused, and from then on nothing more is
sent. Tokens are counted from the server's ``usage`` and from the text itself
when ``usage`` is missing or implausibly small (`counted_usage`): a server
that ignores ``max_tokens`` is charged what it sent, and the budget stops the
next request. The refusal says which budget ended it. Every attempt (failed
ones too) is a line in the transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from simpatterns.llm.errors import (
    LLMBackendError,
    LLMBudgetExceeded,
    LLMConfigError,
    LLMError,
    LLMRetriesExhausted,
)
from simpatterns.llm.request import ChatRequest, Completion, Usage, counted_usage
from simpatterns.llm.server import LOCAL
from simpatterns.llm.transcript import TranscriptWriter

log = logging.getLogger(__name__)


class LLMBackend:
    """One attempt at one request. Subclasses: openai, vllm, replay.

    ``call``/``acall`` raise `LLMBackendError` for a failed attempt (its
    ``kind`` decides whether the client retries) and return a `Completion`
    whose ``texts``, ``finish_reasons``, ``usage``, ``model`` and
    ``constrained`` are filled in.
    """

    name = "backend"
    #: backends that do their own batching (in-process vLLM) get whole batches
    supports_batch = False

    @property
    def model(self) -> str:
        raise NotImplementedError

    @property
    def server_kind(self) -> str:
        """What answers: one of `simpatterns.llm.server.KINDS` for a server (``vllm``,
        ``llama.cpp``, ``ollama``, ``openai``, ``unknown``...), ``local`` (in-process llama.cpp)
        or ``vllm`` (in-process)."""
        return "unknown"

    @property
    def prefers_compact_prompts(self) -> bool:
        """Small local models: short prompts (see `resolve_prompt_mode`)."""
        return self.server_kind in LOCAL

    @property
    def vision(self) -> bool | None:
        """Whether the model takes images: True/False where known, None where not said."""
        return None

    def no_vision_message(self) -> str:
        return f"the model {self.model} ({self.name}) does not take images"

    def recommended_concurrency(self) -> int | None:
        """Requests worth keeping in flight (None: no opinion); a llama.cpp server answers one at a time."""
        return None

    def recommended_timeout(self) -> float | None:
        """Seconds per attempt when the user sets none; local models are slow to answer."""
        return 600.0 if self.server_kind in LOCAL else 120.0

    @property
    def grammar_enabled(self) -> bool:
        return False

    def disable_grammar(self, reason: str) -> None:  # pragma: no cover - trivial default
        pass

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        raise NotImplementedError

    async def acall(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        # default: run the blocking call in a worker thread
        return await asyncio.to_thread(self.call, request, timeout_s)

    def call_batch(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        self.close()


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``base_delay_s * 2**(k-1)`` before retry k, capped, with jitter."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be >= 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("RetryPolicy delays must be >= 0 and jitter in [0, 1]")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        d = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        if retry_after is not None:
            d = max(d, min(retry_after, self.max_delay_s))
        return d * (1.0 + self.jitter * random.random())


@dataclass
class _Reservation:
    tokens: int


class Budget:
    """Hard limits on requests sent and tokens used (prompt + completion), shared by threads
    and asyncio tasks."""

    def __init__(self, max_tokens: int | None = None, max_requests: int | None = None) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("Budget.max_tokens must be >= 1 or None")
        if max_requests is not None and max_requests < 1:
            raise ValueError("Budget.max_requests must be >= 1 or None")
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.used_tokens = 0
        self.used_requests = 0
        self._reserved_tokens = 0
        self._in_flight = 0
        self.exhausted: str | None = None  # which budget ended the run, in words
        # the largest answer seen, in tokens: once a server is seen to ignore max_tokens, requests
        # reserve what it really sends, so it can overshoot only with the answers already in flight
        self.largest_answer = 0
        self._cond = threading.Condition()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def reserved_tokens(self) -> int:
        return self._reserved_tokens

    def try_reserve(self, request: ChatRequest) -> _Reservation | None:
        """A reservation, None when the request must wait for the requests in flight, or
        `LLMBudgetExceeded` when it cannot fit even after them."""
        need = request.n * max(request.max_tokens, self.largest_answer) + request.estimated_prompt_tokens()
        with self._cond:
            if self.exhausted is None:
                if self.max_requests is not None and self.used_requests + self._in_flight >= self.max_requests:
                    if self._in_flight:
                        return None  # one in flight may fail and give its request back
                    self.exhausted = (f"request budget exhausted: {self.used_requests} of {self.max_requests} "
                                      f"requests sent")
                elif self.max_tokens is not None and self.used_tokens + self._reserved_tokens + need > self.max_tokens:
                    if self._in_flight and self.used_tokens + need <= self.max_tokens:
                        return None  # fits once the requests in flight have settled
                    per_answer = max(request.max_tokens, self.largest_answer)
                    self.exhausted = (
                        f"token budget exhausted: {self.used_tokens} of {self.max_tokens} tokens used; the next "
                        f"request could use up to {need} (n={request.n} x {per_answer} tokens per answer + "
                        f"~{request.estimated_prompt_tokens()} prompt)")
            if self.exhausted is not None:
                err = LLMBudgetExceeded(self.exhausted + "; no further requests are sent")
                err.prompt_hash = request.prompt_hash
                raise err
            self._in_flight += 1
            self._reserved_tokens += need
            return _Reservation(need)

    def reserve(self, request: ChatRequest) -> _Reservation:
        """`try_reserve`, waiting for the requests in flight when that can help."""
        with self._cond:
            while True:
                got = self.try_reserve(request)
                if got is not None:
                    return got
                self._cond.wait(0.5)

    async def areserve(self, request: ChatRequest) -> _Reservation:
        """`reserve` for asyncio: waits without blocking the event loop."""
        while True:
            got = self.try_reserve(request)
            if got is not None:
                return got
            await asyncio.sleep(0.01)

    def settle(self, reservation: _Reservation, usage: Usage, sent: bool = True, answers: int = 1) -> None:
        """Release ``reservation`` and count what the request used (``sent=False``: it never
        reached the server, and does not count as a request; ``answers``: its ``n``)."""
        with self._cond:
            self.largest_answer = max(self.largest_answer, -(-usage.completion_tokens // max(1, answers)))
            self._in_flight -= 1
            self._reserved_tokens -= reservation.tokens
            self.used_requests += int(sent)
            self.used_tokens += usage.total_tokens
            self._cond.notify_all()

    def charge(self, usage: Usage) -> None:
        """Count tokens spent outside a request (the image capability probe)."""
        with self._cond:
            self.used_tokens += usage.total_tokens
            self._cond.notify_all()

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "max_requests": self.max_requests,
            "used_tokens": self.used_tokens,
            "used_requests": self.used_requests,
            "exhausted": self.exhausted,
        }


AUTO = "auto"
DEFAULT_CONCURRENCY = 8
MAX_RESENDS = 6  # adaptations to one server (grammar, n, parameters) a request may go through
PROMPT_MODES = ("auto", "full", "compact")


def resolve_prompt_mode(mode: str, client: Any) -> str:
    """``full`` or ``compact`` for a prompt-building caller (reward synthesis, discovery,
    evaluations): ``auto`` is compact when the client prefers it (small local models)."""
    if mode not in PROMPT_MODES:
        raise ValueError(f"prompt mode must be one of {PROMPT_MODES}, got {mode!r}")
    if mode != AUTO:
        return mode
    return "compact" if getattr(client, "prefers_compact_prompts", False) else "full"


class LLMClient:
    """Sends batches of `ChatRequest`s through an `LLMBackend`.

    ``concurrency`` bounds requests in flight (threads for `complete`, an
    asyncio semaphore for `acomplete`); ``timeout_s`` bounds each attempt
    (None: no limit); ``transcript`` (a path) records every attempt as a
    JSONL line. Either may be ``"auto"``: what the server wants (one request
    at a time and 600 s for llama.cpp and in-process models; else
    ``default_concurrency`` and 120 s), decided on first use.
    """

    def __init__(
        self,
        backend: LLMBackend,
        *,
        concurrency: int | str = AUTO,
        timeout_s: float | None | str = AUTO,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        transcript: str | Path | None = None,
        default_concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        if concurrency != AUTO and (not isinstance(concurrency, int) or concurrency < 1):
            raise ValueError(f"LLMClient.concurrency must be >= 1 or 'auto', got {concurrency!r}")
        if timeout_s not in (AUTO, None) and (not isinstance(timeout_s, (int, float)) or timeout_s <= 0):
            raise ValueError(f"LLMClient.timeout_s must be > 0, None or 'auto', got {timeout_s!r}")
        self.backend = backend
        self._concurrency = concurrency
        self._default_concurrency = max(1, int(default_concurrency))
        self._timeout = timeout_s
        self.retry = retry or RetryPolicy()
        self.budget = budget or Budget()
        self.transcript_path = Path(transcript) if transcript is not None else None
        self._transcript = TranscriptWriter(transcript) if transcript is not None else None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.usage = Usage()
        self.attempts_sent = 0
        self.retries = 0
        self.failures = 0

    # ---- public API -------------------------------------------------------------

    @property
    def model(self) -> str:
        return self.backend.model

    @property
    def concurrency(self) -> int:
        if self._concurrency == AUTO:
            ask = getattr(self.backend, "recommended_concurrency", None)  # duck-typed backends may lack it
            self._concurrency = (ask() if ask else None) or self._default_concurrency
        return int(self._concurrency)

    @property
    def timeout_s(self) -> float | None:
        if self._timeout == AUTO:
            ask = getattr(self.backend, "recommended_timeout", None)
            self._timeout = ask() if ask else 120.0
        return self._timeout  # type: ignore[return-value]

    @property
    def prefers_compact_prompts(self) -> bool:
        return bool(getattr(self.backend, "prefers_compact_prompts", False))

    @property
    def server_kind(self) -> str:
        return str(getattr(self.backend, "server_kind", "unknown"))

    def require_images(self) -> None:
        """Establish that the model takes images before a run that sends them: what the server
        says (llama-server ``/props``, Ollama ``/api/show``, LM Studio), else a two-request probe
        (`OpenAIBackend.probe_vision`, its tokens charged to the budget). `LLMConfigError` (one
        line) when it does not, or when that cannot be established (a server that says nothing
        and reports no usage): a score over images the model never saw would be garbage.
        Backends that cannot be asked (replay, in-process) are trusted."""
        vision = self.backend.vision
        probe = getattr(self.backend, "probe_vision", None)
        if vision is None and probe is not None:
            try:
                vision, used = probe(self.timeout_s)
            except LLMError as exc:
                raise LLMConfigError(f"could not ask {self.model} whether it takes images: {exc}") from exc
            self.budget.charge(used)
        if vision is False:
            raise LLMConfigError(self.backend.no_vision_message())
        if vision is None and probe is not None:  # unestablished: never send images that may not be seen
            why = (f"could not establish that the model {self.model} takes images: the server says nothing about "
                   "it and reports no prompt tokens for an image")
            if getattr(self.backend, "images_may_pass_as_text", False):
                why += ", and without an image handler it passes them to the model as text"
            raise LLMConfigError(f"{why}; use a server that says (llama-server /props, vLLM, Ollama, LM Studio) "
                                 "or reports usage, or a text condition")

    def complete(
        self, requests: Sequence[ChatRequest] | ChatRequest, *, return_exceptions: bool = False
    ) -> list[Any]:
        """Completions in request order.

        If any request fails, the first failure (by position) is raised after
        the others finish, with ``.partial`` holding the list of results
        (``None`` where it failed); with ``return_exceptions=True`` the list
        holds the `LLMError` in that slot instead.
        """
        requests = self._as_list(requests)
        if self.backend.supports_batch:
            results = self._complete_batch(requests)
        elif len(requests) == 1 or self.concurrency == 1:
            results = [self._capture(self._run_sync, r) for r in requests]
        else:
            pool = self._get_pool()
            futures = [pool.submit(self._capture, self._run_sync, r) for r in requests]
            results = [f.result() for f in futures]
        return self._finish(results, return_exceptions)

    def complete_one(self, request: ChatRequest) -> Completion:
        return self.complete([request])[0]

    async def acomplete(
        self, requests: Sequence[ChatRequest] | ChatRequest, *, return_exceptions: bool = False
    ) -> list[Any]:
        """`complete` for asyncio callers: up to ``concurrency`` requests in flight."""
        requests = self._as_list(requests)
        if self.backend.supports_batch:
            results = await asyncio.to_thread(self._complete_batch, requests)
            return self._finish(results, return_exceptions)
        if self._concurrency == AUTO or self._timeout == AUTO:  # may ask the server: off the event loop
            await asyncio.to_thread(lambda: (self.concurrency, self.timeout_s))
        sem = asyncio.Semaphore(self.concurrency)

        async def one(r: ChatRequest) -> Any:
            async with sem:
                try:
                    return await self._run_async(r)
                except LLMError as exc:
                    return exc

        results = await asyncio.gather(*(one(r) for r in requests))
        return self._finish(list(results), return_exceptions)

    async def acomplete_one(self, request: ChatRequest) -> Completion:
        return (await self.acomplete([request]))[0]

    def stats(self) -> dict[str, Any]:
        return {
            "backend": self.backend.name,
            "server": self.server_kind,
            "model": self.model,
            "attempts_sent": self.attempts_sent,
            "retries": self.retries,
            "failures": self.failures,
            "usage": self.usage.to_dict(),
            "budget": self.budget.to_dict(),
        }

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.backend.close()
        if self._transcript is not None:
            self._transcript.close()

    async def aclose(self) -> None:
        await self.backend.aclose()
        self.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- machinery ----------------------------------------------------------------

    @staticmethod
    def _as_list(requests: Sequence[ChatRequest] | ChatRequest) -> list[ChatRequest]:
        if isinstance(requests, ChatRequest):
            return [requests]
        requests = list(requests)
        for i, r in enumerate(requests):
            if not isinstance(r, ChatRequest):
                raise TypeError(f"requests[{i}] is a {type(r).__name__}, not a ChatRequest")
        return requests

    def _get_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="simpatterns-llm")
            return self._pool

    @staticmethod
    def _capture(fn, request: ChatRequest) -> Any:
        try:
            return fn(request)
        except LLMError as exc:
            return exc

    def _finish(self, results: list[Any], return_exceptions: bool) -> list[Any]:
        if return_exceptions:
            return results
        for r in results:
            if isinstance(r, LLMError):
                r.partial = [None if isinstance(x, LLMError) else x for x in results]  # type: ignore[attr-defined]
                raise r
        return results

    def _record(
        self,
        request: ChatRequest,
        attempt: int,
        latency_s: float,
        completion: Completion | None = None,
        error: LLMError | None = None,
    ) -> None:
        with self._lock:
            self.attempts_sent += 1
            if completion is not None:
                self.usage = self.usage + completion.usage
        if self._transcript is None:
            return
        record: dict[str, Any] = {
            "backend": self.backend.name,
            "server": self.server_kind,
            "model": completion.model if completion is not None and completion.model else self.backend.model,
            "prompt_hash": request.prompt_hash,
            "attempt": attempt,
            "status": "ok" if completion is not None else "error",
            "request": request.to_dict(),
            "response": None,
            "usage": (completion.usage if completion is not None else Usage()).to_dict(),
            "latency_s": round(latency_s, 6),
            "constrained": bool(completion.constrained) if completion is not None else False,
            "error": None,
        }
        if completion is not None:
            record["response"] = {"texts": list(completion.texts), "finish_reasons": list(completion.finish_reasons)}
            if completion.sent:
                record["sent"] = completion.sent
        if error is not None:
            record["error"] = {
                "kind": getattr(error, "kind", type(error).__name__),
                "status": getattr(error, "status", None),
                "message": str(error),
            }
        self._transcript.write(record)

    def _outcome(self, request: ChatRequest, attempt: int, exc: LLMBackendError, resends: int) -> float | None:
        """Decide after a failed attempt: seconds to wait before retrying, None to resend at once
        (the backend adapted to what the server refused), or raise."""
        exc.prompt_hash = request.prompt_hash
        if exc.kind in LLMBackendError.RESEND and resends < MAX_RESENDS:
            if exc.kind == "grammar_rejected":
                self.backend.disable_grammar(str(exc))
            return None  # not a failure of the request: same attempt number
        if not exc.retryable:
            with self._lock:
                self.failures += 1
            raise exc
        if attempt >= self.retry.max_attempts:
            with self._lock:
                self.failures += 1
            raise LLMRetriesExhausted(request.prompt_hash, attempt, exc) from exc
        with self._lock:
            self.retries += 1
        return self.retry.delay(attempt, exc.retry_after)

    def _run_sync(self, request: ChatRequest) -> Completion:
        attempt, resends = 1, 0
        while True:
            reservation = self.budget.reserve(request)
            t0 = time.perf_counter()
            try:
                completion = self.backend.call(request, self.timeout_s)
            except LLMBackendError as exc:
                latency = time.perf_counter() - t0
                self.budget.settle(reservation, Usage())
                self._record(request, attempt, latency, error=exc)
                wait = self._outcome(request, attempt, exc, resends)
                if wait is None:
                    resends += 1
                    continue
                time.sleep(wait)
                attempt += 1
                continue
            except BaseException:  # cancelled or interrupted: the reservation is released
                self.budget.settle(reservation, Usage(), sent=False)
                raise
            latency = time.perf_counter() - t0
            usage = counted_usage(request, completion)
            self.budget.settle(reservation, usage, answers=request.n)
            completion = dataclasses.replace(
                completion, usage=usage, latency_s=latency, prompt_hash=request.prompt_hash, attempts=attempt
            )
            self._record(request, attempt, latency, completion=completion)
            return completion

    async def _run_async(self, request: ChatRequest) -> Completion:
        attempt, resends = 1, 0
        while True:
            reservation = await self.budget.areserve(request)
            t0 = time.perf_counter()
            try:
                completion = await self.backend.acall(request, self.timeout_s)
            except LLMBackendError as exc:
                latency = time.perf_counter() - t0
                self.budget.settle(reservation, Usage())
                self._record(request, attempt, latency, error=exc)
                wait = self._outcome(request, attempt, exc, resends)
                if wait is None:
                    resends += 1
                    continue
                await asyncio.sleep(wait)
                attempt += 1
                continue
            except BaseException:  # cancelled or interrupted: the reservation is released
                self.budget.settle(reservation, Usage(), sent=False)
                raise
            latency = time.perf_counter() - t0
            usage = counted_usage(request, completion)
            self.budget.settle(reservation, usage, answers=request.n)
            completion = dataclasses.replace(
                completion, usage=usage, latency_s=latency, prompt_hash=request.prompt_hash, attempts=attempt
            )
            self._record(request, attempt, latency, completion=completion)
            return completion

    def _complete_batch(self, requests: list[ChatRequest]) -> list[Any]:
        """Backends that batch internally (in-process vLLM): one call, no retries."""
        results: list[Any] = [None] * len(requests)
        admitted: list[tuple[int, ChatRequest, _Reservation]] = []
        for i, r in enumerate(requests):
            try:
                got = self.budget.try_reserve(r)
                if got is None:  # a batch cannot wait for itself: refused for now
                    raise LLMBudgetExceeded("token budget: this request does not fit next to the rest of "
                                            "its batch")
                admitted.append((i, r, got))
            except LLMBudgetExceeded as exc:
                results[i] = exc
        if not admitted:
            return results
        t0 = time.perf_counter()
        try:
            outs = self.backend.call_batch([r for _, r, _ in admitted])
        except LLMError as exc:
            latency = time.perf_counter() - t0
            for i, r, res in admitted:
                self.budget.settle(res, Usage())
                self._record(r, 1, latency, error=exc)
                results[i] = exc
            with self._lock:
                self.failures += len(admitted)
            return results
        except BaseException:
            for _, _, res in admitted:
                self.budget.settle(res, Usage(), sent=False)
            raise
        latency = time.perf_counter() - t0
        for (i, r, res), out in zip(admitted, outs):
            usage = counted_usage(r, out)
            self.budget.settle(res, usage, answers=r.n)
            out = dataclasses.replace(out, usage=usage, latency_s=latency, prompt_hash=r.prompt_hash, attempts=1)
            self._record(r, 1, latency, completion=out)
            results[i] = out
        return results
