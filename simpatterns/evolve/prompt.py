"""Prompts for the LLM proposer and turning its answers back into detector programs.

A prompt shows the pattern's label and description, the trace API
(generated from `simpatterns.trace.Trace`'s docstrings), the patterns it may
read (with their params; full source for the ones the label lists as
dependencies), up to ``k`` earlier versions renamed ``detect_v0`` ..
``detect_v{k-1}`` in ascending fitness, short feedback from recent
rejections, and asks for ``detect_v{k}``.

The version to complete is stored in the `Prompt` (``version``) and the
parser uses that number, never a recount: the reference implementation
wrote ``k`` versions and extracted ``k + 1`` (or the reverse) depending on
how many programs the island had.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Sequence

from simpatterns.evolve import reasons as R
from simpatterns.evolve.reasons import Rejected
from simpatterns.trace import Trace

SYSTEM_PROMPT = """You write pattern detectors for physics simulation traces.
A detector is a small Python module: module constants PATTERN, DESCRIPTION, DEPENDS (labels of other
patterns whose events it reads), PARAMS (the keys every emitted event carries) and a function
detect(trace, events) returning a list of (frame, params) pairs, one per activation.
Rules: import only numpy (as np) and math; no file, network or process access; no attributes starting
with '_'; frames are ints in [0, trace.num_frames); params hold only plain values (str, int, float,
bool, lists) and exactly the keys in PARAMS; name bodies with trace.names. Prefer vectorised numpy over
per-frame Python loops: slow detectors are penalised and very slow ones are killed."""


@dataclass
class LabelSpec:
    """One entry of a labels file: what to discover."""

    label: str
    description: str
    depends: list[str] | None = None  # patterns it may read (None: any in the library)
    params: list[str] = field(default_factory=lambda: ["object"])  # the skeleton's PARAMS
    seed: str | None = None  # "builtin:LABEL", "library:LABEL" or a path to a .py file
    self_discovered: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "description": self.description, "depends": self.depends,
                "params": self.params, "seed": self.seed, "self_discovered": self.self_discovered}


@dataclass
class Version:
    """An earlier program shown in a prompt."""

    source: str
    fitness: float | None
    program_id: int


@dataclass
class Prompt:
    label: str
    island: int
    epoch: int
    version: int  # the number of the function to complete: detect_v{version}
    parents: list[int]  # program ids shown, ascending fitness
    messages: list[dict[str, str]]
    base_source: str  # the best version shown: constants for a body-only answer

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps(self.messages, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def function_name(self) -> str:
        return f"detect_v{self.version}"


# ------------------------------------------------------------------ trace API
def trace_api() -> str:
    """The `Trace` API as the LLM should see it: arrays, properties, methods, one line each."""
    lines = []
    doc = inspect.getdoc(__import__("simpatterns.trace", fromlist=["Trace"])) or ""
    body = doc.split("\n\n", 1)[1] if "\n\n" in doc else doc
    lines.append(body.strip())
    lines.append("")
    lines.append("trace.bodies[i] has .name, .color, .shape, .dynamic (bool), .role, .size (dict).")
    lines.append("Properties and methods:")
    for name, member in inspect.getmembers(Trace):
        if name.startswith("_") or name in {"save", "load", "from_bytes", "header", "validate", "equals"}:
            continue
        if isinstance(member, property):
            doc = _first_paragraph(member)
            lines.append(f"- trace.{name}" + (f": {doc}" if doc else ""))
        elif inspect.isfunction(member):
            try:
                sig = str(inspect.signature(member)).replace("self, ", "").replace("(self)", "()")
            except (TypeError, ValueError):
                sig = "(...)"
            sig = re.sub(r" -> .*$", "", sig)
            doc = _first_paragraph(member)
            lines.append(f"- trace.{name}{sig}" + (f": {doc}" if doc else ""))
    return "\n".join(lines)


# The compact prompt's trace API (small local models): the members most detectors use.
COMPACT_API = """trace.names: body names; trace.num_frames (T), trace.num_bodies (N), trace.dt (seconds per frame)
trace.position[T, N, 2], trace.velocity[T, N, 2], trace.angle[T, N]: numpy arrays, y up
trace.contact_frame[K], trace.contact_a[K], trace.contact_b[K]: one row per touching pair per frame
trace.speed(body) -> [T]; trace.pair_touching(a, b) -> bool [T]; trace.body_index(name) -> int
trace.dynamic_mask -> bool [N]; events[label] -> [(frame, params), ...] for the patterns in DEPENDS"""
COMPACT_VERSIONS = 1  # earlier versions shown in a compact prompt (the best)
COMPACT_PATTERNS = 6  # readable patterns listed in a compact prompt


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


# --------------------------------------------------------------- rendering
def rename_detect(source: str, new_name: str) -> str:
    """``def detect(`` (and calls of ``detect``) renamed, comments and layout kept."""
    return rename_name(source, "detect", new_name)


def rename_name(source: str, old: str, new: str) -> str:
    """Rename every NAME token ``old`` (not strings or comments) to ``new``."""
    import io
    import tokenize

    spots: list[tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME and tok.string == old:
                spots.append(tok.start)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    for row, col in sorted(spots, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def _header(spec: LabelSpec, depends: list[str], params: list[str], version: int) -> str:
    return (
        f"PATTERN = {spec.label!r}\n"
        f"DESCRIPTION = {spec.description!r}\n"
        f"DEPENDS = {depends!r}\n"
        f"PARAMS = {params!r}\n\n\n"
        f"def detect_v{version}(trace, events):\n"
        f'    """Improved version of detect_v{version - 1}."""\n'
    )


def skeleton(spec: LabelSpec) -> str:
    """The seed program of Algorithm 1: the structure with empty logic."""
    return (
        "import numpy as np\n\n"
        f"PATTERN = {spec.label!r}\n"
        f"DESCRIPTION = {spec.description!r}\n"
        f"DEPENDS = {list(spec.depends or [])!r}\n"
        f"PARAMS = {list(spec.params)!r}\n\n\n"
        "def detect(trace, events):\n"
        '    """Return [(frame, params), ...], one entry per activation of the pattern."""\n'
        "    return []\n"
    )


def build_prompt(*args: Any, **kwargs: Any) -> Prompt:
    """See `_build_prompt` (parsing holds the evolver's AST lock)."""
    from simpatterns.evolve.gate import AST_LOCK

    with AST_LOCK:
        return _build_prompt(*args, **kwargs)


def _build_prompt(
    spec: LabelSpec,
    versions: Sequence[Version],
    island: int,
    epoch: int,
    library_info: dict[str, dict[str, Any]],
    feedback: Sequence[dict[str, str]] = (),
    api_text: str | None = None,
    compact: bool = False,
) -> Prompt:
    """``versions`` ascending by fitness; ``library_info[label]`` has
    ``description``, ``params`` and (for listed dependencies) ``source``.

    ``compact`` (small local models): a short trace API (`COMPACT_API`), only
    the best earlier version, readable patterns by name and params only (at
    most `COMPACT_PATTERNS`, no sources), one line of feedback."""
    if not versions:
        raise ValueError("a prompt needs at least one earlier version")
    if compact:
        versions = list(versions)[-COMPACT_VERSIONS:]
    k = len(versions)
    parts = [
        f"Pattern to detect: {spec.label!r}",
        f"Description: {spec.description}",
        "",
        "The trace API (argument `trace`):",
        COMPACT_API if compact else (api_text if api_text is not None else trace_api()),
        "",
    ]
    readable = sorted(library_info) if spec.depends is None else [d for d in spec.depends if d in library_info]
    if compact:
        readable = readable[:COMPACT_PATTERNS]
    if readable:
        parts.append("Patterns whose events the detector may read (list them in DEPENDS; "
                     "events[label] is [(frame, params), ...] sorted by frame):")
        for lab in readable:
            info = library_info[lab]
            about = "" if compact else f" {info['description']}"
            parts.append(f"- {lab!r}:{about} params={info['params']}")
        for lab in readable:
            src = library_info[lab].get("source")
            if src and spec.depends is not None and not compact:
                parts.append(f"\nDetector of {lab!r}:\n```python\n{src.strip()}\n```")
        parts.append("")
    if feedback:
        parts.append("Recent attempts were rejected; avoid these problems:")
        seen = set()
        for fb in reversed(list(feedback)):
            if compact and seen:
                break
            code = fb.get("code", "")
            if code in seen:
                continue
            seen.add(code)
            detail = " ".join(fb.get("detail", "").split())[:160]
            advice = R.ADVICE.get(code, "")
            parts.append(f"- {code}: {detail}" + (f" ({advice})" if advice else ""))
        parts.append("")
    # Only the order is shown, not the scores: scores include a measured run time, and a
    # prompt that depends on timing could not be replayed from a transcript.
    parts.append("Earlier versions, from worse to better:")
    for i, v in enumerate(versions):
        note = " (no score yet: it never fired, or it failed)" if v.fitness is None else ""
        parts.append(f"\n# version {i}{note}\n```python\n{rename_detect(v.source, f'detect_v{i}').strip()}\n```")
    best = versions[-1].source
    depends, params = _declared(best, spec)
    parts.append(
        f"\nWrite version {k}: a better detector for {spec.label!r}. Answer with one ```python block holding the "
        f"complete module (constants, helpers and `def detect_v{k}(trace, events)`), starting from:\n"
        f"```python\n{_header(spec, depends, params, k)}```"
    )
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]
    return Prompt(spec.label, island, epoch, k, [v.program_id for v in versions], messages, best)


def _declared(source: str, spec: LabelSpec) -> tuple[list[str], list[str]]:
    try:
        from simpatterns.detectors.contract import declared_names

        vals = declared_names(source)
        return list(vals["DEPENDS"]), list(vals["PARAMS"])
    except Exception:  # noqa: BLE001 - the skeleton's values then
        return list(spec.depends or []), list(spec.params)


# ----------------------------------------------------------------- parsing
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str:
    """The code of an answer: the fenced block that defines a detect function (else the
    longest fenced block), or the whole text when there is no fence."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    if not blocks:
        return text
    with_def = [b for b in blocks if re.search(r"^\s*def\s+detect", b, re.M)]
    return max(with_def or blocks, key=len)


def assemble(text: str, prompt: Prompt, spec: LabelSpec) -> str:
    """See `_assemble` (parsing holds the evolver's AST lock)."""
    from simpatterns.evolve.gate import AST_LOCK

    with AST_LOCK:
        return _assemble(text, prompt, spec)


def _assemble(text: str, prompt: Prompt, spec: LabelSpec) -> str:
    """Turn an LLM answer into a full detector module for ``spec``.

    Accepts a complete module defining ``detect_v{prompt.version}`` (renamed to
    ``detect``), or only that function's body (the constants are then taken from
    the best version in the prompt). PATTERN and DESCRIPTION are always the
    label's. Raises `Rejected` (``no_function`` / ``syntax_error``).
    """
    code = extract_code(text).replace("\t", "    ")
    want = prompt.function_name
    if not code.strip():
        raise Rejected(R.NO_FUNCTION, "empty answer")
    if not re.search(r"^\s*def\s+\w+\s*\(", code, re.M) and not re.search(r"^[A-Z_]+\s*=", code, re.M):
        code = _from_body(code, prompt, spec)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise Rejected(R.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}") from None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    if want in names:
        target = want
    elif "detect" in names:
        target = "detect"
    else:
        versions = [n for n in names if re.fullmatch(r"detect_v\d+", n)]
        raise Rejected(R.NO_FUNCTION, f"no function {want}" + (f" (found {', '.join(versions)})" if versions else ""))
    # drop other versions the model may have echoed, then rename the target to detect
    keep = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name != target
                                          and (n.name == "detect" or re.fullmatch(r"detect_v\d+", n.name)))]
    lines = code.splitlines(keepends=True)
    out: list[str] = []
    for node in keep:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        out.append("".join(lines[start:node.end_lineno]))
    module = "\n".join(s.rstrip("\n") + "\n" for s in out)
    module = rename_name(module, target, "detect") if target != "detect" else module
    return _with_constants(module, prompt, spec)


