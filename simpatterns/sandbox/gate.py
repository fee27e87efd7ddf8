"""The AST gate: a cheap static filter in front of the sandbox.

It rejects candidates that obviously try to leave the detector contract
(imports other than numpy/math, file or process access, introspection
through underscore attributes) before a process is spent on them, and it
names the reason so the LLM can be told. It is a filter, not the security
boundary: the sandbox (`simpatterns.sandbox.pool`) assumes the gate can be
bypassed and contains the candidate on its own.

Two callers: the evolver checks every candidate (`check_candidate`, or
`check_candidate_tree` on a `Candidate` parsed already), and annotation checks a
library's untrusted (LLM-written) entries before any of them runs
(`check_untrusted`). Loading a library does the contract's static checks only.
"""

from __future__ import annotations

import ast
import weakref

from simpatterns.annotation import normalize_label
from simpatterns.detectors.contract import ALLOWED_IMPORTS, AST_LOCK, Candidate, DetectorError, count_lines
from simpatterns.detectors.library import LibraryError, PatternLibrary
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Rejected

__all__ = ["check_candidate", "check_candidate_tree", "check_untrusted"]

FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
    "input", "help", "exit", "quit", "setattr", "delattr", "memoryview", "__builtins__",
    "__loader__", "__spec__",
})
# Attribute names that reach files, processes or foreign code through numpy or the
# Trace object even without an import (np.save, np.ctypeslib, trace.save, ...).
FORBIDDEN_ATTRIBUTES = frozenset({
    "ctypeslib", "ctypes", "load", "save", "savez", "savez_compressed", "savetxt", "loadtxt",
    "genfromtxt", "fromfile", "tofile", "fromregex", "memmap", "open_memmap", "DataSource",
    "testing", "f2py", "distutils", "os", "sys", "system", "popen", "environ", "from_bytes",
    "dump", "dumps",
    # str.format / format_map walk attributes inside the format string ("{0.lib._x}"),
    # out of the AST's sight; f-strings are ordinary, checked expressions
    "format", "format_map",
    # numpy's sub-packages that hold file IO (np.lib.format.open_memmap, np.lib.npyio)
    "lib", "core", "rec",
})
# The interpreter's own objects expose frames, code and globals without an underscore:
# a generator's gi_frame.f_back.f_globals is the module that called it, a traceback's
# tb_frame the same. Every attribute of these families is refused.
INTERPRETER_PREFIXES = ("gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_", "im_")
INTROSPECTION_CALLS = frozenset({"getattr", "hasattr"})


def check_candidate(
    source: str,
    label: str | None = None,
    available: list[str] | None = None,
    max_lines: int = 1000,
    max_chars: int = 200_000,
    safety: bool = True,
    *,
    tree: ast.Module | None = None,
) -> Candidate:
    """Raise `Rejected` with a reason code, or return the checked `Candidate`.

    ``label``: the pattern being evolved (PATTERN must match). ``available``:
    labels the candidate may list in DEPENDS (None: any). ``safety=False``
    skips the import/name/attribute filter and keeps only the contract checks:
    for testing that the sandbox holds on its own. ``tree``: ``source`` parsed
    already (by the proposer that wrote it), so nothing is parsed here. The
    checks run in a fixed order (size, syntax, the safety filter, the contract,
    the declarations), so a source with several faults is always named by the
    same one.
    """
    _check_size(source, max_lines, max_chars)
    with AST_LOCK:
        if tree is None:
            try:
                tree = ast.parse(source, filename="<candidate>")
            except SyntaxError as exc:
                raise Rejected(R.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}") from None
            except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
                raise Rejected(R.SYNTAX_ERROR, f"unparsable source ({type(exc).__name__})") from None
        if safety:
            _walk(tree)
        try:
            candidate = Candidate.from_tree(source, tree, "<candidate>")
        except DetectorError as exc:
            raise Rejected(R.CONTRACT, str(exc)) from None
    _check_declarations(candidate, label, available)
    return candidate


def check_candidate_tree(
    candidate: Candidate,
    label: str | None = None,
    available: list[str] | None = None,
    max_lines: int = 1000,
    max_chars: int = 200_000,
    safety: bool = True,
) -> Candidate:
    """`check_candidate` on a `Candidate` (parsed and contract-checked already): walks
    ``candidate.tree`` instead of parsing again. Raises `Rejected` or returns ``candidate``."""
    _check_size(candidate.source, max_lines, max_chars)
    if safety:
        with AST_LOCK:
            _walk(candidate.tree)
    _check_declarations(candidate, label, available)
    return candidate


def _check_size(source: str, max_lines: int, max_chars: int) -> None:
    if len(source) > max_chars:
        raise Rejected(R.TOO_LONG, f"{len(source)} characters, limit {max_chars}")
    nlines = count_lines(source)
    if nlines > max_lines:
        raise Rejected(R.TOO_LONG, f"{nlines} lines, limit {max_lines}")


