"""The LLM layer: one client interface over OpenAI-compatible servers, in-process vLLM and llama.cpp, and replay.

::

    from simpatterns.llm import ChatRequest, make_client

    with make_client("openai", base_url="http://localhost:8000/v1", transcript="run.jsonl") as client:
        [c] = client.complete([ChatRequest([{"role": "user", "content": "Say hi"}], max_tokens=16)])

See `simpatterns.llm.client` for retries and budgets, `simpatterns.llm.testing`
for the scripted local server used by tests.
"""

from simpatterns.llm.client import LLMBackend, Budget, LLMClient, RetryPolicy, resolve_prompt_mode
from simpatterns.llm.errors import (
    LLMBackendError,
    LLMBudgetExceeded,
    LLMConfigError,
    LLMError,
    LLMReplayMissing,
    LLMRetriesExhausted,
    LLMTranscriptError,
)
from simpatterns.llm.factory import make_client, parse_spec
from simpatterns.llm.request import ChatRequest, Completion, Usage
from simpatterns.llm.transcript import TranscriptWriter, read_transcript

__all__ = [
    "LLMBackend", "Budget", "ChatRequest", "Completion", "LLMBackendError", "LLMBudgetExceeded", "LLMClient",
    "LLMConfigError", "LLMError", "LLMReplayMissing", "LLMRetriesExhausted", "LLMTranscriptError",
    "RetryPolicy", "TranscriptWriter", "Usage", "make_client", "parse_spec", "read_transcript", "resolve_prompt_mode",
]
