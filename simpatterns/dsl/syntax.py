"""Syntax tree of a reward program.

Nodes are slotted dataclasses, treated as immutable (not frozen: frozen
dataclasses are several times slower to build, and parsing builds many).
Their source positions (`Span`) are kept for error messages but excluded
from equality, so ``parse(format_program(p)) == p`` compares meaning, not
layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Union


class Span(NamedTuple):
    """Source range: 1-based line/column of the first character, and of the
    character just past the end; ``start``/``end`` are 0-based offsets."""

    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0
    start: int = 0
    end: int = 0


NO_SPAN = Span()


@dataclass(slots=True)
class Str:
    value: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class Num:
    value: int | float
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class ListLit:
    items: tuple["Node", ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class TupleLit:
    items: tuple["Node", ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class DictLit:
    items: tuple[tuple[Str, "Node"], ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class Keyword:
    """``name=value`` inside a call's argument list."""

    name: str
    value: "Node"
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(slots=True)
class Call:
    """``NAME(args..., key=value...)``; ``arguments`` keeps source order, so a
    positional argument after a keyword one can be reported."""

    name: str
    arguments: tuple[Union["Node", Keyword], ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)
    name_span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def positional(self) -> list["Node"]:
        return [a for a in self.arguments if not isinstance(a, Keyword)]

    @property
    def keywords(self) -> list[Keyword]:
        return [a for a in self.arguments if isinstance(a, Keyword)]


@dataclass(slots=True)
class Compare:
    """``left OP right`` with OP one of ``== != < <= > >=``."""

    op: str
    left: "Node"
    right: "Node"
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


Node = Union[Str, Num, ListLit, TupleLit, DictLit, Call, Compare]


@dataclass(slots=True)
class Program:
    """A parsed reward program: one expression plus the text it came from."""

    root: Node
    source: str = field(default="", compare=False, repr=False)
    filename: str = field(default="<program>", compare=False, repr=False)

    @property
    def clauses(self) -> list[Node]:
        """Top-level clauses: the operands of a root ``AND``, else the root itself."""
        if isinstance(self.root, Call) and self.root.name == "AND" and self.root.arguments:
            return [a.value if isinstance(a, Keyword) else a for a in self.root.arguments]
        return [self.root]


def literal_value(node: Node) -> object:
    """The Python value of a literal node (tuples stay tuples); calls and
    comparisons raise TypeError."""
    if isinstance(node, (Str, Num)):
        return node.value
    if isinstance(node, ListLit):
        return [literal_value(n) for n in node.items]
    if isinstance(node, TupleLit):
        return tuple(literal_value(n) for n in node.items)
    if isinstance(node, DictLit):
        return {k.value: literal_value(v) for k, v in node.items}
    raise TypeError(f"{type(node).__name__} is not a literal")


def is_literal(node: object) -> bool:
    if isinstance(node, (Str, Num)):
        return True
    if isinstance(node, (ListLit, TupleLit)):
        return all(is_literal(n) for n in node.items)
    if isinstance(node, DictLit):
        return all(is_literal(v) for _, v in node.items)
    return False


def walk(node: Node | Keyword):
    """Every node below (and including) ``node``, depth first."""
    stack: list[Node | Keyword] = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, Keyword):
            stack.append(n.value)
        elif isinstance(n, Call):
            stack.extend(reversed(n.arguments))
        elif isinstance(n, Compare):
            stack.extend((n.right, n.left))
        elif isinstance(n, (ListLit, TupleLit)):
            stack.extend(reversed(n.items))
        elif isinstance(n, DictLit):
            for k, v in reversed(n.items):
                stack.extend((v, k))
