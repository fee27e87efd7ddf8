"""In-process vLLM backend (``pip install 'simpatterns[vllm]'``, Linux + CUDA).

Runs a `vllm.LLM` in this process and hands it whole batches (vLLM batches
better than any client-side concurrency). ``max_tokens`` is always passed
explicitly: `SamplingParams` defaults to 16 tokens, which silently
truncates programs. Grammars go in as GBNF (translated from Lark and
validated, see `simpatterns.llm.grammars`: xgrammar and guidance both take
it) in ``StructuredOutputsParams(grammar=...)``; if the engine refuses one,
the batch is re-run unconstrained and grammars are not sent again.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from simpatterns.llm.client import LLMBackend
from simpatterns.llm.errors import LLMBackendError, LLMConfigError
from simpatterns.llm.grammars import GrammarError, as_gbnf
from simpatterns.llm.request import ChatRequest, Completion, Usage

log = logging.getLogger(__name__)

MISSING_VLLM = (
    "the in-process vLLM backend needs the `vllm` package: pip install 'simpatterns[vllm]' "
    "(Linux with a CUDA GPU); or start a server with `vllm serve MODEL` and use --llm openai --base-url "
    "http://localhost:8000/v1"
)


class VLLMBackend(LLMBackend):
    name = "vllm"
    supports_batch = True

    def __init__(self, model: str | None = None, *, llm: Any = None, grammar: bool = True,
                 **engine_kwargs: Any) -> None:
        try:
            from vllm import LLM, SamplingParams
            from vllm.sampling_params import StructuredOutputsParams
        except ImportError as exc:
            raise LLMConfigError(MISSING_VLLM) from exc
        self._SamplingParams = SamplingParams
        self._StructuredOutputsParams = StructuredOutputsParams
        if llm is None:
            if not model:
                raise LLMConfigError("the vllm backend needs a model: --model or SIMPATTERNS_LLM_MODEL")
            llm = LLM(model=model, **engine_kwargs)
        self._llm = llm
        self._model = model or "vllm-in-process"
        self._grammar = grammar
        self._grammar_refused: str | None = None

    @property
    def model(self) -> str:
        return self._model

    @property
    def server_kind(self) -> str:
        return "vllm"

    @property
    def grammar_enabled(self) -> bool:
        return self._grammar and self._grammar_refused is None

    def disable_grammar(self, reason: str) -> None:
        self._grammar_refused = reason

    def _params(self, r: ChatRequest, constrained: bool) -> Any:
        kwargs: dict[str, Any] = dict(n=r.n, temperature=r.temperature, seed=r.seed,
                                      max_tokens=r.max_tokens, stop=list(r.stop) if r.stop else None)
        if constrained and r.grammar:
            try:
                gbnf = as_gbnf(r.grammar)
            except GrammarError as exc:
                raise LLMBackendError(f"invalid grammar, not used: {exc}", kind="grammar_invalid") from exc
            kwargs["structured_outputs"] = self._StructuredOutputsParams(grammar=gbnf)
        return self._SamplingParams(**kwargs)

    def _run(self, requests: Sequence[ChatRequest], constrained: bool) -> list[Any]:
        return self._llm.chat([list(r.messages) for r in requests],
                              sampling_params=[self._params(r, constrained) for r in requests],
                              use_tqdm=False)

    def call_batch(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        constrained = self.grammar_enabled and any(r.grammar for r in requests)
        try:
            outs = self._run(requests, constrained)
        except ValueError as exc:
            if not constrained:
                raise LLMBackendError(f"vLLM refused the batch: {exc}", kind="engine") from exc
            log.warning("vLLM refused the grammar; decoding unconstrained from now on: %s", exc)
            self.disable_grammar(str(exc))
            constrained = False
            try:
                outs = self._run(requests, False)
            except ValueError as exc2:
                raise LLMBackendError(f"vLLM refused the batch: {exc2}", kind="engine") from exc2
        completions = []
        for r, o in zip(requests, outs):
            texts = [c.text for c in o.outputs]
            completions.append(Completion(
                texts=texts,
                usage=Usage(len(o.prompt_token_ids or ()), sum(len(c.token_ids or ()) for c in o.outputs)),
                model=self._model,
                finish_reasons=[str(c.finish_reason or "unknown") for c in o.outputs],
                constrained=constrained and bool(r.grammar),
            ))
        return completions

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        return self.call_batch([request])[0]
