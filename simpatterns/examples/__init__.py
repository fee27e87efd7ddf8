"""The examples that ship with simpatterns: goal programs (``goals/*.rwd``),
discovery labels (``labels/*.toml`` and their start programs) and MuJoCo
scenes (``mujoco/*.xml``).

They are package data, found through `importlib.resources`, so they are there
on a wheel install too. ``simpatterns examples`` copies them into a folder
(``./examples`` by default) so the README's commands run as written.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

try:
    from importlib.resources.abc import Traversable
except ImportError:  # Python 3.10
    from importlib.abc import Traversable

KINDS = ("goals", "labels", "mujoco")


def path(*parts: str) -> Traversable:
    """The shipped example at ``parts`` (e.g. ``path("goals", "bucket_first.rwd")``)."""
    node = resources.files(__name__)
    for p in parts:
        node = node / p
    return node


def goals_dir() -> Path:
    """The folder of the shipped goal programs (a real folder: package data is
    installed as files)."""
    return Path(str(path("goals")))


def copy_to(dest: str | os.PathLike, *, force: bool = False) -> list[Path]:
    """Copy the shipped examples into ``dest`` (created); an existing file is kept
    unless ``force``. Returns the files written."""
    root = Path(dest)
    written: list[Path] = []

    def walk(node: Traversable, rel: Path) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name.startswith(("_", ".")):
                continue  # __init__.py, __pycache__
            if child.is_dir():
                walk(child, rel / child.name)
            else:
                target = root / rel / child.name
                if target.exists() and not force:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with child.open("rb") as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                written.append(target)

    for kind in KINDS:
        walk(path(kind), Path(kind))
    return written
