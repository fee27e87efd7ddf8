"""AST-level mutation and crossover of detector programs: the offline proposer's operators.

Sites a mutation may change, found with the AST and edited in the text (so
comments and layout survive):

- numeric constants of module-level assignments (``MIN_SPEED = 5.0``,
  ``WINDOW = 4``), the thresholds a detector is tuned by;
- numeric constants that are operands of comparisons (``speed > 30``);
- comparison operators ``<``, ``<=``, ``>``, ``>=`` (strictness toggled; rarely
  the direction flipped).

Floats are scaled by ``exp(N(0, sigma))``; integers move by at least one
step in the same way (sign kept, zero left alone: a zero is usually a
structural bound, not a threshold). Crossover copies values of module-level
constants that two programs of the same label share from one to the other.
Everything is driven by the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

import numpy as np

_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_TOGGLE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Site:
    kind: str  # "const" or "compare"
    line: int  # 1-based
    start: int  # byte offsets in the line's UTF-8 encoding
    end: int
    text: str  # current text at the site
    name: str | None = None  # module-level constant name, if any
    value: float | None = None


def find_sites(source: str) -> list[Site]:
    tree = ast.parse(source)
    lines = source.splitlines()
    sites: list[Site] = []
    seen: set[tuple[int, int]] = set()

    def add_const(node: ast.AST, name: str | None = None) -> None:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        if not (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
                and not isinstance(node.value, bool)):
            return
        if node.lineno != node.end_lineno or (node.lineno, node.col_offset) in seen:
            return
        raw = lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode()
        seen.add((node.lineno, node.col_offset))
        sites.append(Site("const", node.lineno, node.col_offset, node.end_col_offset or node.col_offset, raw, name,
                          float(node.value)))

    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id not in ("PATTERN", "DESCRIPTION", "DEPENDS", "PARAMS"):
                add_const(node.value, node.targets[0].id)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for operand in operands:
            add_const(operand)
        for i, op in enumerate(node.ops):
            sym = _OPS.get(type(op))
            left, right = operands[i], operands[i + 1]
            if sym is None or left.end_lineno != right.lineno:
                continue
            line_b = lines[right.lineno - 1].encode()
            span = line_b[left.end_col_offset:right.col_offset]
            m = re.search(rb"(<=|>=|<|>)", span)
            if m is None or m.group(1).decode() != sym:
                continue
            start = (left.end_col_offset or 0) + m.start(1)
            sites.append(Site("compare", right.lineno, start, start + len(sym), sym))
    sites.sort(key=lambda s: (s.line, s.start))
    return sites


def _format(value: float, was_int: bool) -> str:
    if was_int:
        return str(int(value))
    text = f"{value:.4g}"
    if not re.search(r"[.eE]", text):
        text += ".0"
    return text


def mutate_value(text: str, rng: np.random.Generator, sigma: float = 0.3) -> str | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, bool) or value == 0:
        return None
    factor = math.exp(float(rng.normal(0.0, sigma)))
    if isinstance(value, int):
        new = int(round(value * factor))
        if new == value:
            new = value + (1 if factor >= 1 else -1)
        if new == 0 or (new > 0) != (value > 0):
            new = value + (1 if value > 0 else -1)
        return _format(new, True)
    new_f = float(value) * factor
    out = _format(new_f, False)
    return out if out != text else _format(float(value) * (1.1 if factor >= 1 else 0.9), False)


def apply_edits(source: str, edits: list[tuple[Site, str]]) -> str:
    lines = source.splitlines(keepends=True)
    for site, new in sorted(edits, key=lambda e: (e[0].line, e[0].start), reverse=True):
        b = lines[site.line - 1].encode()
        lines[site.line - 1] = (b[:site.start] + new.encode() + b[site.end:]).decode()
    return "".join(lines)


def mutate(source: str, rng: np.random.Generator, max_changes: int = 3, sigma: float = 0.3,
           flip_probability: float = 0.1, attempts: int = 8) -> tuple[str, ast.Module] | None:
    """A mutated copy of ``source`` (1..max_changes sites changed) and its tree (the
    one parse of it, which also checks that the edit kept it Python), or None when
    it has nothing to mutate."""
    sites = [s for s in find_sites(source) if s.kind == "compare" or (s.value is not None and s.value != 0)]
    if not sites:
        return None
    weights = np.array([3.0 if s.name else (2.0 if s.kind == "const" else 1.0) for s in sites])
    for _ in range(attempts):
        k = int(rng.integers(1, min(max_changes, len(sites)) + 1))
        chosen = rng.choice(len(sites), size=k, replace=False, p=weights / weights.sum())
        edits: list[tuple[Site, str]] = []
        for i in sorted(int(c) for c in chosen):
            s = sites[i]
            if s.kind == "compare":
                new = _FLIP[s.text] if rng.random() < flip_probability else _TOGGLE[s.text]
            else:
                new = mutate_value(s.text, rng, sigma)
            if new is not None and new != s.text:
                edits.append((s, new))
        if not edits:
            continue
        out = apply_edits(source, edits)
        try:
            return out, ast.parse(out)
        except SyntaxError:
            continue
    return None


def crossover(primary: str, other: str, rng: np.random.Generator) -> str | None:
    """``primary`` with each module-level constant it shares with ``other`` taken from
    ``other`` with probability 1/2 (the thresholds of two detectors of one label)."""
    mine = {s.name: s for s in find_sites(primary) if s.name}
    theirs = {s.name: s for s in find_sites(other) if s.name}
    edits = [(mine[n], theirs[n].text) for n in sorted(mine.keys() & theirs.keys())
             if mine[n].text != theirs[n].text and rng.random() < 0.5]
    if not edits:
        return None
    return apply_edits(primary, edits)
