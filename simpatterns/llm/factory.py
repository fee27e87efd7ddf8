"""`make_client`: an `LLMClient` from a short spec, flags and environment variables.

Specs: ``openai`` (any OpenAI-compatible server; ``openai:MODEL`` names the
model), ``vllm`` / ``vllm:MODEL`` (in-process), ``local`` / ``local:MODEL``
(in-process llama.cpp: a model name such as ``smollm2-135m`` or a GGUF
path, optionally followed by ``?n_ctx=8192&threads=2&top_k=20``...),
``replay:FILE``. Without a spec, ``SIMPATTERNS_LLM`` is read (default
``openai``). Environment:
``SIMPATTERNS_LLM_BASE_URL`` (or ``OPENAI_BASE_URL``),
``SIMPATTERNS_LLM_MODEL``, ``SIMPATTERNS_LLM_API_KEY`` (or
``OPENAI_API_KEY``). ``transcript=PATH`` records every attempt with any
backend (``--record``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from simpatterns.llm.client import AUTO, Budget, LLMClient, RetryPolicy
from simpatterns.llm.errors import LLMConfigError

BACKENDS = ("openai", "vllm", "local", "replay")
SPEC_HELP = "openai, openai:MODEL, vllm, vllm:MODEL, local, local:MODEL (a name or a .gguf path), replay:FILE"


def parse_spec(spec: str | None) -> tuple[str, str | None]:
    """``"replay:run.jsonl"`` -> ``("replay", "run.jsonl")``."""
    spec = (spec or os.environ.get("SIMPATTERNS_LLM") or "openai").strip()
    kind, _, arg = spec.partition(":")
    kind, q, options = kind.partition("?")  # "local?threads=2": options without a model
    if q:
        arg = "?" + options + (":" + arg if arg else "")
    kind = kind.strip().lower()
    if kind not in BACKENDS:
        raise LLMConfigError(f"unknown LLM backend {spec!r}; use one of: {SPEC_HELP}")
    arg = arg.strip() or None
    if kind == "replay" and arg is None:
        raise LLMConfigError("replay needs a transcript: --llm replay:FILE.jsonl")
    return kind, arg


def make_client(
    spec: str | None = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    grammar: str = "auto",
    concurrency: int | str = AUTO,
    timeout_s: float | None | str = AUTO,
    retry: RetryPolicy | None = None,
    budget: Budget | None = None,
    max_total_tokens: int | None = None,
    max_requests: int | None = None,
    transcript: str | os.PathLike | None = None,
    engine_kwargs: dict[str, Any] | None = None,
    default_concurrency: int = 8,
) -> LLMClient:
    """An `LLMClient` for ``spec``; see the module docstring. ``concurrency`` and
    ``timeout_s`` default to what the server wants (`LLMClient`); ``engine_kwargs``
    go to the in-process engine (vLLM's ``LLM``, `LocalBackend`)."""
    kind, arg = parse_spec(spec)
    if budget is None:
        budget = Budget(max_tokens=max_total_tokens, max_requests=max_requests)
    elif max_total_tokens is not None or max_requests is not None:
        raise LLMConfigError("give either budget= or max_total_tokens=/max_requests=, not both")
    if kind == "replay":
        from simpatterns.llm.replay import ReplayBackend

        assert arg is not None
        if transcript is not None and Path(transcript).resolve() == Path(arg).resolve():
            raise LLMConfigError(f"cannot record into the transcript being replayed ({arg})")
        backend: Any = ReplayBackend(arg)
    elif kind == "vllm":
        from simpatterns.llm.vllm_backend import VLLMBackend

        backend = VLLMBackend(model or arg or os.environ.get("SIMPATTERNS_LLM_MODEL"), grammar=grammar != "off",
                              **(engine_kwargs or {}))
    elif kind == "local":
        from simpatterns.llm.local_backend import LocalBackend, parse_options

        name, _, options = (arg or "").partition("?")
        kwargs = {**parse_options(options, f"--llm {spec}"), **(engine_kwargs or {})}
        backend = LocalBackend(model or name.strip() or None, grammar=grammar != "off", **kwargs)
    else:
        from simpatterns.llm.openai_backend import OpenAIBackend

        backend = OpenAIBackend(base_url=base_url, model=model or arg, api_key=api_key, grammar=grammar)
    return LLMClient(backend, concurrency=concurrency, timeout_s=timeout_s, retry=retry, budget=budget,
                     transcript=transcript, default_concurrency=default_concurrency)
