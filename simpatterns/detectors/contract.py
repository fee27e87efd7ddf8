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

Only ``numpy`` and ``math`` may be imported. Loading from text validates all
of that and raises `DetectorError` naming the file, line and field.
"""

from __future__ import annotations

import ast
import hashlib
import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

ALLOWED_IMPORTS = frozenset({"numpy", "math"})
REQUIRED_NAMES = ("PATTERN", "DESCRIPTION", "DEPENDS", "PARAMS")

DetectFn = Callable[[Any, dict[str, list[tuple[int, dict[str, Any]]]]], list[tuple[int, dict[str, Any]]]]


class DetectorError(ValueError):
    """A detector's source is malformed; ``where`` is ``file:line`` or ``file``."""

    def __init__(self, message: str, where: str = "<detector>", field_name: str | None = None):
        self.where = where
        self.field_name = field_name
        super().__init__(f"{where}: {message}")


@dataclass
class Detector:
    """A loaded detector: its declared names plus the callable ``detect``.

    ``trusted=False`` marks LLM-written code that was only checked statically
    (`untrusted_detector`): ``detect`` is None and the detector runs only in the
    evolver's sandbox (the annotator sends it there).
    """

    pattern: str
    description: str
    depends: list[str]
    params: list[str]
    source: str
    detect: DetectFn | None = field(repr=False)
    filename: str = "<detector>"
    trusted: bool = True

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)

    @property
    def num_lines(self) -> int:
        return len([ln for ln in self.source.splitlines() if ln.strip()])


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def normalize_label(label: str) -> str:
    """'Lever_Launch ' -> 'lever launch': how labels are matched everywhere."""
    return " ".join(label.replace("_", " ").lower().split())


def declared_names(source: str, filename: str = "<detector>") -> dict[str, Any]:
    """Parse ``source`` and return the literal values of PATTERN/DESCRIPTION/DEPENDS/PARAMS
    without executing anything; raises `DetectorError` for syntax errors or missing names."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise DetectorError(f"syntax error: {exc.msg}", f"{filename}:{exc.lineno}:{exc.offset}") from exc
    values: dict[str, Any] = {}
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
            if name in REQUIRED_NAMES:
                try:
                    values[name] = ast.literal_eval(node.value)
                except ValueError as exc:
                    raise DetectorError(
                        f"{name} must be a literal (string or list of strings)", f"{filename}:{node.lineno}", name
                    ) from exc
                values[f"{name}__line"] = node.lineno
    missing = [n for n in REQUIRED_NAMES if n not in values]
    if missing:
        raise DetectorError(f"missing module constant(s) {', '.join(missing)}", filename, missing[0])
    if not has_detect:
        raise DetectorError("missing function detect(trace, events)", filename, "detect")
    _check_types(values, filename)
    return values


def _check_types(values: dict[str, Any], filename: str) -> None:
    def where(name: str) -> str:
        return f"{filename}:{values.get(name + '__line', '?')}"

    for name in ("PATTERN", "DESCRIPTION"):
        if not isinstance(values[name], str) or not values[name].strip():
            raise DetectorError(f"{name} must be a non-empty string, got {values[name]!r}", where(name), name)
    for name in ("DEPENDS", "PARAMS"):
        v = values[name]
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) and x.strip() for x in v):
            raise DetectorError(f"{name} must be a list of non-empty strings, got {v!r}", where(name), name)


def check_imports(source: str, filename: str = "<detector>") -> None:
    """Only ``import numpy``/``import math`` (and ``from`` forms of them) are allowed."""
    tree = ast.parse(source, filename=filename)
    for node in ast.walk(tree):
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


def load_detector(source: str, filename: str = "<detector>") -> Detector:
    """Validate and execute trusted detector source (built-in or hand-written).

    Untrusted (LLM) code must go through ``simpatterns.evolve.sandbox`` instead:
    this function executes the module in-process.
    """
    values = declared_names(source, filename)
    check_imports(source, filename)
    module = types.ModuleType(f"simpatterns_detector_{source_hash(source)}")
    module.__dict__.update({"np": np, "numpy": np, "math": math, "__file__": filename})
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except Exception as exc:
        raise DetectorError(f"executing module failed: {type(exc).__name__}: {exc}", filename) from exc
    detect = module.__dict__.get("detect")
    if not callable(detect):
        raise DetectorError("detect is not callable", filename, "detect")
    return Detector(
        pattern=normalize_label(values["PATTERN"]),
        description=values["DESCRIPTION"].strip(),
        depends=[normalize_label(d) for d in values["DEPENDS"]],
        params=list(values["PARAMS"]),
        source=source,
        detect=detect,
        filename=filename,
    )


def untrusted_detector(source: str, filename: str = "<detector>") -> Detector:
    """Check untrusted (LLM-written) detector source without executing it.

    The same static checks as `load_detector` plus the evolver's AST gate
    (`simpatterns.evolve.gate.check_candidate`); raises `DetectorError` naming the
    file, line and reason. The result has ``detect=None`` and ``trusted=False``:
    only the sandbox may run it. The gate is a filter, not the boundary.
    """
    from simpatterns.evolve.gate import check_candidate  # evolve imports this module: import late
    from simpatterns.evolve.reasons import Rejected

    values = declared_names(source, filename)
    check_imports(source, filename)
    try:
        check_candidate(source, max_lines=2000)
    except Rejected as exc:
        detail = exc.reason.detail
        line = detail.split(":", 1)[0][len("line "):] if detail.startswith("line ") else ""
        where = f"{filename}:{line}" if line.isdigit() else filename
        raise DetectorError(f"untrusted detector rejected by the AST gate ({exc.reason.short()})",
                            where, "source") from None
    return Detector(
        pattern=normalize_label(values["PATTERN"]),
        description=values["DESCRIPTION"].strip(),
        depends=[normalize_label(d) for d in values["DEPENDS"]],
        params=list(values["PARAMS"]),
        source=source,
        detect=None,
        filename=filename,
        trusted=False,
    )


def validate_events(
    raw: Any, pattern: str, num_frames: int, max_events: int = 1_000_000
) -> list[tuple[int, dict[str, Any]]]:
    """Check a detector's return value: a list of (frame, params) with integer frames in
    range and JSON-like params. Raises `DetectorError` describing the first problem."""
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
    return out


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
