"""The detector program form, shared by hand-written and LLM-evolved detectors.

A detector is a Python module's source text defining:

- ``PATTERN``: the label, e.g. ``"bounce"`` (lower-case words, spaces allowed).
- ``DESCRIPTION``: one or two sentences a person and an LLM can read.
- ``DEPENDS``: list of labels whose events ``detect`` reads (may be empty).
- ``PARAMS``: list of the param keys every emitted event carries,
  e.g. ``["object_a", "object_b"]``.
- ``detect(trace, events) -> list[tuple[int, dict]]``: ``trace`` is a
  `simpatterns.trace.Trace`; ``events`` maps each label in ``DEPENDS`` to
  that pattern's events as ``[(frame, params), ...]`` sorted by frame.
  Return one ``(frame, params)`` per activation; params name bodies with the
  trace's body names.

and, optionally, what the events mean (read by the reward DSL, the sandbox's
event check and people; each has a default):

- ``BODY_PARAMS``: the param keys whose values name bodies of the trace (a
  name, or a list of names), e.g. ``["object", "surface"]``. Must be a subset
  of ``PARAMS``. Default: ``object`` and the keys starting ``object_``.
- ``DIRECTED``: ``True`` when ``object_a`` and ``object_b`` have distinct roles
  (``object_a`` slides along / rolls over / hits / rests on / drives / relays
  to ``object_b``), so a reward program's ``{"object_a": X}`` means X in that
  role; ``False`` (the default) when the pair is unordered and the two keys
  match in either order. ``True`` requires ``object_a`` and ``object_b`` in ``PARAMS``.
- ``DURATION``: ``"instant"`` (the event happens at its frame) or
  ``"interval"`` (it lasts: the event carries an integer ``frames`` param
  ``>= 1`` and covers frames ``[frame, frame + frames - 1]``). Default:
  ``"interval"`` when ``frames`` is in ``PARAMS``, else ``"instant"``.
  ``"interval"`` requires ``frames`` in ``PARAMS``.

Only ``numpy`` and ``math`` may be imported. Source is parsed once into a
`Candidate` (source, AST, `Declarations`); loading validates all of the above
and raises `DetectorError` naming the file, line and field.
"""

from __future__ import annotations

import ast
import hashlib
import math
import threading
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from simpatterns.annotation import EventList, normalize_label
from simpatterns.errors import SimpatternsError

ALLOWED_IMPORTS = frozenset({"numpy", "math"})
REQUIRED_NAMES = ("PATTERN", "DESCRIPTION", "DEPENDS", "PARAMS")
OPTIONAL_NAMES = ("BODY_PARAMS", "DIRECTED", "DURATION")
DURATIONS = ("instant", "interval")
INTERVAL_PARAM = "frames"

DetectFn = Callable[[Any, dict[str, EventList]], EventList]

# CPython 3.11 up to 3.11.8 can fail with "SystemError: AST constructor recursion depth
# mismatch" when two threads build ASTs at once (gh-106905); every parse and every compile
# of an AST in simpatterns holds this lock (the evolver parses from several threads).
AST_LOCK = threading.RLock()


class DetectorError(SimpatternsError, ValueError):
    """A detector's source is malformed; ``where`` is ``file:line`` or ``file``."""

    def __init__(self, message: str, where: str = "<detector>", field_name: str | None = None):
        self.where = where
        self.field_name = field_name
        super().__init__(f"{where}: {message}")


def default_body_params(params: Sequence[str]) -> list[str]:
    """The contract's default ``BODY_PARAMS``: ``object`` and the keys starting ``object_``."""
    return [k for k in params if is_default_body_param(k)]


def is_default_body_param(key: str) -> bool:
    return key == "object" or key.startswith("object_")


def default_duration(params: Sequence[str]) -> str:
    """The contract's default ``DURATION``: ``"interval"`` when ``frames`` is a param."""
    return "interval" if INTERVAL_PARAM in params else "instant"


