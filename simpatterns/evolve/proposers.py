"""Proposers: where candidate programs come from.

Both kinds answer ``await propose(prompt, spec, versions, seed)`` with a
`ProposedModule`: a full detector module and its tree (the proposer parsed it, once:
nothing downstream parses it again), or the reason there is none:

- `LLMProposer` sends the prompt through the LLM layer (`simpatterns.llm`)
  and assembles the answer into a module (`prompt.assemble`).
- `OfflineProposer` needs no model: it mutates the numeric constants and
  comparison operators of the best version shown (and sometimes first
  crosses its thresholds with the other version's). It is a real operator:
  a baseline, a threshold tuner after an LLM has written the structure, and
  what makes ``simpatterns discover --offline`` work on a fresh machine.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simpatterns.detectors.contract import AST_LOCK
from simpatterns.evolve.mutation import crossover, mutate
from simpatterns.evolve.prompt import LabelSpec, Prompt, Version, assemble
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Reason, Rejected


@dataclass
class ProposedModule:
    """A proposed module (``source``, None with the ``reason`` there is none) and its
    ``tree`` when the proposer parsed it (the gate then does not parse it again)."""

    source: str | None
    reason: Reason | None = None
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    tree: ast.Module | None = field(default=None, repr=False)


class OfflineProposer:
    """Mutation (and crossover) of the versions in the prompt; no LLM."""

    name = "offline-mutation"
    needs_prompt_text = False

    def __init__(self, crossover_probability: float = 0.3, sigma: float = 0.3, max_changes: int = 3,
                 flip_probability: float = 0.1, escape_sigma: float = 1.0):
        self.crossover_probability = crossover_probability
        self.sigma = sigma
        # when the best version shown has no score (a seed that never fires), small steps
        # around it stay degenerate: jump further
        self.escape_sigma = escape_sigma
        self.max_changes = max_changes
        self.flip_probability = flip_probability

    async def propose(self, prompt: Prompt, spec: LabelSpec, versions: Sequence[Version], seed: int) -> ProposedModule:
        with AST_LOCK:
            return self.propose_sync(versions, seed)

    def propose_sync(self, versions: Sequence[Version], seed: int) -> ProposedModule:
        rng = np.random.default_rng(seed)
        primary = versions[-1].source
        if len(versions) > 1 and rng.random() < self.crossover_probability:
            crossed = crossover(primary, versions[0].source, rng)
            if crossed is not None:
                primary = crossed
                if rng.random() < 0.5:  # sometimes the crossover alone
                    return ProposedModule(primary, model=self.name)
        sigma = self.sigma if versions[-1].fitness is not None else self.escape_sigma
        child = mutate(primary, rng, self.max_changes, sigma, self.flip_probability)
        if child is None:
            return ProposedModule(None, Reason(R.NOTHING_TO_MUTATE, "no numeric constant or comparison to change"),
                            model=self.name)
        return ProposedModule(child[0], model=self.name, tree=child[1])


class LLMProposer:
    """Prompts an `LLMClient` (``simpatterns.llm``); one request per sample."""

    needs_prompt_text = True

    def __init__(self, client: Any, temperature: float = 0.8, max_tokens: int = 2048):
        self.client = client
        self.temperature = temperature
        self.max_tokens = max_tokens

    @property
    def exhausted(self) -> str | None:
        """The client's budget refusal (which budget, in words), once it refused."""
        budget = getattr(self.client, "budget", None)
        return getattr(budget, "exhausted", None)

    @property
    def name(self) -> str:
        try:
            return str(self.client.model)
        except Exception:  # noqa: BLE001 - a backend that cannot say
            return "llm"

    async def propose(self, prompt: Prompt, spec: LabelSpec, versions: Sequence[Version], seed: int) -> ProposedModule:
        from simpatterns.llm import ChatRequest, LLMError

        request = ChatRequest(prompt.messages, n=1, temperature=self.temperature, seed=int(seed) % (2**31),
                              max_tokens=self.max_tokens)
        try:
            [completion] = await self.client.acomplete([request])
        except LLMError as exc:
            return ProposedModule(None, Reason(R.LLM_ERROR, str(exc)[:300]), model=self.name)
        usage = completion.usage
        finish = completion.finish_reasons[0] if completion.finish_reasons else ""
        base = {"model": completion.model or self.name, "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens, "finish_reason": finish}
        try:
            source, tree = assemble(completion.text, prompt, spec)
        except Rejected as exc:
            detail = exc.reason.detail + (" (answer cut at max_tokens)" if finish == "length" else "")
            return ProposedModule(None, Reason(exc.reason.code, detail), **base)
        return ProposedModule(source, tree=tree, **base)
