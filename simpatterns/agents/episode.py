"""One agent on one task: the attempt loop every agent goes through.

An agent proposes; the loop checks, simulates and tells the agent what
happened, until the task is solved, the budget is spent or the agent has
nothing left to try::

    agent.start(context)              # the task, its menu, a seeded rng, the budget
    while attempts used < budget:
        proposal = agent.propose()    # a menu choice, an action, or a wasted turn; None: give up
        attempt = ...                 # checked and simulated by the loop
        agent.observe(attempt)

What counts against the budget (PHYRE's rules, plus two for language models):

- ``invalid``: the ball overlaps a body or leaves the scene. Not simulated,
  not counted (PHYRE ignores invalid actions); the agent is told why.
- ``wasted``: the agent's turn produced no usable action (an unparsable
  answer, a choice not on the menu), or it repeated an action it already
  tried (the simulator is deterministic, so a repeat cannot solve the task
  and teaches nothing). Counted, not simulated.
- ``solved`` / ``not_solved``: a simulated attempt. Counted.

The outcome of a menu choice whose status the menu knows is read from the
menu; otherwise the action is simulated (in full when the agent reads
rollouts: ``agent.needs_trace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simpatterns.agents.menu import NOT_SOLVED, SOLVED, Menu, task_solved
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, SimulationStatus
from simpatterns.agents.tasks import Task
from simpatterns.simulators.phyre import check_action, simulate
from simpatterns.trace import Trace

STATUSES = ("solved", "not_solved", "wasted", "invalid")
MAX_INVALID = 1000  # invalid proposals in a row before the loop gives up on an agent


@dataclass
class Proposal:
    """What an agent wants to try: a menu ``choice`` id, or an ``action`` (x, y, r) in
    [0, 1]; or ``wasted`` (why its turn produced nothing usable). ``raw`` is the text it
    came from (a model's answer); ``info`` anything worth logging."""

    choice: str | None = None
    action: Sequence[float] | None = None
    wasted: str | None = None
    raw: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Attempt:
    """One turn and its outcome. ``number`` is the attempt's place in the budget
    (None for an invalid one, which does not count)."""

    number: int | None
    status: str
    choice: str | None = None
    action: list[float] | None = None
    reason: str = ""
    repeat_of: int | None = None
    raw: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    trace: Trace | None = field(default=None, repr=False)  # in memory only, when the agent reads rollouts

    @property
    def counted(self) -> bool:
        return self.status != "invalid"

    @property
    def phyre_status(self) -> SimulationStatus:
        if self.status == "solved":
            return SimulationStatus.SOLVED
        if self.status == "invalid":
            return SimulationStatus.INVALID_INPUT
        return SimulationStatus.NOT_SOLVED

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.number, "status": self.status}
        for key in ("choice", "action", "reason", "repeat_of", "raw"):
            v = getattr(self, key)
            if v not in (None, ""):
                out[key] = v
        if self.info:
            out["info"] = self.info
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Attempt":
        return cls(number=d.get("n"), status=d["status"], choice=d.get("choice"), action=d.get("action"),
                   reason=d.get("reason", ""), repeat_of=d.get("repeat_of"), raw=d.get("raw"),
                   info=d.get("info") or {})


@dataclass
class TaskContext:
    """What an agent is given for one task."""

    task: Task
    menu: Menu | None
    budget: int
    seed: int
    rng: np.random.Generator


