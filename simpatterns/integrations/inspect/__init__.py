"""The Q&A and agent benchmarks as Inspect tasks (``pip install 'simpatterns[inspect]'``).

Inspect loads this module through the ``inspect_ai`` entry point, which registers
``simpatterns/qa`` and ``simpatterns/agent``::

    inspect eval simpatterns/qa -T questions=data/qa --model openai/MODEL
"""

from simpatterns.integrations.inspect.agent import (
    agent,
    auccess_metrics,
    episode_scorer,
)
from simpatterns.integrations.inspect.qa import qa, qa_metrics, qa_scorer

__all__ = ["agent", "auccess_metrics", "episode_scorer", "qa", "qa_metrics", "qa_scorer"]
