"""PHYRE's ``SimulationCache``: the statuses of one fixed list of actions on many tasks, from our simulator.

PHYRE downloads a cache of 100k actions (``build_discrete_action_space(100000, seed=42)``)
simulated on every task. Ours is built here (`build_simulation_cache`) from the same action
list, bit for bit, so cache index ``i`` names the same action as in PHYRE; the statuses are our
simulator's on our tasks. One compressed ``.npz`` per cache folder.
"""

from __future__ import annotations

import os
import pathlib
import zipfile
from typing import Sequence

import numpy as np

from simpatterns.agents.metrics import SimulationStatus
from simpatterns.agents.phyre_compat.action_simulator import ActionSimulator
from simpatterns.agents.tasks import TIER, normalize_task_id
from simpatterns.files import atomic_open, cache_dir
from simpatterns.cli_support import progress_map
from simpatterns.parallel import Backend

ACTION_SEED = 42  # PHYRE's seed for the cached action list
DEFAULT_NUM_ACTIONS = 100000
PHYRE_CACHE_ENV = "PHYRE_CACHE_DIR"
CACHE_FILE_NAME = "simulation_cache.npz"
SOLVED = int(SimulationStatus.SOLVED)
INVALID = int(SimulationStatus.INVALID_INPUT)
NOT_SOLVED = int(SimulationStatus.NOT_SOLVED)
_FIELDS = ("actions", "task_ids", "statuses")


def _get_root_cache_folder() -> pathlib.Path:
    # PHYRE's variable first; else our cache folder (not PHYRE's ~/.cache/phyre: these statuses
    # are our simulator's, and PHYRE's own cache there is for its tasks)
    return pathlib.Path(os.environ.get(PHYRE_CACHE_ENV) or cache_dir("phyre"))


def get_cache_folder(action_size: int) -> pathlib.Path:
    """Where a cache of ``action_size`` actions lives (PHYRE's layout under ``$PHYRE_CACHE_DIR``, else
    under ``phyre`` in `simpatterns.files.cache_dir`)."""
    return _get_root_cache_folder() / "offline_simulation" / str(action_size)


class SimulationCache:
    """Statuses (``int8``: -1 not solved, 0 invalid, 1 solved) of ``action_array`` on each task."""

    def __init__(self, cache_dir: str | os.PathLike):
        path = pathlib.Path(cache_dir)
        if not path.exists():
            raise ValueError(f"Cache folder doesn't exist: {cache_dir}")
        file = path / CACHE_FILE_NAME
        try:
            with np.load(file, allow_pickle=False) as data:
                fields = {k: data[k] for k in _FIELDS if k in data.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{file}: cannot read the simulation cache ({exc})") from None
        missing = [k for k in _FIELDS if k not in fields]
        if missing:
            raise ValueError(f"{file}: not a simulation cache (no field {missing[0]!r})")
        actions, task_ids, statuses = (fields[k] for k in _FIELDS)
        if actions.ndim != 2 or statuses.shape != (len(task_ids), len(actions)):
            raise ValueError(f"{file}: field 'statuses' has shape {statuses.shape}, expected "
                             f"({len(task_ids)}, {len(actions)}) (tasks x actions)")
        self._action_array = actions
        self._statuses_per_task = {str(t): s for t, s in zip(task_ids, statuses)}

    def __len__(self) -> int:
        return len(self._action_array)

    @property
    def action_array(self) -> np.ndarray:
        """The actions, ``(cache_size, action_dim)``."""
        return self._action_array

    def load_simulation_states(self, task_id: str) -> np.ndarray:
        """The statuses of every cached action on ``task_id``."""
        if task_id not in self._statuses_per_task:
            raise KeyError(f"task {task_id} is not in the simulation cache ({len(self._statuses_per_task)} tasks)")
        return self._statuses_per_task[task_id]

    @property
    def task_ids(self) -> frozenset[str]:
        return frozenset(self._statuses_per_task)

    def get_sample(self, task_ids: Sequence[str] | None = None, num_actions: int | None = None) -> dict:
        """``{'task_ids', 'actions': (num_actions, dim), 'simulation_statuses': (tasks, num_actions)}``
        for the first ``num_actions`` cached actions (all by default) on ``task_ids`` (all by default)."""
        if task_ids is None:
            task_ids = self.task_ids
        if num_actions is None:
            num_actions = len(self)
        if num_actions > len(self):
            raise ValueError(f"Requested more actions ({num_actions}) than exists in the cache ({len(self)}).")
        statuses = np.array([self.load_simulation_states(t)[:num_actions] for t in task_ids])
        return dict(task_ids=task_ids, actions=self._action_array[:num_actions], simulation_statuses=statuses)


def _task_statuses(item: tuple[str, np.ndarray]) -> np.ndarray:
    task_id, actions = item
    sim = ActionSimulator([task_id], TIER)
    return np.array([sim.simulate_action(0, a, need_images=False).status for a in actions], dtype=np.int8)


def build_simulation_cache(cache_dir: str | os.PathLike, task_ids: Sequence[str], num_actions: int, *,
                           seed: int = ACTION_SEED, workers: int = 1, progress: str | None = None,
                           backend: Backend | None = None
                           ) -> SimulationCache:
    """Simulate PHYRE's action list (``build_discrete_action_space(num_actions, seed)``) on every
    task and write the cache to ``cache_dir``; returns it loaded. A bad task id (`TaskError`) or
    ``num_actions < 1`` (`ValueError`) stops it before anything is simulated. ``backend``:
    where the simulations run (None: this machine's processes)."""
    task_ids = [normalize_task_id(t) for t in task_ids]
    if num_actions < 1 or not task_ids:
        raise ValueError(f"a simulation cache needs at least one action and one task, got {num_actions} actions "
                         f"and {len(task_ids)} tasks")
    actions = np.array(ActionSimulator(task_ids[:1], TIER).build_discrete_action_space(num_actions, seed))
    statuses = np.zeros((len(task_ids), num_actions), dtype=np.int8)
    for i, row in progress_map(_task_statuses, [(t, actions) for t in task_ids], workers=workers,
                               progress=progress, backend=backend):
        statuses[i] = row
    folder = pathlib.Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_open(folder / CACHE_FILE_NAME, "wb") as fh:
        np.savez_compressed(fh, actions=actions, task_ids=np.array(task_ids, dtype=str), statuses=statuses)
    return SimulationCache(folder)


def get_default_100k_cache(tier: str) -> SimulationCache:
    """The cache of PHYRE's 100k actions in ``get_cache_folder(100000) / tier``, built beforehand with
    ``simpatterns agent phyre-cache`` or `build_simulation_cache` (PHYRE downloads its own; its statuses
    are for its tasks, not ours)."""
    if tier != TIER:
        raise ValueError(f"only the {TIER!r} action tier exists here, not {tier!r}")
    folder = get_cache_folder(DEFAULT_NUM_ACTIONS) / tier
    if not (folder / CACHE_FILE_NAME).exists():
        raise FileNotFoundError(
            f"{folder / CACHE_FILE_NAME}: no simulation cache; build it with `simpatterns agent phyre-cache` "
            f"(or build_simulation_cache({str(folder)!r}, task_ids, {DEFAULT_NUM_ACTIONS}) from "
            "simpatterns.agents.phyre_compat.simulation_cache)")
    return SimulationCache(folder)
