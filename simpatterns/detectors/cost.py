"""A detector's cost in a unit that does not vary between runs: Python steps.

Measured time differs between two runs of the same program (cache, CPU frequency,
the machine's load), so a fitness that reads it cannot promise that the same seed
gives the same library. A detector's steps are the loop iterations (``for``,
``while``, every comprehension) and function calls of its own source: the same
number in every run on the same traces, and the cost that matters for detectors
(vectorised numpy code takes a few dozen steps per trace, a Python loop over
frames or pairs thousands). Work inside numpy calls is not counted (the
sandbox's CPU and memory limits bound it).

`instrument` rewrites a detector's syntax tree so that each step calls a counter
(``itertools.count().__next__``, a C call: counting costs a few percent, not the
several-fold slowdown of a line tracer); `CountedDetector` compiles and runs it.
The counter's name starts with an underscore, which the AST gate forbids in
candidate code, so a candidate cannot call or replace it.
"""

from __future__ import annotations

import ast
import itertools
import math
from typing import Any, Callable

import numpy as np

COUNTER = "__simpatterns_step__"


class _Instrument(ast.NodeTransformer):
    def _tick(self) -> ast.Expr:
        return ast.Expr(ast.Call(ast.Name(COUNTER, ast.Load()), [], []))

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, self._tick())
        return node

    visit_For = visit_AsyncFor = visit_While = _loop

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        # after the docstring, so it stays the docstring
        at = 1 if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
            and isinstance(node.body[0].value.value, str) else 0
        node.body.insert(at, self._tick())
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        # an always-true condition that counts each element: ``... for x in xs if tick() >= 0``
        node.ifs.insert(0, ast.Compare(ast.Call(ast.Name(COUNTER, ast.Load()), [], []), [ast.GtE()],
                                       [ast.Constant(0)]))
        return node


def instrument(tree: ast.Module) -> ast.Module:
    """``tree`` (changed in place) with a step counted in every loop iteration,
    comprehension element and function call."""
    return ast.fix_missing_locations(_Instrument().visit(tree))


class StepCounter:
    """The counter an instrumented module calls; `take` returns the steps since the last take."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self.tick: Callable[[], int] = self._count.__next__
        self._last = self.tick()

    def take(self) -> int:
        now = self.tick()
        steps, self._last = now - self._last - 1, now
        return steps


def counted_detect(source: str | ast.Module, filename: str, namespace: dict[str, Any] | None = None
                   ) -> tuple[Callable[..., Any], StepCounter]:
    """Compile ``source`` instrumented and return its ``detect`` and the counter it ticks.
    ``namespace``: the module's globals (builtins, numpy) -- the sandbox's restricted ones
    for untrusted code; the default is for trusted code."""
    tree = ast.parse(source, filename) if isinstance(source, str) else source
    counter = StepCounter()
    ns = namespace if namespace is not None else {"np": np, "numpy": np, "math": math, "__name__": "detector"}
    ns[COUNTER] = counter.tick
    exec(compile(instrument(tree), filename, "exec"), ns)
    detect = ns.get("detect")
    if not callable(detect):
        raise ValueError("detect is not callable")
    return detect, counter
