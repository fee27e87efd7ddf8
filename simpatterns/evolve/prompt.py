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
import bisect
import hashlib
import inspect
import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Sequence

from simpatterns.detectors.contract import AST_LOCK, OPTIONAL_NAMES, declared_names
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Rejected
from simpatterns.trace import Trace

SYSTEM_PROMPT = """You write pattern detectors for physics simulation traces.
A detector is a small Python module: module constants PATTERN, DESCRIPTION, DEPENDS (labels of other
patterns whose events it reads), PARAMS (the keys every emitted event carries) and a function
detect(trace, events) returning a list of (frame, params) pairs, one per activation. Optional constants
say what the events mean: BODY_PARAMS (the params whose values are body names), DIRECTED (True when
object_a and object_b have distinct roles) and DURATION ("instant", or "interval": every event carries
an integer "frames" >= 1, its length); keep the ones the earlier versions declare.
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
    """An earlier program shown in a prompt. ``constants``: its module constants as
    written (`Candidate.constants`, kept by the programs database); None: read from
    ``source`` when needed (a program replayed from a log, or written by hand)."""

    source: str
    fitness: float | None
    program_id: int
    constants: dict[str, Any] | None = None


Declared = tuple[list[str], list[str], dict[str, Any]]  # DEPENDS, PARAMS, optional declarations as written


@dataclass
class Prompt:
    label: str
    island: int
    epoch: int
    version: int  # the number of the function to complete: detect_v{version}
    parents: list[int]  # program ids shown, ascending fitness
    messages: list[dict[str, str]]
    base_source: str  # the best version shown: constants for a body-only answer
    base_declared: Declared | None = None  # what ``base_source`` declares (None: read it when needed)

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps(self.messages, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]  # total on any text

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
trace.position[T, N, D], trace.velocity[T, N, D], trace.angle[T, N]: numpy arrays (D = trace.dim: 2, 3 for MuJoCo)
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


def _header(spec: LabelSpec, depends: list[str], params: list[str], version: int,
            declared: dict[str, Any] | None = None) -> str:
    return (
        f"PATTERN = {spec.label!r}\n"
        f"DESCRIPTION = {spec.description!r}\n"
        f"DEPENDS = {depends!r}\n"
        f"PARAMS = {params!r}\n"
        + "".join(f"{k} = {v!r}\n" for k, v in (declared or {}).items())
        + "\n\n"
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


def build_prompt(
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
    best = versions[-1]
    base = _declared(best, spec)
    depends, params, declared = base
    parts.append(
        f"\nWrite version {k}: a better detector for {spec.label!r}. Answer with one ```python block holding the "
        f"complete module (constants, helpers and `def detect_v{k}(trace, events)`), starting from:\n"
        f"```python\n{_header(spec, depends, params, k, declared)}```"
    )
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]
    return Prompt(spec.label, island, epoch, k, [v.program_id for v in versions], messages, best.source, base)


def _declared(version: Version, spec: LabelSpec) -> Declared:
    """DEPENDS, PARAMS and the optional declarations (BODY_PARAMS, DIRECTED, DURATION) the
    version sets, as written: from its stored constants, else read from its source."""
    vals = version.constants
    if vals is None:
        try:
            vals = declared_names(version.source)
        except Exception:  # noqa: BLE001 - the skeleton's values then
            vals = None
    if vals is None:
        return list(spec.depends or []), list(spec.params), {}
    return list(vals["DEPENDS"]), list(vals["PARAMS"]), {k: vals[k] for k in OPTIONAL_NAMES if k in vals}


def prompt_declared(prompt: Prompt, spec: LabelSpec) -> Declared:
    """What the prompt's best version declares: the constants an answer may leave out."""
    if prompt.base_declared is not None:
        return prompt.base_declared
    return _declared(Version(prompt.base_source, None, -1), spec)


def _fitting(declared: dict[str, Any], params: list[str]) -> dict[str, Any]:
    """The earlier version's declarations that still fit ``params`` (an answer that changed
    PARAMS keeps only what remains true of it; the contract's defaults cover the rest)."""
    out = {}
    for k, v in declared.items():
        if k == "BODY_PARAMS" and not (isinstance(v, list) and set(v) <= set(params)):
            continue
        if k == "DIRECTED" and v is True and not {"object_a", "object_b"} <= set(params):
            continue
        if k == "DURATION" and v == "interval" and "frames" not in params:
            continue
        out[k] = v
    return out


