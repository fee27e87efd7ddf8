"""Agents without a language model: random, memory (PHYRE's MEM), oracle, simulated annealing.

- `RandomAgent`: the menu's choices in a uniformly random order, each once
  (without replacement). Its expected score has a closed form
  (`metrics.expected_random_curve`); the sampled agent checks it.
- `MemoryAgent`: PHYRE's MEM. Training counts, for every grid cell, on how
  many training tasks it solved (s) and failed (f) — tasks where the cell is
  invalid count neither — and scores it s / (s + f + 1). At test time it
  tries the cells valid in the task from the highest score down (ties: lower
  cell first). Template-aware as PHYRE's default: when the test tasks'
  templates are all among the training templates (within-template), each
  template gets its own ranking from its own training tasks. It ranks grid
  cells, so it never tries an added stored solution.
- `OracleAgent`: knows which choices solve (from the menu's scan) and tries
  one first: the ceiling of any agent on the menu (PHYRE's oracle likewise
  solves in one attempt whenever its action set holds a solution).
- `AnnealAgent`: our optimizer (`simpatterns.optimize.anneal`) as an agent.
  It anneals a reward program's dense score on the test task itself: every
  sample it draws is a rollout of the task, so every sample is logged as
  one attempt, in order, and it stops once the task is solved. Invalid
  proposals are redrawn by the optimizer and never reach the budget. The
  program is the task's own goal as a dense program by default
  (`simpatterns.envs.scenes.task_program_text`: PHYRE's success, graded by
  how near the goal bodies' outlines come and how long they touch), or any program you give
  (per template or per task; e.g. one synthesized from the task text).
  On the grid (``bins``) it searches the menu's cells; ``bins=None``
  searches the continuous cube.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from simpatterns.agents.episode import Agent, Attempt, Proposal, TaskContext
from simpatterns.agents.menu import NOT_SOLVED, SOLVED, Menu
from simpatterns.agents.tasks import template_of
from simpatterns.trace import Trace


class RandomAgent(Agent):
    """Menu choices in a random order (seeded per task), without replacement."""

    name = "random"

    def start(self, context: TaskContext) -> None:
        super().start(context)
        assert context.menu is not None
        self._order = context.rng.permutation(len(context.menu)).tolist()

    def propose(self) -> Proposal | None:
        if not self._order:
            return None
        return Proposal(choice=self.context.menu.choices[self._order.pop(0)].id)


class OracleAgent(Agent):
    """Tries a solving choice first (the first one on the menu), then the rest in order."""

    name = "oracle"

    def start(self, context: TaskContext) -> None:
        super().start(context)
        menu = context.menu
        assert menu is not None
        if not menu.solving:
            raise ValueError(f"task {menu.task}: the oracle needs a menu with a known solving choice")
        self._order = menu.solving + [k for k in range(len(menu)) if k not in menu.solving]

    def propose(self) -> Proposal | None:
        if not self._order:
            return None
        return Proposal(choice=self.context.menu.choices[self._order.pop(0)].id)


# ------------------------------------------------------------------ memory
@dataclass
class MemoryTable:
    """Per-cell solve and fail counts on training tasks, overall and per template."""

    bins: int
    solved: dict[str, np.ndarray]  # key "*" (all templates) or a template id -> counts per cell
    failed: dict[str, np.ndarray]
    train_tasks: int
    templates: tuple[str, ...]

    def scores(self, key: str) -> np.ndarray:
        s, f = self.solved[key], self.failed[key]
        return s / (s + f + 1.0)

    def ranking(self, key: str) -> list[int]:
        """Cells from the highest score down; ties: lower cell first."""
        sc = self.scores(key)
        return sorted(range(sc.size), key=lambda c: (-sc[c], c))

    def to_json(self) -> dict:
        return {"bins": self.bins, "train_tasks": self.train_tasks, "templates": list(self.templates),
                "solved": {k: v.astype(int).tolist() for k, v in self.solved.items()},
                "failed": {k: v.astype(int).tolist() for k, v in self.failed.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "MemoryTable":
        return cls(int(d["bins"]), {k: np.asarray(v, dtype=np.float64) for k, v in d["solved"].items()},
                   {k: np.asarray(v, dtype=np.float64) for k, v in d["failed"].items()}, int(d["train_tasks"]),
                   tuple(d["templates"]))


def train_memory(menus: Iterable[Menu]) -> MemoryTable:
    """Count, per grid cell, the training tasks it solved and failed (full-scan menus)."""
    menus = list(menus)
    if not menus:
        raise ValueError("the memory agent needs training tasks")
    bins = menus[0].bins
    n = bins**3
    keys = ["*"] + sorted({template_of(m.task) for m in menus})
    solved = {k: np.zeros(n) for k in keys}
    failed = {k: np.zeros(n) for k in keys}
    for m in menus:
        if m.bins != bins:
            raise ValueError(f"training menus mix {bins} and {m.bins} bins")
        if not m.known:
            raise ValueError(f"task {m.task}: the memory agent trains on full-scan menus (scan='full')")
        for key in ("*", template_of(m.task)):
            for k, c in enumerate(m.choices):
                if c.cell is None:
                    continue  # an added stored solution is not a grid cell
                if m.solved[k] == SOLVED:
                    solved[key][c.cell] += 1
                elif m.solved[k] == NOT_SOLVED:
                    failed[key][c.cell] += 1
    return MemoryTable(bins, solved, failed, len(menus), tuple(keys[1:]))


class MemoryAgent(Agent):
    """PHYRE's MEM over grid cells (see the module docstring)."""

    name = "memory"

    def __init__(self, table: MemoryTable, template_aware: bool = True, test_templates: Iterable[str] = ()):
        self.table = table
        tests = set(test_templates)
        # PHYRE: per-template agents when the test templates are exactly the training ones
        self.per_template = template_aware and bool(tests) and tests <= set(table.templates)
        self._rankings: dict[str, list[int]] = {}

    def _ranking(self, template: str) -> list[int]:
        key = template if self.per_template else "*"
        if key not in self._rankings:
            self._rankings[key] = self.table.ranking(key)
        return self._rankings[key]

    def start(self, context: TaskContext) -> None:
        super().start(context)
        menu = context.menu
        assert menu is not None
        if menu.bins != self.table.bins:
            raise ValueError(f"memory trained on {self.table.bins} bins, menu of {menu.task} has {menu.bins}")
        by_cell = {c.cell: c.id for c in menu.choices if c.cell is not None}
        # cells invalid in this task are skipped: PHYRE's evaluator ignores them without cost
        self._queue = [by_cell[c] for c in self._ranking(context.task.template) if c in by_cell]

    def propose(self) -> Proposal | None:
        return Proposal(choice=self._queue.pop(0)) if self._queue else None


