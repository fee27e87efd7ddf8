"""Budgets are hard: tokens counted from the text when usage is missing or implausible, no
request started past the budget, in-flight reservations released, the refusal names the budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from simpatterns.llm import ChatRequest, LLMBudgetExceeded, make_client
from simpatterns.llm.request import text_tokens
from simpatterns.llm.testing import Reply


def req(max_tokens: int = 256) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": "Write a detector."}], max_tokens=max_tokens)


LONG = "word " * 8000  # ~10,000 tokens whatever max_tokens says
RAW_NO_USAGE = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "scripted-model",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": LONG},
                                        "finish_reason": "stop"}]})


@pytest.mark.parametrize("server_kw", [
    {"default": Reply(LONG, usage={"prompt_tokens": 5, "completion_tokens": 1})},  # usage that cannot be true
    {"default": Reply(body=RAW_NO_USAGE)},  # not streamed, no usage at all
    {"default": "ok", "profile": "proxy", "runaway_tokens": 100_000},  # streams 100,000 tokens
    {"default": "ok", "profile": "vllm", "runaway_tokens": 100_000},
], ids=["implausible_usage", "missing_usage", "runaway_proxy", "runaway_vllm"])
def test_a_server_ignoring_max_tokens_is_read_up_to_max_tokens(serve, fast_retry, server_kw):
    """Reading stops at each request's max_tokens, so the job stays within its budget plus at
    most what one request may add, whatever the server sends."""
    server = serve(**server_kw)
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, concurrency=2,
                     max_total_tokens=2_000) as client:
        results = client.complete([req() for _ in range(16)], return_exceptions=True)
        budget = client.budget
    ok = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, LLMBudgetExceeded)]
    assert ok and refused and len(ok) + len(refused) == 16
    for c in ok:
        # read up to max_tokens (at 4 bytes a token), the last piece cut to fit
        assert c.finish_reasons == ["length"] and c.usage.completion_tokens == 256 == text_tokens(c.text)
        assert text_tokens(c.text) <= 256 and LONG.startswith(c.text) or c.text.startswith("ok and so on")
    assert budget.used_tokens <= 2_000 + 256
    assert len(server.requests) == len(ok)
    assert "token budget exhausted" in str(refused[0]) and "2000" in str(refused[0])
    if "runaway_tokens" in server_kw:  # each answer was streamed and cut: never read whole
        # (whether the server saw the hang-up before its writes filled the socket buffers is timing)
        assert len(server.log) == len(ok) and all(s.stream for s in server.log)
        assert all(c.sent.get("streamed") and c.sent.get("cut_at_max_tokens") for c in ok)


def test_reservations_of_requests_in_flight_are_released(serve, fast_retry):
    """Sixteen requests in flight reserve 16 x max_tokens, more than the budget; they use a tiny
    share of it. A request that does not fit next to the reservations waits for them instead
    of ending the run (it used to stop at 31 % of the budget with most samples failed)."""
    server = serve(default=Reply("short answer", delay_s=0.05))
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, concurrency=16,
                     max_total_tokens=20_000) as client:
        reqs = [req(max_tokens=2048) for _ in range(16)]
        results = asyncio.run(client.acomplete(reqs, return_exceptions=True))
        budget = client.budget
    assert all(not isinstance(r, Exception) for r in results), [r for r in results if isinstance(r, Exception)]
    assert budget.exhausted is None and budget.in_flight == 0 and budget.reserved_tokens == 0
    assert budget.used_tokens < 2_000
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, concurrency=4,
                     max_total_tokens=20_000) as client:
        results = client.complete([req(max_tokens=2048) for _ in range(16)], return_exceptions=True)
        assert all(not isinstance(r, Exception) for r in results)
        assert client.budget.in_flight == 0 and client.budget.reserved_tokens == 0


def test_a_cancelled_request_gives_its_reservation_back(serve, fast_retry):
    server = serve(default=Reply("late", delay_s=5.0))
    with make_client("openai", base_url=server.base_url, model="m", retry=fast_retry, concurrency=4,
                     max_total_tokens=50_000) as client:
        async def go() -> None:
            task = asyncio.ensure_future(client.acomplete([req(2048) for _ in range(4)]))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(go())
        assert client.budget.in_flight == 0 and client.budget.reserved_tokens == 0
        assert client.budget.exhausted is None


def test_async_reading_stops_at_max_tokens_too(serve, fast_retry):
    """The evolver's path (acomplete): 100,000 streamed tokens per answer, 30 requests, 1,000 tokens of budget."""
    server = serve(default="ok", profile="proxy", runaway_tokens=100_000)
    with make_client("openai", base_url=server.base_url, retry=fast_retry, concurrency=4,
                     max_total_tokens=1_000) as client:
        results = asyncio.run(client.acomplete([req(max_tokens=100) for _ in range(30)], return_exceptions=True))
        budget = client.budget
    ok = [r for r in results if not isinstance(r, Exception)]
    assert ok and all(isinstance(r, LLMBudgetExceeded) for r in results if r not in ok)
    assert all(c.usage.completion_tokens == 100 and c.finish_reasons == ["length"] for c in ok)
    assert budget.used_tokens <= 1_000 + 100 and len(server.requests) == len(ok)