# ----------------------------------------------------------------- parsing
# Every pattern here runs in time linear in the answer: no two adjacent quantifiers over the
# same characters (``[ \t]*(?:py)?[ \t]*`` is quadratic on a run of spaces), and no ``^\s*``
# under re.M (each of N blank lines would rescan the N after it).
MAX_ANSWER_CHARS = 200_000  # an answer longer than this is rejected before any scanning
_FENCE = re.compile(r"```(?:[ \t]*(?:python|py))?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_DEFINES_DETECT = re.compile(r"^[ \t]*def[ \t]+detect", re.M)
_DEFINES_FUNCTION = re.compile(r"^[ \t]*def[ \t]+\w+[ \t]*\(", re.M)
_DEFINES_CONSTANT = re.compile(r"^[A-Z_]+[ \t]*=", re.M)
_BREAK = re.compile(r"\r\n|\r|\n")
_VERSION = re.compile(r"detect_v\d+")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # a line with its break, as the parser counts them


def extract_code(text: str) -> str:
    """The code of an answer: the fenced block that defines a detect function (else the
    longest fenced block), or the whole text when there is no fence."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    if not blocks:
        return text
    with_def = [b for b in blocks if _DEFINES_DETECT.search(b)]
    return max(with_def or blocks, key=len)


def assemble(text: str, prompt: Prompt, spec: LabelSpec) -> tuple[str, ast.Module]:
    """See `_assemble` (parsing holds the AST lock)."""
    with AST_LOCK:
        return _assemble(text, prompt, spec)


def _assemble(text: str, prompt: Prompt, spec: LabelSpec) -> tuple[str, ast.Module]:
    """Turn an LLM answer into a full detector module for ``spec``: ``(source, tree)``.

    Accepts a complete module defining ``detect_v{prompt.version}`` (renamed to
    ``detect``), or only that function's body (the constants are then taken from
    the best version in the prompt). PATTERN and DESCRIPTION are always the
    label's; DEPENDS, PARAMS and the optional declarations the answer leaves out
    come from the best version. Raises `Rejected` (``no_function`` / ``syntax_error``).

    The answer is parsed once. The module is made of the answer's top-level
    statements, moved, and of generated constant lines, so its tree is the
    answer's tree with the statements' lines moved and the generated nodes added:
    it is not parsed again (`simpatterns.sandbox.gate.check_candidate` takes it).
    An answer with two top-level statements on one line (copied once per
    statement) is the exception: its module is parsed again.
    """
    if len(text) > MAX_ANSWER_CHARS:
        raise Rejected(R.TOO_LONG, f"answer of {len(text)} characters, limit {MAX_ANSWER_CHARS}")
    code = extract_code(text).replace("\t", "    ")
    want = prompt.function_name
    if not code.strip():
        raise Rejected(R.NO_FUNCTION, "empty answer")
    if not _DEFINES_FUNCTION.search(code) and not _DEFINES_CONSTANT.search(code):
        code = _from_body(code, prompt, spec)
    code, tree, keep = _read_answer(code, want)
    lines = _LINE.findall(code)
    # the module: the kept statements, one blank line apart, without PATTERN and DESCRIPTION;
    # a part is (text, what it holds): a statement of the answer, BLANK, NUMPY or a constant's name
    present = {t.id for n in keep if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    final_params: list[str] | None = None
    for n in keep:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PARAMS" for t in n.targets):
            try:
                final_params = list(ast.literal_eval(n.value))
            except (ValueError, TypeError, SyntaxError):
                pass  # the contract check names it
    parts: list[tuple[str, ast.stmt | str]] = []
    for k, n in enumerate(keep):
        if k:
            parts.append(("\n", _BLANK))
        if not (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("PATTERN", "DESCRIPTION")
                                                  for t in n.targets)):
            parts.append(("".join(lines[_first_line(n) - 1:n.end_lineno]).rstrip("\n") + "\n", n))
    # imports stay first; the constants follow them
    cut = 0
    for k, (_, n) in enumerate(parts):
        if n == _BLANK:
            continue
        if not isinstance(n, (ast.Import, ast.ImportFrom)):
            break
        cut = k + 1
    head, rest = parts[:cut], parts[cut:]
    while rest and rest[0][1] == _BLANK:  # lstrip: no blank lines between the constants and the rest
        rest.pop(0)
    depends, params, declared = prompt_declared(prompt, spec)
    header: dict[str, Any] = {"PATTERN": spec.label, "DESCRIPTION": spec.description}
    if "DEPENDS" not in present:
        header["DEPENDS"] = depends
    if "PARAMS" not in present:
        header["PARAMS"] = params
    header.update((k, v) for k, v in _fitting(declared, params if final_params is None else final_params).items()
                  if k not in present)
    if "import numpy" not in "".join(t for t, _ in head) and "np." in "".join(t for t, _ in rest):
        head.insert(0, ("import numpy as np\n", _NUMPY))
    parts = head + ([("\n", _BLANK)] if head else []) + [(f"{k} = {v!r}\n", k) for k, v in header.items()]
    parts += [("\n", _BLANK)] + rest
    source = "".join(t for t, _ in parts).rstrip() + "\n"
    if any(_first_line(b) <= a.end_lineno for a, b in zip(tree.body, tree.body[1:])):
        return source, _parse_or_reject(source, source)  # statements sharing a line: copied once each
    body: list[ast.stmt] = []
    line = 1
    for t, n in parts:
        if isinstance(n, ast.stmt):
            ast.increment_lineno(n, line - _first_line(n))
            body.append(n)
        elif n == _NUMPY:
            body.append(_import_numpy(line))
        elif n != _BLANK:
            node = _constant_assign(n, header[n], t.rstrip("\n"), line)
            if node is None:  # a value the builder does not know: read the module instead
                return source, _parse_or_reject(source, source)
            body.append(node)
        line += len(_LINE.findall(t))
    return source, ast.Module(body=body, type_ignores=[])


_BLANK, _NUMPY = "<blank line>", "<import numpy>"  # parts of an assembled module: not statements or constants


def _first_line(n: ast.stmt) -> int:
    """A statement's first line: its first decorator's."""
    decorators = getattr(n, "decorator_list", None)
    return decorators[0].lineno if decorators else n.lineno


def _read_answer(code: str, want: str) -> tuple[str, ast.Module, list[ast.stmt]]:
    """Parse the answer once: ``(code, tree, the top-level statements to keep)``. When it
    defines ``want`` at the top level, ``want`` is renamed to ``detect`` (every name
    token, comments and strings untouched) before the parse; the function to keep is
    then the renamed one, and other ``detect``/``detect_v*`` functions are dropped."""
    offsets = [m.start() for m in _def_pattern(want).finditer(code)]
    starts = set(_lines_at(code, offsets))
    if starts:
        renamed = rename_name(code, want, "detect")
        tree = _parse_or_reject(renamed, code)
        funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if any(n.name == "detect" and n.lineno in starts for n in funcs):
            keep = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and _is_version(n.name)
                                                 and not (n.name == "detect" and n.lineno in starts))]
            return renamed, tree, keep
        # every match sat inside a string: read the answer as written
    tree = _parse_or_reject(code, code)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    if "detect" not in names:
        versions = [n for n in names if _VERSION.fullmatch(n)]
        raise Rejected(R.NO_FUNCTION, f"no function {want}" + (f" (found {', '.join(versions)})" if versions else ""))
    keep = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and _VERSION.fullmatch(n.name))]
    return code, tree, keep


def _is_version(name: str) -> bool:
    return name == "detect" or _VERSION.fullmatch(name) is not None


def _def_pattern(name: str) -> re.Pattern[str]:
    """``def NAME(`` at the start of a line (a top-level definition, or text in a string)."""
    return re.compile(rf"(?:\A|(?<=[\r\n]))def[^\S\r\n]+{re.escape(name)}[^\S\r\n]*\(")


def _lines_at(code: str, offsets: list[int]) -> list[int]:
    """The 1-based line of each offset, in one pass over the code (not one per offset)."""
    if not offsets:
        return []
    breaks = [m.end() for m in _BREAK.finditer(code, 0, max(offsets))]
    return [bisect.bisect_right(breaks, off) + 1 for off in offsets]


def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def _parse_or_reject(source: str, as_written: str) -> ast.Module:
    try:
        return _parse(source)
    except SyntaxError:
        pass
    try:  # the error as the answer was written (a rename cannot change whether it parses)
        _parse(as_written)
    except SyntaxError as exc:
        raise Rejected(R.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}") from None
    raise Rejected(R.SYNTAX_ERROR, "unparsable answer")


def _at(node: ast.AST, line: int, start: int, end: int) -> ast.AST:
    node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = line, start, line, end
    return node


def _import_numpy(line: int) -> ast.Import:
    return _at(ast.Import(names=[_at(ast.alias(name="numpy", asname="np"), line, 7, 18)]), line, 0, 18)


def _constant_assign(name: str, value: Any, text: str, line: int) -> ast.Assign | None:
    """The node of the generated line ``NAME = repr(value)`` (``text``): what parsing it
    gives, for strings, booleans and lists of them; None for anything else."""
    start = len(name.encode()) + 3

    def const(v: Any, col: int) -> ast.Constant | None:
        if isinstance(v, (str, bool)) or v is None:
            return _at(ast.Constant(value=v, kind=None), line, col, col + len(repr(v).encode()))
        return None

    if isinstance(value, list):
        elts, col = [], start + 1
        for v in value:
            node = const(v, col)
            if node is None:
                return None
            elts.append(node)
            col = node.end_col_offset + 2
        value_node: ast.AST | None = _at(ast.List(elts=elts, ctx=ast.Load()), line, start, len(text.encode()))
    else:
        value_node = const(value, start)
    if value_node is None or f"{name} = {value!r}" != text:
        return None
    target = _at(ast.Name(id=name, ctx=ast.Store()), line, 0, len(name.encode()))
    return _at(ast.Assign(targets=[target], value=value_node), line, 0, len(text.encode()))


def _from_body(code: str, prompt: Prompt, spec: LabelSpec) -> str:
    """A body-only answer: put it under the header of the version to write."""
    depends, params, declared = prompt_declared(prompt, spec)
    body = textwrap.dedent(code).strip("\n")
    if not body:
        raise Rejected(R.NO_FUNCTION, "empty body")
    extra = "".join(f"{k} = {v!r}\n" for k, v in declared.items())
    return (f"import numpy as np\n\nDEPENDS = {depends!r}\nPARAMS = {params!r}\n{extra}\n\n"
            f"def {prompt.function_name}(trace, events):\n" + textwrap.indent(body, "    ") + "\n")
