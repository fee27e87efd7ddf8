"""The DSL reference, generated from the grammar and the predicate classes
(their docstrings, signatures, score rules and examples) so that the text
an LLM is prompted with always describes the code that runs.

``python -m simpatterns.dsl`` prints it; ``--predicates`` prints only the
per-predicate section (the one ``docs/reference/dsl.md`` embeds).
"""

from __future__ import annotations

import inspect

from simpatterns.dsl import matching, predicates, references, runtime
from simpatterns.dsl.checker import KIND_SHORT, signature_text
from simpatterns.dsl.parser import grammar_text
from simpatterns.dsl.predicates import KIND_DOCS, PREDICATES, Comparison, Node

GROUPS = (
    ("Events and counts", ("EVENT", "COUNT")),
    ("Logic", ("AND", "OR", "NOT")),
    ("Time and order", ("AFTER", "BEFORE", "FIRST", "LAST", "NEVER", "ALWAYS")),
    ("State at a time (trace)", ("TOUCHING", "NEARBY_AT", "DISTANCE")),
)


def _doc(obj) -> str:
    return inspect.cleandoc(obj.__doc__ or "")


def _paragraphs(text: str) -> str:
    """Paragraphs re-flowed onto single lines (tables and lists kept as written)."""
    out = []
    for para in text.strip().split("\n\n"):
        lines = para.splitlines()
        keep = any(ln.lstrip().startswith(("|", "- ")) for ln in lines)
        out.append(para if keep else " ".join(para.split()))
    return "\n\n".join(out)


def _section(doc: str) -> str:
    """A module docstring minus its first paragraph (the title sentence)."""
    parts = doc.split("\n\n", 1)
    return parts[1].strip() if len(parts) > 1 else parts[0]


def predicate_entry(cls: type[Node], level: int = 3) -> str:
    lines = [f"{'#' * level} {signature_text(cls)}", "", " ".join(_doc(cls).split()), ""]
    if cls.VARIADIC is not None:
        lines.append(f"- operands: {KIND_SHORT[cls.VARIADIC.kind]} each, at least one")
    for a in cls.SIGNATURE:
        req = "required" if a.required else "optional"
        lines.append(f"- `{a.name}` ({req}): {KIND_DOCS[a.kind]}")
    lines.append(f"- reads: {cls.READS if cls.READS != '-' else 'its operands'}")
    lines.append(f"- score: {cls.SCORE}")
    lines.append(f"- under NOT: {cls.NOT_SCORE}")
    for ex in cls.EXAMPLES:
        lines.append(f"- example: `{ex}`")
    return "\n".join(lines)


def predicate_reference(level: int = 2) -> str:
    """Every predicate (signature, meaning, arguments, score rules, examples),
    grouped under headings of the given markdown level."""
    out = []
    for title, names in GROUPS:
        out.append(f"{'#' * level} {title}\n")
        for n in names:
            out.append(predicate_entry(PREDICATES[n], level + 1) + "\n")
    out.append(f"{'#' * level} Comparisons\n")
    out.append(
        f"`COUNT(...) OP n` or `COUNT(...) OP COUNT(...)`, OP one of `== != < <= > >=`, n a whole number.\n\n"
        f"- score: {Comparison.SCORE}\n- under NOT: {Comparison.NOT_SCORE}\n"
    )
    return "\n".join(out).rstrip() + "\n"


def _grammar_rules() -> str:
    """The grammar without its leading comment block."""
    lines = grammar_text().splitlines()
    while lines and (lines[0].startswith("//") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines)


def reference_text() -> str:
    """The full DSL reference: syntax (the Lark grammar), values, time,
    params matching, scoring and every predicate with its score rule."""
    names = ", ".join(PREDICATES)
    return f"""# Reward program DSL

A reward program is ONE expression, usually `AND(clause, clause, ...)`, over an
annotated simulation trace: a list of pattern events (label, frame, params).
It yields a boolean success and a dense score in [0, 1]; the score is 1
exactly when the program succeeds. The top-level AND scores the mean of its
clauses' scores (partial credit).

## Syntax

Calls `NAME(arg, ..., key=value, ...)` with predicate names in upper case
({names}); values are "double-quoted strings", numbers, lists `[...]`,
tuples `(...)`, dicts `{{"key": value}}`; trailing commas and `# comments`
are allowed. Pattern labels match the library whether written with spaces or
underscores. Grammar (Lark):

```
{_grammar_rules()}
```

## Time

{_paragraphs(_section(_doc(runtime)))}

## Events with duration

{_paragraphs(predicates.DURATION_RULE)}

## Params

{_section(_doc(matching))}

## Naming bodies

{_section(_doc(references))}

## Scoring

Every node yields (success, score) with score in [0, 1] and score == 1
exactly when it succeeds; a failing node scores at most {runtime.PARTIAL_MAX}.
`inverse_log(x) = 1 / (1 + ln(1 + x))` shapes distances and count deviations.

## Writing a program

- One clause per condition of the goal, under one top-level AND: each clause
  earns its own partial credit.
- Use only the library's pattern labels with their param keys, and the
  scene's body names or a colour/role phrase ("green object", "the goal
  object"); a wildcard such as "object X" stands for any body.
- "X never happens" is NEVER(...); "Y after X" is AFTER(X, Y); "X before Y
  ever happens" is BEFORE(X, Y); "at the end" is t=1.0; "within the first
  20%" is window=(0, 0.2); "exactly once" is COUNT(...) == 1.
- Count touches with "touch start" (contacts that flicker apart for a frame
  or two are one touch, as people count them); "collision start" counts
  every raw contact start. "Never touches" is NEVER(TOUCHING(a, b)).
- "Stopped moving" / "comes to rest" is the "comes to rest" pattern (its
  surface param says what it rests on); "very close" is a DISTANCE between
  surfaces, e.g. DISTANCE(a, b, window=(0.4, 0.6)) <= 5.
- Name bodies as the goal does: "the green object" is "green object" (any
  green body, whatever its shape), "the goal object", "the agent's ball";
  a class runs on every scene.
- Prefer dense clauses where the goal allows: NEARBY_AT for places, COUNT
  comparisons for numbers of events, DISTANCE comparisons for nearness.

{predicate_reference()}"""