def _check_declarations(candidate: Candidate, label: str | None, available: list[str] | None) -> None:
    decl = candidate.declarations
    pattern = decl.pattern
    if label is not None and pattern != normalize_label(label):
        raise Rejected(R.WRONG_PATTERN, f"PATTERN is {pattern!r}, expected {normalize_label(label)!r}")
    depends = list(decl.depends)
    if pattern in depends:
        raise Rejected(R.UNKNOWN_DEPENDENCY, f"{pattern!r} depends on itself")
    if available is not None:
        unknown = [d for d in depends if d not in set(available)]
        if unknown:
            raise Rejected(R.UNKNOWN_DEPENDENCY, f"DEPENDS names {unknown}, not in the library")
    params = list(decl.params)
    if len(set(params)) != len(params):
        raise Rejected(R.CONTRACT, f"PARAMS repeats a key: {params}")


# ------------------------------------------------------------------ libraries
UNTRUSTED_MAX_LINES = 2000  # an accepted detector may be longer than a candidate's first draft

# library -> the untrusted sources it passed with: a library is gated once per object
# (annotating trace by trace calls `check_untrusted` for every trace)
_PASSED: "weakref.WeakKeyDictionary[PatternLibrary, set[str]]" = weakref.WeakKeyDictionary()


def check_untrusted(library: PatternLibrary) -> None:
    """The gate over every untrusted (LLM-written) detector of ``library``, before any of
    them runs. Raises `LibraryError` naming the file and line, the pattern, "AST gate"
    and the reason. Each source is parsed and walked once per library object."""
    untrusted = library.untrusted_labels()
    if not untrusted:
        return
    passed = _PASSED.setdefault(library, set())
    for label in untrusted:
        det = library.get(label)
        if det.source in passed:
            continue
        try:
            check_candidate(det.source, label, max_lines=UNTRUSTED_MAX_LINES)
        except Rejected as exc:
            detail = exc.reason.detail
            line = detail.split(":", 1)[0][len("line "):] if detail.startswith("line ") else ""
            where = _file_of(library, label)
            raise LibraryError(f"{where}{':' + line if line.isdigit() else ''}: untrusted detector {label!r} "
                               f"rejected by the AST gate ({exc.reason.short()})", [label]) from None
        passed.add(det.source)


def _file_of(library: PatternLibrary, label: str) -> str:
    file = library.entry(label).file
    return str(library.path / file) if library.path is not None else file


def _walk(tree: ast.AST) -> None:
    # getattr/hasattr are allowed only when called directly with a literal name;
    # any other use (``g = getattr``) would let a computed name through
    direct_calls = {
        id(node.func) for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in INTROSPECTION_CALLS
    }
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                    raise Rejected(R.FORBIDDEN_IMPORT, f"line {line}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level or mod.split(".")[0] not in ALLOWED_IMPORTS:
                raise Rejected(R.FORBIDDEN_IMPORT, f"line {line}: from {'.' * node.level}{mod} import ...")
            for alias in node.names:
                _check_attr_name(alias.name, line)
        elif isinstance(node, ast.Name):
            if node.id in INTROSPECTION_CALLS and id(node) not in direct_calls:
                raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.id} used other than as a direct call")
            if node.id in FORBIDDEN_NAMES:
                raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.id}")
            if node.id.startswith("__"):
                raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.id}")
        elif isinstance(node, ast.Attribute):
            _check_attr_name(node.attr, line)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in INTROSPECTION_CALLS:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.func.id} with a computed attribute name")
            _check_attr_name(name.value, line)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name.startswith("__"):
            raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.name}")
        elif isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
            raise Rejected(R.FORBIDDEN_NAME, f"line {line}: async code")
        elif isinstance(node, ast.MatchClass):
            # ``case object(__class__=c)`` reads attributes by the names in kwd_attrs
            for name in node.kwd_attrs:
                _check_attr_name(name, line)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name and node.name.startswith("__"):
            raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.name}")
        elif isinstance(node, ast.MatchMapping) and node.rest and node.rest.startswith("__"):
            raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {node.rest}")
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and any(n.startswith("__") for n in node.names):
            raise Rejected(R.FORBIDDEN_NAME, f"line {line}: {', '.join(node.names)}")


def _check_attr_name(name: str, line: object) -> None:
    if name.startswith("_") or name.startswith(INTERPRETER_PREFIXES):
        raise Rejected(R.FORBIDDEN_ATTRIBUTE, f"line {line}: .{name}")
    if name in FORBIDDEN_ATTRIBUTES:
        raise Rejected(R.FORBIDDEN_ATTRIBUTE, f"line {line}: .{name}")
