"""Natural-language goal -> reward program, with an LLM and a repair loop (paper §3.3).

The prompt is the paper's structured prompt: the DSL reference (generated
from the grammar and the predicate classes, `reference_text`), the pattern
library (labels, parameter keys, descriptions), few-shot goal -> program
examples (``examples/goals/*.rwd``), the scene's bodies when known, and the
goal. Each attempt samples ``n`` candidates; each is extracted from the
answer (code fences, prose, ``<think>`` blocks), parsed and checked against
the library and the scene's body names. The first valid one wins. If none
is, the most promising candidate goes back to the model with the exact
error messages (`DSLErrors`), up to ``max_attempts`` attempts; then
`SynthesisFailed` says why.

Small local models get the compact prompt (`simpatterns.dsl.compact`:
only the patterns, bodies and examples this goal can use, within a token
budget): ``prompt="auto"`` picks it when the client prefers it (in-process
llama.cpp, a llama.cpp server). When the server takes a grammar (vLLM,
llama.cpp), decoding is constrained by the grammar specialised to the
library and scene (`simpatterns.dsl.constrained`; over the patterns and
bodies the prompt shows), so a candidate parses and checks by construction;
``grammar="generic"`` sends the DSL's own grammar, ``"none"`` none.

    result = synthesize_reward("Make the green ball touch the blue bar", client,
                               library=PatternLibrary.builtin(), bodies=scene_bodies)
    result.program.save("goal.rwd")
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from simpatterns.dsl.errors import DSLError, DSLErrors
from simpatterns.dsl.parser import parse, predicate_names
from simpatterns.dsl.checker import check
from simpatterns.dsl.compact import DEFAULT_BUDGET_TOKENS, compact_prompt
from simpatterns.dsl.constrained import decoding_grammar, specialised_grammar
from simpatterns.dsl.printer import format_program
from simpatterns.dsl.program import RewardProgram
from simpatterns.dsl.reference_text import reference_text
from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write
from simpatterns.llm.client import resolve_prompt_mode
from simpatterns.llm.errors import LLMError
from simpatterns.llm.request import ChatRequest, Completion, Usage

# the shipped goals (package data, so they are there on a wheel install too)
DEFAULT_EXAMPLES_DIR = Path(str(resources.files("simpatterns.examples") / "goals"))

SYSTEM_INTRO = """\
You translate goals for a 2D physics simulation, written in natural language, \
into reward programs in a small domain-specific language (DSL). A reward program \
is evaluated on an annotated simulation trace: the list of pattern events (label, \
time, params) that a library of pattern detectors found in one rollout. It must \
succeed exactly when the goal is achieved and give partial credit otherwise.

Rules:
- Answer with ONE program and nothing else: no explanation, no code fences.
- Use only the predicates of the DSL reference, only pattern labels of the \
library, only the param keys each pattern emits, and only body names of the \
scene (when one is given), all spelled exactly as listed.
- Put every condition of the goal in a top-level AND(...); its score is the \
mean of its clauses, so each clause should be a separately satisfiable part \
of the goal."""

TASK_TEMPLATE = """\
{scene}# Goal

{goal}

Write the reward program for this goal. Reply with the program only."""

REPAIR_TEMPLATE = """\
That program is not valid. {problem}

{errors}

Write the corrected program for the same goal. Reply with the program only."""


# ---------------------------------------------------------------------------- examples


@dataclass(frozen=True)
class GoalExample:
    """A few-shot example: a goal in words and its reward program."""

    goal: str
    program: str
    source: str = ""


_QUOTED = re.compile(r"[\"\u201c]([^\"\u201d]{8,})[\"\u201d]")


def _split_example(text: str) -> tuple[str, str]:
    """Leading ``#`` comment block -> goal (its quoted part when there is one); rest -> program."""
    lines = text.splitlines()
    header: list[str] = []
    while lines and lines[0].lstrip().startswith("#"):
        header.append(lines.pop(0).lstrip()[1:].strip())
    comment = " ".join(h for h in header if h)
    m = _QUOTED.search(comment)
    goal = m.group(1).strip() if m else comment
    return goal, "\n".join(lines).strip()


