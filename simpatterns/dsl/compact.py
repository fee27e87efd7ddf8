"""Compact reward-synthesis prompts for small models (a few hundred tokens, not ten thousand).

The full prompt (`simpatterns.dsl.synthesize.build_messages`) holds the whole
DSL reference, every pattern with its description and every example: 9.7k
tokens, more than a small local model's context and minutes to read on a
CPU. The compact prompt keeps what this goal can use:

- the predicates, one line each (signature and first sentence);
- the patterns the goal's words point at (label and description overlap)
  plus those the chosen examples use, with their param keys only;
- the scene's bodies the goal names (by colour, side, "ground", "bucket"...)
  plus the agent's ball; all bodies when none is named;
- the few-shot examples whose goals share the most words with this one;
- then the goal. Examples are dropped, least similar first, until the
  estimated size (about 4 characters per token) fits ``budget_tokens``.

`CompactPrompt` also carries the chosen patterns and bodies: the
specialised grammar is built over the same ones, so the model can only
write what it was shown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from simpatterns.dsl.checker import as_signatures, signature_text
from simpatterns.dsl.parser import parse
from simpatterns.dsl.predicates import PREDICATES
from simpatterns.dsl.printer import format_program

DEFAULT_BUDGET_TOKENS = 1200  # the scene's colour and role phrases and lasting patterns take ~830; room for ~3 examples
MAX_PATTERNS = 5
MAX_EXAMPLES = 3

COMPACT_SYSTEM = """\
You write reward programs for goals in a 2D physics simulation. A program is AND(...) of \
clauses; each clause is a predicate over pattern events (label, params) or over the bodies. \
Answer with one program and nothing else."""

_STOP = frozenset("""a an and any are as at be been both but by do does each either for from get has have
in into is it its make must neither never no not of on once only or so such that the their them then there
these this to until when while with without ensure ensuring require time times object objects body bodies
ball balls simulation scene""".split())
_WALL_WORDS = ("wall", "boundar", "edge", "side")
_SIDES = ("left", "right", "top")


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """Stemmed words of ``text`` without stop words: what similarity is measured on."""
    return {_stem(w) for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 1}


def _similarity(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def select_examples(goal: str, examples: Sequence[Any], k: int = MAX_EXAMPLES) -> list[Any]:
    """The ``k`` examples (`GoalExample`) whose goals are most similar to ``goal`` (never the goal itself)."""
    words = content_words(goal)
    norm = " ".join(sorted(words))
    scored = [(-_similarity(words, content_words(e.goal)), i, e) for i, e in enumerate(examples)
              if " ".join(sorted(content_words(e.goal))) != norm]
    return [e for _, _, e in sorted(scored)[:k]]


def _uses(program: str, label: str) -> bool:
    return re.search(r"[\"']" + re.escape(label).replace(r"\ ", r"[ _]") + r"[\"']", program, re.I) is not None


def select_patterns(goal: str, library: Any, examples: Sequence[Any] = (), max_patterns: int = MAX_PATTERNS
                    ) -> list[str]:
    """Pattern labels for ``goal``: those its words point at, then those ``examples`` use."""
    sigs = as_signatures(library) or {}
    descs = {}
    if hasattr(library, "descriptions"):
        try:
            descs = {str(k): str(v) for k, v in library.descriptions().items()}
        except Exception:  # noqa: BLE001 - a foreign library: labels only
            descs = {}
    words = content_words(goal)
    # a description's first sentence says what the pattern is; words common to many say little (idf)
    firsts = {label: content_words(re.split(r"(?<=\.)\s", descs.get(label, ""), maxsplit=1)[0]) for label in sigs}
    df: dict[str, int] = {}
    for ws in firsts.values():
        for w in ws:
            df[w] = df.get(w, 0) + 1
    n = max(1, len(sigs))

    def idf(w: str) -> float:
        return math.log((n + 1) / (df.get(w, 0) + 1)) + 0.1

    scored = []
    for label in sigs:
        s = 3 * sum(idf(w) for w in words & content_words(label)) + sum(idf(w) for w in words & firsts[label])
        if s > 0:
            scored.append((-s, label))
    top = -scored[0][0] if scored else 0.0
    chosen = [label for s, label in sorted(scored)[:max_patterns] if -s >= top / 3]
    for e in examples:
        for label in sigs:
            if label not in chosen and _uses(e.program, label):
                chosen.append(label)
    return chosen or sorted(sigs)[:max_patterns]


def _body_name(b: Any) -> str:
    return b if isinstance(b, str) else b.name


def select_bodies(goal: str, bodies: Sequence[Any]) -> list[Any]:
    """The bodies ``goal`` names (colours, walls by side, ground, buckets) and the agent's ball;
    all of them when the goal names none."""
    words = set(re.findall(r"[a-z]+", goal.lower()))
    stems = {_stem(w) for w in words}
    wall_talk = any(w.startswith(_WALL_WORDS) for w in words)
    sides = [s for s in _SIDES if s in words]
    chosen, named = [], False
    for b in bodies:
        name = _body_name(b).lower()
        parts = name.split()
        if "wall" in parts:
            hit = wall_talk and (not sides or any(s in parts for s in sides))
        elif "ground" in parts or "floor" in parts:
            hit = bool(words & {"ground", "floor", "land", "lands", "landed"})
        elif "jar" in parts or "bucket" in parts or "basket" in parts:
            hit = bool(stems & {"bucket", "jar", "basket", "container", "cup"})
        else:
            hit = any(p in words or _stem(p) in stems for p in parts if not p.isdigit() and p not in ("ball", "bar"))
        named |= hit
        if hit or (not isinstance(b, str) and getattr(b, "role", "") == "agent"):
            chosen.append(b)
    return chosen if named else list(bodies)


def predicate_lines() -> list[str]:
    """One line per predicate: signature and the first sentence of its meaning."""
    lines = []
    for name, cls in PREDICATES.items():
        doc = " ".join((cls.__doc__ or "").replace("``", "").split())
        first = re.split(r"(?<=\.)\s", doc, maxsplit=1)[0].rstrip(".")
        sig = signature_text(cls) if name != "COUNT" else signature_text(cls) + " >= N"
        lines.append(f"- {sig}: {first}")
    return lines


@dataclass
class CompactPrompt:
    messages: list[dict[str, str]]
    patterns: list[str]
    bodies: list[Any] | None
    examples: list[Any] = field(default_factory=list)

    @property
    def estimated_tokens(self) -> int:
        return sum(len(m["content"]) for m in self.messages) // 4


def _canonical(program: str) -> str:
    try:
        return format_program(parse(program)).strip()  # drops comments: the decoding grammar has none
    except Exception:  # noqa: BLE001 - an example that does not parse is shown as written
        return program.strip()


def compact_prompt(goal: str, library: Any, *, bodies: Sequence[Any] | None = None, examples: Sequence[Any] = (),
                   budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> CompactPrompt:
    """The compact prompt for ``goal`` (see the module docstring)."""
    shots = select_examples(goal, examples)
    patterns = select_patterns(goal, library, shots)
    sigs = as_signatures(library) or {}
    chosen_bodies = select_bodies(goal, bodies) if bodies else None

    def build(shown: list[Any]) -> list[dict[str, str]]:
        parts = [COMPACT_SYSTEM, "Predicates:\n" + "\n".join(predicate_lines())]
        parts.append("Patterns (label: param keys):\n" + "\n".join(
            f'- "{p}": {", ".join(sigs.get(p, [])) or "none"}' for p in patterns))
        if shown:
            parts.append("Examples:\n" + "\n\n".join(f"Goal: {e.goal}\nProgram:\n{_canonical(e.program)}"
                                                     for e in shown))
        user = ""
        if chosen_bodies:
            user = "Bodies: " + ", ".join(f'"{_body_name(b)}"' for b in chosen_bodies) + "\n"
        user += f"Goal: {goal.strip()}\nProgram:"
        return [{"role": "system", "content": "\n\n".join(parts)}, {"role": "user", "content": user}]

    shown = list(shots)
    messages = build(shown)
    while shown and sum(len(m["content"]) for m in messages) // 4 > budget_tokens:
        shown.pop()  # the least similar goes first
        messages = build(shown)
    return CompactPrompt(messages, patterns, list(chosen_bodies) if chosen_bodies is not None else None, shown)
