"""Chat requests and completions: the only data the LLM layer exchanges.

A `ChatRequest` is everything that determines an answer (messages and
sampling parameters); its `prompt_hash` keys transcripts and replay. A
`Completion` is what came back: ``n`` texts, why each stopped, token usage.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

ROLES = ("system", "user", "assistant", "tool", "developer")


def clean_text(text: str) -> str:
    """``text`` made encodable: a lone surrogate (valid in a Python str and in JSON's
    ``\\ud800``, never in UTF-8) becomes ``?``. Everything the layer sends, hashes, records
    or returns goes through it, so no answer can make a later encode raise."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def has_images(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message carries an image content part (``{"type": "image_url", ...}``)."""
    return any(isinstance(m.get("content"), list) and any(
        isinstance(p, Mapping) and p.get("type") in ("image_url", "input_image", "image") for p in m["content"])
        for m in messages)


@dataclass
class ChatRequest:
    """One chat request; ``n`` samples of the reply to ``messages``.

    ``grammar`` is a Lark grammar the server should constrain decoding to
    (vLLM structured outputs); backends that cannot honour it decode
    unconstrained and say so in `Completion.constrained`.
    """

    messages: Sequence[Mapping[str, Any]]
    n: int = 1
    temperature: float = 0.7
    seed: int | None = None
    max_tokens: int = 1024
    stop: Sequence[str] | None = None
    grammar: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.messages, (str, bytes)) or not isinstance(self.messages, Sequence):
            raise TypeError("ChatRequest.messages must be a list of {'role', 'content'} dicts")
        msgs = []
        for i, m in enumerate(self.messages):
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ValueError(f"ChatRequest.messages[{i}] must be a mapping with 'role' and 'content'")
            if m["role"] not in ROLES:
                raise ValueError(f"ChatRequest.messages[{i}].role {m['role']!r} is not one of {ROLES}")
            msg = dict(m)
            if isinstance(msg["content"], str):
                msg["content"] = clean_text(msg["content"])
            msgs.append(msg)
        if not msgs:
            raise ValueError("ChatRequest.messages is empty")
        self.messages = msgs
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"ChatRequest.n must be an integer >= 1, got {self.n!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"ChatRequest.max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)) or self.temperature < 0:
            raise ValueError(f"ChatRequest.temperature must be a finite number >= 0, got {self.temperature!r}")
        self.temperature = float(self.temperature)
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError(f"ChatRequest.seed must be an integer or None, got {self.seed!r}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None:
            self.stop = [str(s) for s in self.stop]

    def params(self) -> dict[str, Any]:
        """Sampling parameters (everything but the messages), JSON-ready."""
        return {
            "n": self.n,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop) if self.stop is not None else None,
            "grammar": self.grammar,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self.messages], **self.params()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ChatRequest":
        return cls(
            messages=data["messages"],
            n=data.get("n", 1),
            temperature=data.get("temperature", 0.7),
            seed=data.get("seed"),
            max_tokens=data.get("max_tokens", 1024),
            stop=data.get("stop"),
            grammar=data.get("grammar"),
        )

    @property
    def prompt_hash(self) -> str:
        """SHA-256 of the messages and sampling parameters (not the model).

        Two requests with the same hash must get the same recorded answer on
        replay, so the seed, n and the grammar are part of it.
        """
        blob = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def preview(self, width: int = 80) -> str:
        """The start of the last user message, for error messages."""
        text = ""
        for m in reversed(self.messages):
            if m["role"] == "user":
                text = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                break
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 3] + "..."

    def estimated_prompt_tokens(self) -> int:
        """Rough prompt size (about 4 characters per token) for budget reservations."""
        chars = sum(len(m["content"]) if isinstance(m["content"], str) else len(json.dumps(m["content"]))
                    for m in self.messages)
        return chars // 4 + 4 * len(self.messages)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Usage":
        data = data or {}
        return cls(int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0))


# No tokenizer spends more than this many UTF-8 bytes per token on average; a server whose
# usage says fewer tokens than ``bytes / MAX_BYTES_PER_TOKEN`` is not believed.
MAX_BYTES_PER_TOKEN = 16
BYTES_PER_TOKEN_ESTIMATE = 4  # the usual ~4 characters per token


def text_tokens(text: str) -> int:
    """Tokens of ``text`` estimated from its size (about 4 bytes each)."""
    return -(-len(text.encode("utf-8", "replace")) // BYTES_PER_TOKEN_ESTIMATE)


def counted_usage(request: "ChatRequest", completion: "Completion") -> Usage:
    """The tokens a completion is charged: the server's ``usage`` where it is there and
    plausible, else estimated from the text itself (a server that omits usage, or reports a
    few tokens for a long answer, as one that ignores ``max_tokens`` may)."""
    nbytes = sum(len(t.encode("utf-8", "replace")) for t in completion.texts)
    reported = completion.usage.completion_tokens
    completion_tokens = reported
    if reported <= 0 or reported * MAX_BYTES_PER_TOKEN < nbytes:
        completion_tokens = max(reported, sum(text_tokens(t) for t in completion.texts))
    prompt_tokens = completion.usage.prompt_tokens
    if prompt_tokens <= 0:
        prompt_tokens = request.estimated_prompt_tokens()
    return Usage(prompt_tokens, completion_tokens)


@dataclass
class Completion:
    """The ``n`` answers to one `ChatRequest`.

    ``finish_reasons[i]`` is ``"stop"`` or ``"length"`` (cut off at
    ``max_tokens``) or what the server said. ``constrained`` is true when the
    request's grammar was enforced by the server. ``attempts`` counts the
    HTTP attempts it took (retries included). ``sent`` says how the request went out
    where a backend adapted it to the server (the grammar's field, the token-limit field,
    fields left out, whether reading stopped at ``max_tokens``); the transcript keeps it.
    """

    texts: list[str]
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0
    finish_reasons: list[str] = field(default_factory=list)
    prompt_hash: str = ""
    attempts: int = 1
    constrained: bool = False
    sent: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.texts = [clean_text(t) if isinstance(t, str) else "" for t in self.texts]

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "texts": list(self.texts),
            "finish_reasons": list(self.finish_reasons),
            "usage": self.usage.to_dict(),
            "model": self.model,
            "latency_s": self.latency_s,
            "prompt_hash": self.prompt_hash,
            "attempts": self.attempts,
            "constrained": self.constrained,
        }