@dataclass(frozen=True)
class Declarations:
    """What a detector declares: its label, description, dependencies, params, which
    params name bodies, whether its ``object_a``/``object_b`` are ordered, and whether
    its events are instants or intervals (see the module docstring). Labels are normalised."""

    pattern: str
    description: str
    depends: tuple[str, ...]
    params: tuple[str, ...]
    body_params: tuple[str, ...]
    directed: bool = False
    duration: str = "instant"

    @classmethod
    def make(cls, pattern: str, description: str, depends: Sequence[str], params: Sequence[str],
             body_params: Sequence[str] | None = None, directed: bool | None = None, duration: str | None = None,
             where: str | dict[str, str] = "<detector>") -> "Declarations":
        """Check and normalise; ``None`` means the contract's default. ``where``: the place
        errors name, one for all fields or one per field name (``file:line``).
        Raises `DetectorError` naming the place and the field."""
        def at(name: str) -> str:
            return where if isinstance(where, str) else where.get(name, where.get("", "<detector>"))

        for name, v in (("PATTERN", pattern), ("DESCRIPTION", description)):
            if not isinstance(v, str) or not v.strip():
                raise DetectorError(f"{name} must be a non-empty string, got {v!r}", at(name), name)
        for name, v in (("DEPENDS", depends), ("PARAMS", params)):
            if not _str_list(v):
                raise DetectorError(f"{name} must be a list of non-empty strings, got {v!r}", at(name), name)
        params = tuple(params)
        if body_params is None:
            body_params = default_body_params(params)
        elif not _str_list(body_params):
            raise DetectorError(f"BODY_PARAMS must be a list of non-empty strings, got {body_params!r}",
                                at("BODY_PARAMS"), "BODY_PARAMS")
        else:
            unknown = [k for k in body_params if k not in params]
            if unknown:
                raise DetectorError(f"BODY_PARAMS names {unknown}, which {'is' if len(unknown) == 1 else 'are'} "
                                    f"not in PARAMS {list(params)}", at("BODY_PARAMS"), "BODY_PARAMS")
            if len(set(body_params)) != len(body_params):
                raise DetectorError(f"BODY_PARAMS repeats a key: {list(body_params)}", at("BODY_PARAMS"),
                                    "BODY_PARAMS")
        if directed is None:
            directed = False
        elif not isinstance(directed, bool):
            raise DetectorError(f"DIRECTED must be True or False, got {directed!r}", at("DIRECTED"), "DIRECTED")
        elif directed and not {"object_a", "object_b"} <= set(params):
            raise DetectorError(f"DIRECTED = True needs params object_a and object_b, PARAMS is {list(params)}",
                                at("DIRECTED"), "DIRECTED")
        if duration is None:
            duration = default_duration(params)
        elif duration not in DURATIONS:
            raise DetectorError(f"DURATION must be one of {', '.join(repr(d) for d in DURATIONS)}, got {duration!r}",
                                at("DURATION"), "DURATION")
        elif duration == "interval" and INTERVAL_PARAM not in params:
            raise DetectorError(f"DURATION = 'interval' needs the param {INTERVAL_PARAM!r} (the event's length "
                                f"in frames), PARAMS is {list(params)}", at("DURATION"), "DURATION")
        return cls(
            pattern=normalize_label(pattern),
            description=description.strip(),
            depends=tuple(normalize_label(d) for d in depends),
            params=params,
            body_params=tuple(body_params),
            directed=directed,
            duration=duration,
        )

    @classmethod
    def from_constants(cls, values: dict[str, Any], where: str | dict[str, str] = "<detector>") -> "Declarations":
        """`make` from a module's constants as written (`Candidate.constants`)."""
        return cls.make(values["PATTERN"], values["DESCRIPTION"], values["DEPENDS"], values["PARAMS"],
                        values.get("BODY_PARAMS"), values.get("DIRECTED"), values.get("DURATION"), where)

    @property
    def interval(self) -> bool:
        return self.duration == "interval"

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "description": self.description, "depends": list(self.depends),
                "params": list(self.params), "body_params": list(self.body_params), "directed": self.directed,
                "duration": self.duration}


def _str_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) and x.strip() for x in v)


