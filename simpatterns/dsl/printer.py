"""Canonical printing of reward programs: ``parse(format_program(p)) == p``.

Rules: strings in double quotes (escapes ``\\" \\\\ \\n \\t``), integers as
integers, floats by ``repr``; keyword arguments as ``name=value``; a root
``AND``/``OR`` with two or more operands, and any call that does not fit in
``width`` columns, is broken one argument per line (4-space indent,
trailing comma). Comments are not part of the tree and are not printed.
"""

from __future__ import annotations

from simpatterns.dsl.syntax import Call, Compare, DictLit, Keyword, ListLit, Node, Num, Program, Str, TupleLit

INDENT = "    "


def format_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def format_number(v: int | float) -> str:
    if isinstance(v, bool):  # never produced by the parser; keep it a number
        return str(int(v))
    return str(v) if isinstance(v, int) else repr(float(v))


def format_expr(node: Node | Keyword) -> str:
    """One-line canonical text of a node."""
    if isinstance(node, Str):
        return format_string(node.value)
    if isinstance(node, Num):
        return format_number(node.value)
    if isinstance(node, Keyword):
        return f"{node.name}={format_expr(node.value)}"
    if isinstance(node, Call):
        return f"{node.name}({', '.join(format_expr(a) for a in node.arguments)})"
    if isinstance(node, Compare):
        return f"{format_expr(node.left)} {node.op} {format_expr(node.right)}"
    if isinstance(node, ListLit):
        return "[" + ", ".join(format_expr(n) for n in node.items) + "]"
    if isinstance(node, TupleLit):
        if len(node.items) == 1:
            return f"({format_expr(node.items[0])},)"
        return "(" + ", ".join(format_expr(n) for n in node.items) + ")"
    if isinstance(node, DictLit):
        return "{" + ", ".join(f"{format_string(k.value)}: {format_expr(v)}" for k, v in node.items) + "}"
    raise TypeError(f"cannot print {type(node).__name__}")


def _format(node: Node | Keyword, indent: str, width: int, force_break: bool = False) -> str:
    flat = format_expr(node)
    if isinstance(node, Keyword):
        inner = _format(node.value, indent, width - len(node.name) - 1)
        return f"{node.name}={inner}"
    if isinstance(node, Compare):
        return f"{_format(node.left, indent, width)} {node.op} {_format(node.right, indent, width)}"
    if not isinstance(node, Call) or not node.arguments:
        return flat
    if not force_break and len(indent) + len(flat) <= width:
        return flat
    inner = indent + INDENT
    lines = [f"{inner}{_format(a, inner, width)}," for a in node.arguments]
    return f"{node.name}(\n" + "\n".join(lines) + f"\n{indent})"


def format_program(program: Program | Node, width: int = 88) -> str:
    """Canonical multi-line text of a program (ends with a newline)."""
    root = program.root if isinstance(program, Program) else program
    force = isinstance(root, Call) and root.name in ("AND", "OR") and len(root.arguments) >= 2
    return _format(root, "", width, force_break=force) + "\n"
