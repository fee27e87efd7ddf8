"""One name per concept: no class name is defined twice in the package."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "simpatterns"


def test_no_class_name_is_defined_twice():
    where = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert len(where) > 100  # the whole package was read
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, twice