# ------------------------------------------------------------------ annealing
def task_success(trace: Trace) -> bool:
    """PHYRE's success of a rollout (the annealer's stopping test)."""
    return bool(trace.success)


ProgramSource = Callable[[str, object], str]  # (task id, scene) -> reward program text


def program_for(programs: Mapping[str, str] | None = None) -> ProgramSource:
    """Program lookup: ``programs`` by task id, then by template id, else the task's own
    goal as a dense program (`simpatterns.envs.scenes.task_program_text`)."""

    def lookup(task_id: str, scene) -> str:
        if programs:
            for key in (task_id, template_of(task_id)):
                if key in programs:
                    return programs[key]
        from simpatterns.envs.scenes import task_program_text

        return task_program_text(scene)

    return lookup


class AnnealAgent(Agent):
    """Simulated annealing of a reward program on the test task; each sample is an attempt."""

    name = "anneal"
    uses_menu = True  # its grid is the menu's grid, so outcomes of cells are read from the menu

    def __init__(self, programs: Mapping[str, str] | None = None, bins: int | None = -1, config=None,
                 library: list | None = None):
        """``bins``: -1 = the menu's grid, None = continuous, else a grid of its own."""
        from simpatterns.optimize import AnnealConfig

        self.programs = dict(programs or {})
        self.bins = bins
        self.config = config or AnnealConfig()
        self.library = library

    def start(self, context: TaskContext) -> None:
        from simpatterns.optimize import Objective, anneal

        super().start(context)
        self._next = 0
        scene = context.task.scene
        program = program_for(self.programs)(context.task.id, scene)
        objective = Objective(scene, program=program, reward="score", goal=task_success, library=self.library,
                              stop_when_settled=True)
        bins = (context.menu.bins if context.menu is not None else None) if self.bins == -1 else self.bins
        seed = int(context.rng.integers(2**31))
        try:
            result = anneal(objective, context.budget, seed=seed, config=self.config, bins=bins,
                            stop_on_success=False, stop_on_goal=True, keep_trace=False)
        except RuntimeError as exc:  # no valid proposal at all
            self._plan, self._why = [], str(exc)
            return
        # the optimizer already ran these rollouts on this task: they are the attempts, in order
        self._plan = [(e.action, e.goal_success, e.score) for e in result.evaluations]
        self._why = ""

    def propose(self) -> Proposal | None:
        if self._next >= len(self._plan):
            return None
        action, _, score = self._plan[self._next]
        return Proposal(action=action, info={"score": round(float(score), 4)})

    def observe(self, attempt: Attempt) -> None:
        _, goal, _ = self._plan[self._next]
        self._next += 1
        if attempt.status in ("solved", "not_solved") and (attempt.status == "solved") != goal:
            raise RuntimeError(f"task {self.context.task.id}: the annealer's rollout of {attempt.action} and the "
                               "loop's disagree on success; the simulator is not deterministic")

    def finish(self) -> dict:
        return {"error": self._why} if self._why else {}