def _from_body(code: str, prompt: Prompt, spec: LabelSpec) -> str:
    """A body-only answer: put it under the header of the version to write."""
    depends, params = _declared(prompt.base_source, spec)
    body = textwrap.dedent(code).strip("\n")
    if not body:
        raise Rejected(R.NO_FUNCTION, "empty body")
    return (f"import numpy as np\n\nDEPENDS = {depends!r}\nPARAMS = {params!r}\n\n\n"
            f"def {prompt.function_name}(trace, events):\n" + textwrap.indent(body, "    ") + "\n")


def _with_constants(module: str, prompt: Prompt, spec: LabelSpec) -> str:
    """Force PATTERN/DESCRIPTION to the label's; fill DEPENDS/PARAMS from the best shown
    version when the answer left them out."""
    tree = ast.parse(module)
    present = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    drop_lines: set[int] = set()
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("PATTERN", "DESCRIPTION")
                                             for t in n.targets):
            drop_lines.update(range(n.lineno, (n.end_lineno or n.lineno) + 1))
    kept = "".join(ln for i, ln in enumerate(module.splitlines(keepends=True), start=1) if i not in drop_lines)
    depends, params = _declared(prompt.base_source, spec)
    header = [f"PATTERN = {spec.label!r}", f"DESCRIPTION = {spec.description!r}"]
    if "DEPENDS" not in present:
        header.append(f"DEPENDS = {depends!r}")
    if "PARAMS" not in present:
        header.append(f"PARAMS = {params!r}")
    # imports stay first; the constants follow them
    body_lines = kept.splitlines(keepends=True)
    cut = 0
    tree2 = ast.parse(kept)
    for n in tree2.body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            cut = n.end_lineno or n.lineno
        else:
            break
    head = "".join(body_lines[:cut])
    rest = "".join(body_lines[cut:]).lstrip("\n")
    if "import numpy" not in head and "np." in rest:
        head = "import numpy as np\n" + head
    return (head + ("\n" if head else "") + "\n".join(header) + "\n\n" + rest).rstrip() + "\n"