@dataclass
class Detector:
    """A loaded detector: its declarations plus the callable ``detect``.

    ``trusted=False`` marks LLM-written code that was only checked statically
    (`untrusted_detector`): ``detect`` is None and the detector runs only in the
    sandbox (`simpatterns.sandbox`; the annotator sends it there). ``body_params``, ``directed``
    and ``duration`` left at None take the contract's defaults; the checked whole
    is ``declarations``.
    """

    pattern: str
    description: str
    depends: list[str]
    params: list[str]
    source: str
    detect: DetectFn | None = field(repr=False)
    filename: str = "<detector>"
    trusted: bool = True
    body_params: list[str] | None = None
    directed: bool | None = None
    duration: str | None = None
    declarations: Declarations = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = Declarations.make(self.pattern, self.description, self.depends, self.params, self.body_params,
                              self.directed, self.duration, where=self.filename)
        self.declarations = d
        self.pattern, self.description, self.depends = d.pattern, d.description, list(d.depends)
        self.params, self.body_params = list(d.params), list(d.body_params)
        self.directed, self.duration = d.directed, d.duration

    @classmethod
    def from_declarations(cls, declarations: Declarations, source: str, detect: DetectFn | None,
                          filename: str = "<detector>", trusted: bool = True) -> "Detector":
        d = declarations
        return cls(d.pattern, d.description, list(d.depends), list(d.params), source, detect, filename, trusted,
                   list(d.body_params), d.directed, d.duration)

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)

    @property
    def num_lines(self) -> int:
        return count_lines(self.source)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def count_lines(source: str) -> int:
    """Non-blank lines: the length the evolver's length penalty sees."""
    return sum(1 for ln in source.splitlines() if ln.strip())


# ----------------------------------------------------------------- parsing
def parse_source(source: str, filename: str = "<detector>") -> ast.Module:
    """``ast.parse`` under `AST_LOCK`; raises `DetectorError` (``file:line:column``) on bad syntax."""
    try:
        with AST_LOCK:
            return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise DetectorError(f"syntax error: {exc.msg}", f"{filename}:{exc.lineno}:{exc.offset}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise DetectorError(f"unparsable source ({type(exc).__name__})", filename) from None


@dataclass(frozen=True)
class Candidate:
    """Detector source parsed once: the text, its AST and its checked `Declarations`.

    `Candidate.parse` is the only place detector source is parsed; the checks
    (`check_imports`, the sandbox's AST gate), `load_detector` and `untrusted_detector`
    all work on the tree. Nothing has run. `Candidate.from_tree` builds one from a
    tree parsed elsewhere (the evolver's proposers parse an answer once).
    """

    source: str
    tree: ast.Module = field(repr=False, compare=False)
    declarations: Declarations
    num_lines: int
    source_hash: str
    filename: str = "<candidate>"
    # the module constants as written (PATTERN ... PARAMS and the optional ones it sets):
    # what a prompt shows of it, where `declarations` has defaults filled in
    constants: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, source: str, filename: str = "<candidate>") -> "Candidate":
        """Parse and check the detector form; raises `DetectorError` (file:line, field)."""
        return cls.from_tree(source, parse_source(source, filename), filename)

    @classmethod
    def from_tree(cls, source: str, tree: ast.Module, filename: str = "<candidate>") -> "Candidate":
        """A candidate from ``source`` and the tree ``parse_source`` made of it (for callers
        that must look at the tree before the contract is checked, like the AST gate)."""
        values, lines = _declared_values(tree, filename)
        where = {name: f"{filename}:{line}" for name, line in lines.items()}
        where[""] = filename
        decl = Declarations.from_constants(values, where)
        return cls(source, tree, decl, count_lines(source), source_hash(source), filename, values)

    @property
    def pattern(self) -> str:
        return self.declarations.pattern


