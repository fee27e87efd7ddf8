"""Self-discovery (the paper's): the LLM proposes new labels from the library and from
reasoning texts, each then evolved like a guided label.

`propose_labels` asks once and turns the answer into a `ProposedLabels` record
(`parse_proposed_labels` reads a JSON list, fenced or not, and skips what does
not fit: unknown shapes, labels the job has already).
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from simpatterns.annotation import normalize_label
from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve.prompt import MAX_ANSWER_CHARS, LabelSpec
from simpatterns.evolve.records import ProposedLabels


async def propose_labels(client: Any, library: PatternLibrary, taken: set[str], reasoning_texts: Sequence[str],
                         k: int, seed: int, temperature: float, max_tokens: int) -> ProposedLabels:
    """Ask ``client`` (an `LLMClient`) for up to ``k`` new labels not in ``taken``."""
    from simpatterns.llm import ChatRequest, LLMError

    messages = self_discovery_prompt(library, reasoning_texts, k)
    request = ChatRequest(messages, n=1, temperature=temperature, seed=seed, max_tokens=max_tokens)
    try:
        [completion] = await client.acomplete([request])
    except LLMError as exc:
        return ProposedLabels([], why=f"llm_error: {exc}")
    text = completion.text
    return ProposedLabels(parse_proposed_labels(text, taken, k), prompt_hash=request.prompt_hash, answer=text[:4000])


def self_discovery_prompt(library: PatternLibrary, reasoning_texts: Sequence[str], k: int) -> list[dict[str, str]]:
    lines = ["The pattern library currently holds these patterns (label: description):"]
    for label, desc in library.descriptions().items():
        lines.append(f"- {label}: {desc}")
    if reasoning_texts:
        lines.append("\nReasoning written while answering questions about simulations with this library:")
        for i, text in enumerate(reasoning_texts):
            lines.append(f"\n[reasoning {i + 1}]\n{text.strip()[:4000]}")
    lines.append(
        f"\nPropose up to {k} NEW patterns that would have helped: events in physics traces that the library "
        "cannot express yet, each detectable from positions, velocities, contacts and the events of existing "
        "patterns. Answer with a JSON list of objects with keys \"label\" (a few lower-case words) and "
        "\"description\" (one or two precise sentences, with thresholds where they matter)."
    )
    return [{"role": "system", "content": "You design event detectors for physics simulation traces."},
            {"role": "user", "content": "\n".join(lines)}]


def parse_proposed_labels(text: str, taken: set[str], k: int) -> list[LabelSpec]:
    """Labels from the LLM's answer (a JSON list, possibly fenced); unknown shapes are skipped."""
    text = text[:MAX_ANSWER_CHARS]
    # the first "[" to the last "]" (what a greedy r"\[.*\]" finds, without its quadratic backtracking)
    start, end = text.find("["), text.rfind("]")
    items: list[Any] = []
    if 0 <= start < end:
        try:
            items = json.loads(text[start:end + 1])
        except (json.JSONDecodeError, RecursionError):
            items = []
    if not items:
        items = []
        for obj in re.findall(r"\{[^{}]*\}", text):
            try:
                items.append(json.loads(obj))
            except (json.JSONDecodeError, RecursionError):
                continue
    out: list[LabelSpec] = []
    seen = set(taken)
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        label, desc = it.get("label"), it.get("description")
        if not isinstance(label, str) or not isinstance(desc, str) or not label.strip() or not desc.strip():
            continue
        label = normalize_label(label)
        if label in seen or len(label) > 60:
            continue
        seen.add(label)
        out.append(LabelSpec(label=label, description=" ".join(desc.split())[:600], self_discovered=True))
        if len(out) >= k:
            break
    return out