def load_goal_examples(
    directory: str | os.PathLike | None = None,
    library: Any = None,
    limit: int | None = None,
) -> list[GoalExample]:
    """Examples from ``*.rwd`` files whose first line is a ``#`` comment with the goal.

    Files that do not check against ``library`` (when given) are skipped: a
    few-shot example that the checker rejects would teach the model errors.
    A missing directory gives no examples.
    """
    directory = Path(directory) if directory is not None else DEFAULT_EXAMPLES_DIR
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.rwd")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        goal, program = _split_example(text)
        if not goal or not program:
            continue
        if library is not None and check(program, library):
            continue
        out.append(GoalExample(goal=goal, program=program, source=str(path)))
        if limit is not None and len(out) >= limit:
            break
    return out


# ---------------------------------------------------------------------------- prompt


def _signatures_and_descriptions(library: Any, descriptions: Mapping[str, str] | None
                                 ) -> tuple[dict[str, list[str]], dict[str, str]]:
    if hasattr(library, "signatures") and callable(library.signatures):
        sigs = {str(k): [str(p) for p in v] for k, v in library.signatures().items()}
        if descriptions is None and hasattr(library, "descriptions"):
            descriptions = library.descriptions()
    elif isinstance(library, Mapping):
        sigs = {str(k): [str(p) for p in v] for k, v in library.items()}
    else:
        raise TypeError("library must be a PatternLibrary or a mapping label -> param keys")
    return sigs, {str(k): str(v) for k, v in (descriptions or {}).items()}


def library_text(library: Any, descriptions: Mapping[str, str] | None = None) -> str:
    """The pattern library as the prompt lists it: label, params, description."""
    sigs, descs = _signatures_and_descriptions(library, descriptions)
    decl = library.declarations() if callable(getattr(library, "declarations", None)) else {}
    lines = ["# Pattern library", "",
             "Patterns the annotated trace can contain (label, the param keys each event carries, whether its "
             "events last, meaning):", ""]
    for label in sorted(sigs):
        params = ", ".join(sigs[label]) or "none"
        d = decl.get(label)
        lasts = "; lasts `frames` frames" if d is not None and getattr(d, "duration", "") == "interval" else ""
        desc = " ".join(descs.get(label, "").split())
        lines.append(f'- "{label}" (params: {params}{lasts})' + (f": {desc}" if desc else ""))
    return "\n".join(lines)


def scene_text(bodies: Sequence[Any]) -> str:
    """The scene's bodies; ``bodies`` are names or `Body` records (name, color, shape, dynamic, role)."""
    lines = ["# Scene", "", "Bodies in this scene (refer to them by these exact names, or by colour or role: "
             '"green object", "the goal object", "the agent\'s ball"):', ""]
    for b in bodies:
        if isinstance(b, str):
            lines.append(f'- "{b}"')
        else:
            kind = "dynamic" if getattr(b, "dynamic", False) else "static"
            role = getattr(b, "role", "")
            role = "placed by the action (the agent's ball)" if role == "agent" else role.replace("_", " ")
            extra = f", {role}" if role and role != "other" else ""
            lines.append(f'- "{b.name}": {getattr(b, "color", "")} {getattr(b, "shape", "")}, {kind}{extra}')
    return "\n".join(lines)


def phyre_scene_bodies(spec: str) -> list[Any]:
    """``"TEMPLATE:VARIANT"`` -> the bodies of that shipped PHYRE scene, plus the
    red action ball the agent places (programs may name it; it is in every rollout)."""
    template, sep, variant = spec.partition(":")
    if not sep or not template.strip() or not variant.strip().isdigit():
        raise ValueError(f"a scene is TEMPLATE:VARIANT (e.g. 00000:0), got {spec!r}")
    from simpatterns.simulators.phyre import load_scene

    return with_agent_ball(load_scene(template.strip(), int(variant)).trace_bodies())


def with_agent_ball(bodies: Sequence[Any]) -> list[Any]:
    """``bodies`` plus PHYRE's action ball, unless already there."""
    from simpatterns.simulators.phyre.physics import AGENT_NAME
    from simpatterns.simulators.phyre.scene import ROLE_AGENT
    from simpatterns.trace import Body

    out = list(bodies)
    if all((b if isinstance(b, str) else b.name) != AGENT_NAME for b in out):
        out.append(Body(name=AGENT_NAME, color="red", shape="ball", dynamic=True, role=ROLE_AGENT))
    return out