def _declared_values(tree: ast.Module, filename: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The literal values of the module constants (and their lines), without executing anything."""
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    has_detect = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "detect":
            has_detect = True
            nargs = len(node.args.args)
            if nargs != 2:
                raise DetectorError(
                    f"detect must take (trace, events), found {nargs} positional argument(s)",
                    f"{filename}:{node.lineno}", "detect",
                )
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in REQUIRED_NAMES or name in OPTIONAL_NAMES:
                try:
                    values[name] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
                    raise DetectorError(f"{name} must be a literal ({_LITERAL_KIND[name]})",
                                        f"{filename}:{node.lineno}", name) from exc
                lines[name] = node.lineno
    missing = [n for n in REQUIRED_NAMES if n not in values]
    if missing:
        raise DetectorError(f"missing module constant(s) {', '.join(missing)}", filename, missing[0])
    if not has_detect:
        raise DetectorError("missing function detect(trace, events)", filename, "detect")
    return values, lines


_LITERAL_KIND = {
    "PATTERN": "a string", "DESCRIPTION": "a string", "DEPENDS": "a list of strings", "PARAMS": "a list of strings",
    "BODY_PARAMS": "a list of strings", "DIRECTED": "True or False", "DURATION": "'instant' or 'interval'",
}


def declared_names(source: str, filename: str = "<detector>") -> dict[str, Any]:
    """The literal values of the module constants (``PATTERN`` ... ``PARAMS`` and the optional
    ones it sets) without executing anything; raises `DetectorError` for syntax errors,
    missing or malformed names."""
    return dict(Candidate.parse(source, filename).constants)


def check_imports(candidate: Candidate | str, filename: str = "<detector>") -> None:
    """Only ``import numpy``/``import math`` (and ``from`` forms of them) are allowed."""
    if isinstance(candidate, str):
        tree, filename = parse_source(candidate, filename), filename
    else:
        tree, filename = candidate.tree, candidate.filename
    for node in _statements(tree):
        mods: list[str] = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""]
        for m in mods:
            if m.split(".")[0] not in ALLOWED_IMPORTS:
                raise DetectorError(
                    f"import of {m!r} is not allowed; detectors may import only numpy and math",
                    f"{filename}:{node.lineno}", "import",
                )


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``tree`` that hold statements, in `ast.walk`'s order: an import is a
    statement, and no statement sits inside an expression, so the expressions (most of a
    detector's nodes, most of the time a full walk took) are not visited."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        yield node
        queue.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS))


def _candidate(source: str | Candidate, filename: str) -> Candidate:
    return source if isinstance(source, Candidate) else Candidate.parse(source, filename)


def load_detector(source: str | Candidate, filename: str = "<detector>") -> Detector:
    """Validate and execute trusted detector source (built-in or hand-written).

    Untrusted (LLM) code must go through ``simpatterns.sandbox`` instead:
    this function executes the module in-process.
    """
    cand = _candidate(source, filename)
    filename = cand.filename
    check_imports(cand)
    module = types.ModuleType(f"simpatterns_detector_{cand.source_hash}")
    module.__dict__.update({"np": np, "numpy": np, "math": math, "__file__": filename})
    try:
        with AST_LOCK:
            code = compile(cand.tree, filename, "exec")
        exec(code, module.__dict__)
    except Exception as exc:
        raise DetectorError(f"executing module failed: {type(exc).__name__}: {exc}", filename) from exc
    detect = module.__dict__.get("detect")
    if not callable(detect):
        raise DetectorError("detect is not callable", filename, "detect")
    return Detector.from_declarations(cand.declarations, cand.source, detect, filename)


def untrusted_detector(source: str | Candidate, filename: str = "<detector>") -> Detector:
    """Check untrusted (LLM-written) detector source without executing it.

    The same static checks as `load_detector` (the declarations and the imports);
    raises `DetectorError` naming the file, line and field. The result has
    ``detect=None`` and ``trusted=False``: only the sandbox may run it, and the
    sandbox layer's AST gate (`simpatterns.sandbox.gate.check_untrusted`) looks at
    it before it does.
    """
    cand = _candidate(source, filename)
    check_imports(cand)
    return Detector.from_declarations(cand.declarations, cand.source, None, cand.filename, trusted=False)


def validate_events(
    raw: Any, pattern: str, num_frames: int, max_events: int = 1_000_000, interval: bool = False
) -> EventList:
    """Check a detector's return value: a list of (frame, params) with integer frames in
    range and JSON-like params; with ``interval`` (``DURATION = "interval"``) every event's
    ``frames`` is an integer >= 1. Raises `DetectorError` describing the first problem."""
    if not isinstance(raw, (list, tuple)):
        raise DetectorError(f"detect returned {type(raw).__name__}, expected a list of (frame, params)", pattern)
    if len(raw) > max_events:
        raise DetectorError(f"detect returned {len(raw)} events, more than the limit {max_events}", pattern)
    out: list[tuple[int, dict[str, Any]]] = []
    for i, item in enumerate(raw):
        # fast path for the common case: a (int frame, dict of plain values) tuple; anything else
        # (numpy scalars, tuples, nested dicts, bad values) takes the full check below
        if type(item) is tuple and len(item) == 2:
            frame, params = item
            if type(frame) is int and 0 <= frame < num_frames and type(params) is dict:
                plain = _plain_fast(params)
                if plain is not None:
                    out.append((frame, plain))
                    continue
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise DetectorError(f"event {i} is {item!r}, expected (frame, params)", pattern)
        frame, params = item
        if isinstance(frame, (bool, np.bool_)) or not isinstance(frame, (int, np.integer, float, np.floating)):
            raise DetectorError(f"event {i}: frame {frame!r} is not an integer", pattern)
        if isinstance(frame, (float, np.floating)):
            if not math.isfinite(frame) or frame != int(frame):
                raise DetectorError(f"event {i}: frame {frame!r} is not an integer", pattern)
        f = int(frame)
        if not 0 <= f < num_frames:
            raise DetectorError(f"event {i}: frame {f} outside [0, {num_frames})", pattern)
        if not isinstance(params, dict):
            raise DetectorError(f"event {i}: params {params!r} is not a dict", pattern)
        out.append((f, _plain(params, pattern, i)))
    if interval:
        bad = interval_problem(out)
        if bad:
            raise DetectorError(bad, pattern)
    return out


def interval_problem(events: EventList) -> str:
    """'' when every event carries an integer ``frames`` >= 1 (an interval pattern's
    length), else what is wrong with the first that does not."""
    for i, (_, p) in enumerate(events):
        n = p.get(INTERVAL_PARAM)
        if type(n) is not int or n < 1:
            return f"event {i}: an interval event needs an integer {INTERVAL_PARAM!r} >= 1, got {n!r}"
    return ""


def _plain_fast(params: dict) -> dict | None:
    """A copy of ``params`` when every key is a str and every value a str, int, bool, None, finite
    float, or a list of those (or of such lists): exactly what `_plain` returns for them. None
    for anything else, which then goes through `_plain` (and its error messages)."""
    out = {}
    for k, v in params.items():
        t = type(v)
        if type(k) is not str:
            return None
        if t is str or t is int or t is bool or v is None:
            out[k] = v
        elif t is float:
            if v - v != 0.0:  # inf or nan
                return None
            out[k] = v
        elif t is list:
            v = _plain_list(v, 2)
            if v is None:
                return None
            out[k] = v
        else:
            return None
    return out


def _plain_list(values: list, depth: int) -> list | None:
    out = []
    for v in values:
        t = type(v)
        if t is str or t is int or t is bool or v is None:
            out.append(v)
        elif t is float and v - v == 0.0:
            out.append(v)
        elif t is list and depth > 1:
            v = _plain_list(v, depth - 1)
            if v is None:
                return None
            out.append(v)
        else:
            return None
    return out


def _plain(value: Any, pattern: str, i: int, depth: int = 0) -> Any:
    """Convert numpy scalars/arrays to plain JSON-like values; reject anything else."""
    if depth > 8:
        raise DetectorError(f"event {i}: params nested too deeply", pattern)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise DetectorError(f"event {i}: param key {k!r} is not a string", pattern)
            out[k] = _plain(v, pattern, i, depth + 1)
        return out
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v, pattern, i, depth + 1) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            raise DetectorError(f"event {i}: param value {v} is not finite", pattern)
        return v
    if isinstance(value, str) or value is None:
        return value
    raise DetectorError(f"event {i}: param value of type {type(value).__name__} is not JSON-like", pattern)
