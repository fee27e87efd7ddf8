"""The action menu of a task: a quantised grid of valid actions, at least one of them solving.

Language models choose from a list, not a continuous space (paper §4.1). A
task's menu holds the cells of the ``bins``³ grid over (x, y, r) (cell
centres, `simpatterns.simulators.phyre.quantize_action`) whose ball PHYRE
would accept — inside the scene, overlapping nothing — in grid order, named
``A1``, ``A2``, ... and shown with their coordinates in pixels::

    A1: x=21 y=21 r=4
    A2: x=64 y=21 r=4

Each valid cell is simulated once when the menu is built (``scan="full"``),
so the menu knows which choices solve the task: the oracle and memory agents
and the expected score of random choice use that, and a language model's
attempts cost no second simulation when feedback needs no rollout.
``scan="first"`` stops at the first solving cell (cells are tried in a
seeded random order; the rest stay unknown) for big grids.

If no cell solves, the variant's stored solution (verified when the variants
were built, and again here) is added as the last choice, with its own
coordinates, and the menu says so (``added_solution``): a grid cell near it
does not necessarily solve. A menu depends only on the task, ``bins`` and
``scan``, never on the agent or the feedback condition, so every condition
sees the same choices. Menus are cached on disk as JSON, keyed by the scene's
parameters, so a changed variant is rebuilt, not reused.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from simpatterns.agents.tasks import Task
from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write_json, cache_dir
from simpatterns.cli_support import progress_map
from simpatterns.parallel import Backend
from simpatterns.simulators.phyre import check_action, quantize_action, simulate
from simpatterns.simulators.phyre.physics import ACTION_MIN_RADIUS, ACTION_POSITION_SCALE, ACTION_RADIUS_RANGE

MENU_FORMAT = "simpatterns-menu"
MENU_VERSION = 1
SCANS = ("full", "first")
DEFAULT_BINS = 6
SOLVED, NOT_SOLVED, UNKNOWN = 1, -1, 0
_STATUS_CHARS = {SOLVED: "s", NOT_SOLVED: "n", UNKNOWN: "?"}
_CHAR_STATUS = {v: k for k, v in _STATUS_CHARS.items()}


class MenuError(SimpatternsError, RuntimeError):
    """A menu cannot be built or read; the message names the task or file."""


def default_cache_dir() -> Path:
    """``menus`` in the cache folder (`simpatterns.files.cache_dir`: ``$SIMPATTERNS_CACHE``)."""
    return cache_dir("menus")


def action_px(action: Sequence[float]) -> tuple[float, float, float]:
    """(x, y, r) in [0, 1] -> ball centre and radius in pixels."""
    x, y, r = (float(v) for v in action)
    return x * ACTION_POSITION_SCALE, y * ACTION_POSITION_SCALE, ACTION_MIN_RADIUS + ACTION_RADIUS_RANGE * r


@dataclass(frozen=True)
class Choice:
    id: str  # "A17"
    action: tuple[float, float, float]
    cell: int | None  # grid cell; None for an added stored solution

    def text(self) -> str:
        x, y, r = action_px(self.action)
        return f"{self.id}: x={x:.0f} y={y:.0f} r={r:.0f}"


@dataclass
class Menu:
    """The choices of one task; ``solved[k]`` is 1 / -1 / 0 (unknown) for choice k."""

    task: str
    bins: int
    scan: str
    choices: list[Choice]
    solved: np.ndarray
    added_solution: bool
    key: str
    grid_cells: int  # bins**3
    simulations: int  # rollouts spent building it

    def __post_init__(self) -> None:
        self._by_id = {c.id.upper(): k for k, c in enumerate(self.choices)}
        self._by_action = {c.action: k for k, c in enumerate(self.choices)}

    def __len__(self) -> int:
        return len(self.choices)

    def index(self, choice_id: str) -> int | None:
        """Position of a choice id (case-insensitive, ``"17"`` = ``"A17"``), or None."""
        key = str(choice_id).strip().upper()
        if key.isdigit():
            key = "A" + str(int(key))
        return self._by_id.get(key)

    def index_of_action(self, action: Sequence[float]) -> int | None:
        """Position of the choice with exactly this action (a grid cell centre), or None."""
        return self._by_action.get(tuple(float(v) for v in action))

    def status(self, k: int) -> int:
        return int(self.solved[k])

    @property
    def solving(self) -> list[int]:
        return [k for k in range(len(self)) if self.solved[k] == SOLVED]

    @property
    def known(self) -> bool:
        """Every choice's outcome is known (a full scan)."""
        return bool(np.all(self.solved != UNKNOWN))

    def text(self) -> str:
        """One line per choice, as a model reads it."""
        return "\n".join(c.text() for c in self.choices)

    # ------------------------------------------------------------ storage
    def to_json(self) -> dict[str, Any]:
        return {
            "format": MENU_FORMAT, "version": MENU_VERSION, "key": self.key, "task": self.task, "bins": self.bins,
            "scan": self.scan, "grid_cells": self.grid_cells, "simulations": self.simulations,
            "added_solution": self.added_solution,
            "cells": [c.cell for c in self.choices],
            "actions": [list(c.action) for c in self.choices],
            "solved": "".join(_STATUS_CHARS[int(s)] for s in self.solved),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "<menu>") -> "Menu":
        if data.get("format") != MENU_FORMAT:
            raise MenuError(f"{where}: not a menu file (format {data.get('format')!r})")
        try:
            cells, actions, solved = data["cells"], data["actions"], data["solved"]
            if not (len(cells) == len(actions) == len(solved)):
                raise MenuError(f"{where}: cells, actions and solved differ in length")
            choices = [Choice(f"A{k + 1}", tuple(float(v) for v in a), None if c is None else int(c))
                       for k, (c, a) in enumerate(zip(cells, actions))]
            return cls(
                task=data["task"], bins=int(data["bins"]), scan=data["scan"], choices=choices,
                solved=np.array([_CHAR_STATUS[ch] for ch in solved], dtype=np.int8),
                added_solution=bool(data["added_solution"]), key=data["key"], grid_cells=int(data["grid_cells"]),
                simulations=int(data.get("simulations", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MenuError(f"{where}: malformed menu ({type(exc).__name__}: {exc})") from None


def menu_key(task: Task, bins: int, scan: str) -> str:
    """What a menu depends on: the scene's template, variant and parameters, the grid, the scan."""
    blob = json.dumps({"v": MENU_VERSION, "template": task.template, "variant": task.variant,
                       "params": task.scene.params, "bins": bins, "scan": scan}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _check(bins: int, scan: str) -> None:
    if not isinstance(bins, int) or not 1 <= bins <= 32:
        raise ValueError(f"bins must be an integer in 1..32, got {bins!r}")
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")


def task_solved(scene, action: Sequence[float]) -> bool:
    """Does ``action`` solve the scene's task? Decided by a full run: the settle shortcut can
    stop a run whose goal body is still creeping towards success."""
    return simulate(scene, action).success


def build_menu(task: Task | str, bins: int = DEFAULT_BINS, scan: str = "full") -> Menu:
    """The menu of ``task`` (see the module docstring); simulates its valid cells."""
    task = Task.from_id(task) if isinstance(task, str) else task
    _check(bins, scan)
    scene = task.scene
    cells = [c for c in range(bins**3) if check_action(scene, quantize_action(c, bins)) is None]
    solved = np.zeros(len(cells), dtype=np.int8)
    sims = 0
    if scan == "full":
        order = range(len(cells))
    else:
        seed = int(hashlib.sha256(f"{task.id}:{bins}".encode()).hexdigest()[:8], 16)
        order = np.random.default_rng(seed).permutation(len(cells)).tolist()
    for k in order:
        ok = task_solved(scene, quantize_action(cells[k], bins))
        sims += 1
        solved[k] = SOLVED if ok else NOT_SOLVED
        if ok and scan == "first":
            break
    choices = [Choice(f"A{k + 1}", tuple(float(v) for v in quantize_action(c, bins)), c) for k, c in enumerate(cells)]
    added = False
    if not np.any(solved == SOLVED):
        sol = tuple(float(v) for v in task.stored_solution)
        sims += 1
        if check_action(scene, sol) is not None or not task_solved(scene, sol):
            raise MenuError(f"task {task.id}: no grid cell solves it and its stored solution does not either")
        choices.append(Choice(f"A{len(choices) + 1}", sol, None))
        solved = np.append(solved, np.int8(SOLVED))
        added = True
    return Menu(task.id, bins, scan, choices, solved, added, menu_key(task, bins, scan), bins**3, sims)


class MenuStore:
    """Menus cached on disk: ``DIR/b{bins}-{scan}/{template}-{variant}.json``."""

    def __init__(self, cache_dir: str | os.PathLike | None = None, bins: int = DEFAULT_BINS, scan: str = "full"):
        _check(bins, scan)
        self.dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.bins, self.scan = bins, scan

    def path(self, task: Task) -> Path:
        return self.dir / f"b{self.bins}-{self.scan}" / f"{task.template}-{task.variant:03d}.json"

    def cached(self, task: Task | str) -> Menu | None:
        """The cached menu if it is current, else None."""
        task = Task.from_id(task) if isinstance(task, str) else task
        path = self.path(task)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return None  # unreadable or torn: rebuilt and rewritten
        try:
            menu = Menu.from_json(data, str(path))
        except MenuError:
            return None
        return menu if menu.key == menu_key(task, self.bins, self.scan) else None

    def save(self, menu: Menu) -> Path:
        path = self.path(Task.from_id(menu.task))
        atomic_write_json(path, menu.to_json(), indent=None)
        return path

    def get(self, task: Task | str) -> Menu:
        task = Task.from_id(task) if isinstance(task, str) else task
        menu = self.cached(task)
        if menu is None:
            menu = build_menu(task, self.bins, self.scan)
            self.save(menu)
        return menu

    def get_many(self, tasks: Iterable[str], workers: int = 1, progress: str | None = None,
                 on_built: Callable[[Menu], None] | None = None,
                 backend: Backend | None = None) -> dict[str, Menu]:
        """Menus of ``tasks``, building the missing ones over ``workers`` processes. Each
        is saved as soon as it is built, so an interrupted call keeps what it finished."""
        out: dict[str, Menu] = {}
        missing = []
        for tid in tasks:
            menu = self.cached(tid)
            if menu is None:
                missing.append(Task.from_id(tid).id)
            else:
                out[menu.task] = menu
        if missing:
            for _, menu in progress_map(_build, [(t, self.bins, self.scan) for t in missing], workers=workers,
                                        progress=progress, chunksize=1, backend=backend):
                self.save(menu)
                out[menu.task] = menu
                if on_built is not None:
                    on_built(menu)
        return out


def _build(item: tuple[str, int, str]) -> Menu:
    return build_menu(*item)