def _norm_goal(goal: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", goal.lower()))


def build_messages(
    goal: str,
    library: Any,
    *,
    descriptions: Mapping[str, str] | None = None,
    bodies: Sequence[Any] | None = None,
    examples: Sequence[GoalExample] = (),
) -> list[dict[str, str]]:
    """System message (instructions, DSL reference, library, examples: the same for
    every goal, so servers with prefix caching reuse it) and user message (scene, goal)."""
    parts = [SYSTEM_INTRO, reference_text().strip(), library_text(library, descriptions)]
    shots = [e for e in examples if _norm_goal(e.goal) != _norm_goal(goal)]  # never the answer itself
    if shots:
        parts.append("# Examples\n\n" + "\n\n".join(f"Goal: {e.goal}\nProgram:\n{e.program}" for e in shots))
    scene = scene_text(bodies) + "\n\n" if bodies else ""
    return [
        {"role": "system", "content": "\n\n".join(parts)},
        {"role": "user", "content": TASK_TEMPLATE.format(scene=scene, goal=goal.strip())},
    ]


# ---------------------------------------------------------------------------- extraction

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_COMPARE = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*")


def _call_start(text: str) -> re.Match | None:
    names = "|".join(sorted(predicate_names(), key=len, reverse=True))
    at_line = re.search(rf"(?m)^[ \t]*(?:{names})\s*\(", text)
    if at_line:
        return at_line
    return re.search(rf"\b(?:{names})\s*\(", text)


def _balanced_end(text: str, start: int) -> int:
    """Index just past the call opening at ``start`` (strings and # comments
    skipped); ``len(text)`` when it never closes (a truncated answer)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def extract_program(answer: str) -> str | None:
    """The program in an LLM answer, or None when there is none.

    Handles ``<think>`` blocks (an unclosed one means the answer never got
    past thinking), Markdown fences (a truncated fence runs to the end),
    and prose around the code: the program is the first call of a DSL
    predicate through its matching parenthesis (plus a trailing comparison).
    """
    text = _THINK.sub("", answer)
    low = text.lower()
    if "<think>" in low:
        text = text[: low.index("<think>")]
    text = text.replace("</think>", "")
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    fenced = [c for c in candidates if _call_start(c)]
    if fenced:
        text = fenced[0]
    m = _call_start(text)
    if m is None:
        return None
    start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
    end = _balanced_end(text, start)
    cmp = _COMPARE.match(text, end)
    if cmp and end < len(text):  # COUNT(...) >= 2 or COUNT(...) == COUNT(...)
        rest = text[cmp.end():]
        num = re.match(r"[+-]?\d+(\.\d*)?", rest)
        if num:
            end = cmp.end() + num.end()
        elif _call_start(rest) and _call_start(rest).start() == 0:
            end = _balanced_end(text, cmp.end())
    return text[start:end].strip()


# ---------------------------------------------------------------------------- the loop


@dataclass
class CompileCandidate:
    """One sampled answer and what became of it.

    ``stage``: ``no-program`` (nothing to parse), ``parse`` (syntax error),
    ``check`` (unknown pattern, param, body...), ``ok``.
    """

    answer: str
    program_text: str | None
    finish_reason: str
    stage: str
    errors: list[DSLError] = field(default_factory=list)
    program: RewardProgram | None = field(default=None, repr=False, compare=False)  # when ok: compiled once

    @property
    def error_text(self) -> str:
        return str(DSLErrors(self.errors)) if self.errors else ""

    def to_json(self) -> dict[str, Any]:
        return {"answer": self.answer, "program": self.program_text, "finish_reason": self.finish_reason,
                "stage": self.stage, "errors": [e.to_json() for e in self.errors]}


@dataclass
class CompileAttempt:
    index: int
    candidates: list[CompileCandidate]
    constrained: bool = False
    repaired: int | None = None  # which candidate was sent back for repair

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "constrained": self.constrained, "repaired": self.repaired,
                "candidates": [c.to_json() for c in self.candidates]}


@dataclass
class SynthesisResult:
    goal: str
    program: RewardProgram | None = None
    attempts: list[CompileAttempt] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    failure: str | None = None
    prompt: str = "full"  # the prompt mode used: full or compact
    grammar: str = "none"  # the grammar sent: specialised, generic or none

    @property
    def ok(self) -> bool:
        return self.program is not None

    @property
    def text(self) -> str | None:
        """The program in canonical form."""
        return format_program(self.program.program) if self.program is not None else None

    @property
    def candidates(self) -> list[CompileCandidate]:
        return [c for a in self.attempts for c in a.candidates]

    @property
    def parse_rate(self) -> float:
        cs = self.candidates
        return sum(c.stage in ("check", "ok") for c in cs) / len(cs) if cs else 0.0

    @property
    def check_rate(self) -> float:
        cs = self.candidates
        return sum(c.stage == "ok" for c in cs) / len(cs) if cs else 0.0

    def stats(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "attempts": len(self.attempts), "candidates": len(self.candidates),
            "parse_rate": self.parse_rate, "check_rate": self.check_rate,
            "constrained": any(a.constrained for a in self.attempts),
            "prompt": self.prompt, "grammar": self.grammar,
            "usage": self.usage.to_dict(), "model": self.model,
        }

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "program": self.text, "failure": self.failure, **self.stats(),
                "attempt_log": [a.to_json() for a in self.attempts]}


class SynthesisFailed(SimpatternsError):
    """No valid program within the attempt limit, or the LLM failed; ``.result`` has the log."""

    def __init__(self, message: str, result: SynthesisResult) -> None:
        super().__init__(message)
        self.result = result


GRAMMARS = ("specialised", "generic", "none")
PROMPTS = ("auto", "full", "compact")


@dataclass
class SynthesisConfig:
    """``grammar``: specialised (to the library and scene), generic (the DSL) or none;
    ``prompt``: full, compact (small models) or auto (compact when the client prefers it);
    ``prompt_budget``: the compact prompt's size limit in (estimated) tokens."""

    n: int = 4
    max_attempts: int = 3
    temperature: float = 0.7
    max_tokens: int = 1024
    seed: int | None = 0
    grammar: str = "specialised"
    prompt: str = "auto"
    prompt_budget: int = DEFAULT_BUDGET_TOKENS

    def __post_init__(self) -> None:
        if self.grammar not in GRAMMARS:
            raise ValueError(f"grammar must be one of {GRAMMARS}, got {self.grammar!r}")
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {PROMPTS}, got {self.prompt!r}")


def judge(answer: str, finish_reason: str, library: Any, bodies: Sequence[str] | None) -> CompileCandidate:
    """Extract, parse and check one answer."""
    program_text = extract_program(answer)
    if program_text is None:
        return CompileCandidate(answer, None, finish_reason, "no-program")
    try:
        program = parse(program_text)
    except DSLError as exc:
        return CompileCandidate(answer, program_text, finish_reason, "parse", [exc])
    try:
        compiled = RewardProgram.from_parsed(program, library, bodies)
    except DSLErrors as exc:
        return CompileCandidate(answer, program_text, finish_reason, "check", list(exc.errors))
    return CompileCandidate(answer, program_text, finish_reason, "ok", program=compiled)


def _promise(c: CompileCandidate) -> tuple[int, int]:
    # prefer candidates that parsed, then fewer errors, then earlier ones
    return ({"check": 0, "parse": 1, "no-program": 2}.get(c.stage, 3), len(c.errors))


def repair_message(c: CompileCandidate, max_tokens: int) -> str:
    if c.stage == "no-program":
        problem = ("The answer was empty." if not c.answer.strip()
                   else "The answer contained no program (no call of a DSL predicate such as AND(...)).")
        if c.finish_reason == "length":
            problem += f" It was cut off at the token limit ({max_tokens} tokens): answer with the program at once."
        return REPAIR_TEMPLATE.format(problem=problem, errors="").replace("\n\n\n", "\n\n")
    problem = "The checker reports:"
    if c.finish_reason == "length":
        problem = (f"It was cut off at the token limit ({max_tokens} tokens); write a shorter program. "
                   "The checker reports:")
    return REPAIR_TEMPLATE.format(problem=problem, errors=c.error_text)


def synthesize_reward(
    goal: str,
    client: Any,
    *,
    library: Any,
    descriptions: Mapping[str, str] | None = None,
    bodies: Sequence[Any] | None = None,
    examples: Sequence[GoalExample] | None = None,
    config: SynthesisConfig | None = None,
    on_attempt: Callable[[int], None] = lambda attempt: None,
) -> SynthesisResult:
    """Synthesize a checked `RewardProgram` for ``goal``; see the module docstring.

    ``client`` is an `LLMClient`; ``library`` a `PatternLibrary` (or a mapping
    label -> param keys); ``bodies`` the scene's bodies (names or `Body`
    records) or None to skip body checks; ``examples`` default to
    `load_goal_examples` (those that check against ``library``). Raises
    `SynthesisFailed` (with ``.result``) when no valid program is found.
    ``on_attempt(k)`` is called as attempt ``k`` (1-based) asks the model: a slow model's progress.
    """
    cfg = config or SynthesisConfig()
    if not goal or not goal.strip():
        raise ValueError("the goal is empty")
    if cfg.n < 1 or cfg.max_attempts < 1:
        raise ValueError("n and max_attempts must be >= 1")
    if examples is None:
        examples = load_goal_examples(library=library)
    names = [b if isinstance(b, str) else b.name for b in bodies] if bodies else None
    mode = resolve_prompt_mode(cfg.prompt, client)
    if mode == "compact":
        cp = compact_prompt(goal, library, bodies=bodies, examples=examples, budget_tokens=cfg.prompt_budget)
        messages, shown_patterns, shown_bodies = cp.messages, cp.patterns, cp.bodies
    else:
        messages = build_messages(goal, library, descriptions=descriptions, bodies=bodies, examples=examples)
        shown_patterns, shown_bodies = None, bodies
    grammar = {"specialised": lambda: specialised_grammar(library, shown_bodies or None, patterns=shown_patterns),
               "generic": decoding_grammar, "none": lambda: None}[cfg.grammar]()
    result = SynthesisResult(goal=goal.strip(), prompt=mode, grammar=cfg.grammar)

    for k in range(cfg.max_attempts):
        seed = None if cfg.seed is None else cfg.seed + k
        on_attempt(k + 1)
        request = ChatRequest(list(messages), n=cfg.n, temperature=cfg.temperature, seed=seed,
                              max_tokens=cfg.max_tokens, grammar=grammar)
        try:
            completion: Completion = client.complete_one(request)
        except LLMError as exc:
            result.failure = f"LLM request failed on attempt {k + 1} of {cfg.max_attempts}: {exc}"
            raise SynthesisFailed(result.failure, result) from exc
        result.usage = result.usage + completion.usage
        result.model = completion.model
        reasons = completion.finish_reasons + ["unknown"] * (len(completion.texts) - len(completion.finish_reasons))
        attempt = CompileAttempt(index=k + 1, constrained=completion.constrained,
                          candidates=[judge(t, r, library, names) for t, r in zip(completion.texts, reasons)])
        result.attempts.append(attempt)
        for c in attempt.candidates:
            if c.stage == "ok":
                assert c.program is not None
                result.program = c.program
                return result
        if not attempt.candidates:  # a server that returned no choices at all
            attempt.candidates.append(CompileCandidate("", None, "unknown", "no-program"))
        best = min(range(len(attempt.candidates)), key=lambda i: _promise(attempt.candidates[i]))
        attempt.repaired = best
        chosen = attempt.candidates[best]
        messages = messages + [
            {"role": "assistant", "content": chosen.program_text if chosen.program_text is not None else chosen.answer},
            {"role": "user", "content": repair_message(chosen, cfg.max_tokens)},
        ]

    last = result.attempts[-1].candidates[result.attempts[-1].repaired or 0]
    detail = last.error_text or ("empty answer" if not last.answer.strip() else "no program in the answer")
    result.failure = (
        f"no valid reward program for the goal after {cfg.max_attempts} attempt(s) of {cfg.n} candidate(s); "
        f"parse rate {result.parse_rate:.0%}, check rate {result.check_rate:.0%}. Last candidate's problems:\n{detail}"
    )
    raise SynthesisFailed(result.failure, result)


def goal_file_text(result: SynthesisResult) -> str:
    """The ``.rwd`` file for a synthesized program: the goal as a leading comment, then the program."""
    if result.program is None:
        raise ValueError("no program to write")
    header = [f"# {line}".rstrip() for line in result.goal.splitlines() if line.strip()]
    header.append(f"# synthesized by {result.model or 'an LLM'} in {len(result.attempts)} attempt(s)")
    return "\n".join(header) + "\n" + format_program(result.program.program).rstrip() + "\n"


def save_goal_program(result: SynthesisResult, path: str | os.PathLike) -> Path:
    """Write `goal_file_text` atomically (the folder is created if missing)."""
    return atomic_write(path, goal_file_text(result))
