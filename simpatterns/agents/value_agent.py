"""The learned agent: a value model (`simpatterns.value`) ranks the menu, tried in that order.

PHYRE's DQN protocol: score every candidate action of the task with the
trained network, then try them from the best down. Named ``value:PATH`` in
``agent eval --agents`` (PATH: a ``model.pt`` from ``simpatterns value train``).
Needs the ``value`` extra (torch). Workers load the model themselves; a process that
has already run torch should evaluate inline (``-j 1``): a forked worker of it can hang
in torch's OpenMP pool.
"""

from __future__ import annotations

from pathlib import Path

from simpatterns.agents.episode import Agent, Proposal, TaskContext


class ValueAgent(Agent):
    name = "value"

    def __init__(self, model: str | Path):
        from simpatterns.value.rank import Ranker

        self.ranker = Ranker(model)

    def start(self, context: TaskContext) -> None:
        super().start(context)
        menu = context.menu
        assert menu is not None
        order = self.ranker.order(context.task.scene, [c.action for c in menu.choices])
        self._queue = [menu.choices[k].id for k in order]

    def propose(self) -> Proposal | None:
        return Proposal(choice=self._queue.pop(0)) if self._queue else None