@dataclass
class AgentEpisode:
    """The record of one agent on one task."""

    condition: str
    seed: int
    task: str
    budget: int
    attempts: list[Attempt]
    stopped: str = ""  # why it ended before solving with budget left ("gave up", "too many invalid")
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return sum(a.counted for a in self.attempts)

    @property
    def solved_at(self) -> int | None:
        for a in self.attempts:
            if a.status == "solved":
                return a.number
        return None

    def count(self, status: str) -> int:
        return sum(a.status == status for a in self.attempts)

    def phyre_log(self) -> list[tuple[str, SimulationStatus]]:
        """This episode as PHYRE's evaluator sees it: (task, status) per attempt, invalid ones included."""
        return [(self.task, a.phyre_status) for a in self.attempts]

    def to_json(self) -> dict[str, Any]:
        return {"condition": self.condition, "seed": self.seed, "task": self.task, "budget": self.budget,
                "solved_at": self.solved_at, "used": self.used, "wasted": self.count("wasted"),
                "invalid": self.count("invalid"), "stopped": self.stopped, "info": self.info,
                "attempts": [a.to_json() for a in self.attempts]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "AgentEpisode":
        return cls(condition=d["condition"], seed=int(d["seed"]), task=d["task"], budget=int(d["budget"]),
                   attempts=[Attempt.from_json(a) for a in d["attempts"]], stopped=d.get("stopped", ""),
                   info=d.get("info") or {})


class Agent:
    """Base class: override `propose`, and `start` / `observe` as needed.

    ``needs_trace``: the agent reads rollouts (feedback), so the loop simulates
    every attempt in full and hands the trace to `observe`. ``uses_menu``: the
    agent chooses from the task's menu (the loop builds it first)."""

    name = "agent"
    needs_trace = False
    uses_menu = True

    def start(self, context: TaskContext) -> None:
        self.context = context

    def propose(self) -> Proposal | None:
        raise NotImplementedError

    def observe(self, attempt: Attempt) -> None:
        pass

    def finish(self) -> dict[str, Any]:
        """Anything about the episode worth keeping in its record (``AgentEpisode.info``)."""
        return {}


def _resolve(proposal: Proposal, menu: Menu | None) -> tuple[str | None, list[float] | None, int | None, str]:
    """(choice id, action, menu index, why wasted) of a proposal."""
    if proposal.wasted:
        return proposal.choice, None, None, proposal.wasted
    if proposal.choice is not None:
        if menu is None:
            return proposal.choice, None, None, f"choice {proposal.choice!r} but this task has no menu"
        k = menu.index(proposal.choice)
        if k is None:
            return proposal.choice, None, None, f"{proposal.choice!r} is not on the menu"
        return menu.choices[k].id, list(menu.choices[k].action), k, ""
    if proposal.action is None:
        return None, None, None, "proposal has neither a choice nor an action"
    try:
        action = [float(v) for v in proposal.action]
    except (TypeError, ValueError):
        return None, None, None, f"action {proposal.action!r} is not three numbers"
    k = menu.index_of_action(action) if menu is not None else None
    return (menu.choices[k].id if k is not None else None), action, k, ""


def run_episode(agent: Agent, context: TaskContext, condition: str | None = None) -> AgentEpisode:
    """Run ``agent`` on one task under the rules in the module docstring."""
    if not 1 <= context.budget <= MAX_TEST_ATTEMPTS:
        raise ValueError(f"budget must be in 1..{MAX_TEST_ATTEMPTS} (PHYRE's cap), got {context.budget}")
    scene = context.task.scene
    menu = context.menu
    agent.start(context)
    attempts: list[Attempt] = []
    tried: dict[tuple[float, ...], int] = {}
    used = 0
    invalid_streak = 0
    stopped = ""
    while used < context.budget:
        proposal = agent.propose()
        if proposal is None:
            stopped = "gave up"
            break
        choice, action, k, wasted = _resolve(proposal, menu)
        attempt = Attempt(None, "", choice=choice, action=action, raw=proposal.raw, info=dict(proposal.info))
        key = tuple(action) if action is not None else None
        if wasted:
            attempt.status, attempt.reason = "wasted", wasted
        elif key in tried:
            attempt.status, attempt.repeat_of = "wasted", tried[key]
            attempt.reason = f"repeats attempt {tried[key]}"
        else:
            reason = check_action(scene, action) if k is None else None  # menu choices are valid
            if reason is not None:
                attempt.status, attempt.reason = "invalid", reason
            elif agent.needs_trace:
                rollout = simulate(scene, action)
                attempt.trace = rollout.trace
                attempt.status = "solved" if rollout.success else "not_solved"
                if k is not None and menu.status(k) == (NOT_SOLVED if rollout.success else SOLVED):
                    raise RuntimeError(f"task {context.task.id}: {choice} gave a different outcome than when "
                                       "its menu was built; the simulator or the variant changed")
            elif k is not None and menu.status(k) in (SOLVED, NOT_SOLVED):
                attempt.status = "solved" if menu.status(k) == SOLVED else "not_solved"
            else:
                attempt.status = "solved" if task_solved(scene, action) else "not_solved"
        if attempt.status == "invalid":
            invalid_streak += 1
        else:
            invalid_streak = 0
            used += 1
            attempt.number = used
            if key is not None and attempt.status != "wasted":
                tried[key] = used
        attempts.append(attempt)
        agent.observe(attempt)
        attempt.trace = None  # the record keeps no rollouts
        if attempt.status == "solved":
            break
        if invalid_streak >= MAX_INVALID:
            stopped = f"{MAX_INVALID} invalid proposals in a row"
            break
    return AgentEpisode(condition or agent.name, context.seed, context.task.id, context.budget, attempts, stopped,
                   agent.finish())
