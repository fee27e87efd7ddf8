"""Agents on PHYRE tasks: PHYRE's protocol and metric, baselines, the language-model agent.

- tasks and folds: `Task`, `all_task_ids`, `get_fold` (PHYRE's setups and seeds, on our tasks);
- the metric: `compute_metrics` (PHYRE's dictionary), `auccess`, `score`, `SimulationStatus`;
- menus: `build_menu`, `MenuStore` (the quantised, valid, verified action list a model chooses from);
- the loop: `Agent`, `Proposal`, `Attempt`, `AgentEpisode`, `TaskContext`, `run_episode`;
- agents: `RandomAgent`, `MemoryAgent` (+ `train_memory`), `OracleAgent`, `AnnealAgent`, `LLMAgent`
  (+ `FeedbackOptions`: the Q&A conditions' options, `simpatterns.qa.context`);
- runs: `EvalConfig`, `make_conditions`, `evaluate`, `read_run`, `write_report`;
- library studies: `simpatterns.agents.studies` (`library_curve`, `importance`: the Q&A studies'
  mechanism, scored by AUCCESS);
- `simpatterns.agents.phyre_compat`: PHYRE's own entry points on our simulator.

See docs/guide/agents.md.
"""

from simpatterns.agents.baselines import AnnealAgent, MemoryAgent, MemoryTable, OracleAgent, RandomAgent, train_memory
from simpatterns.agents.episode import Agent, Attempt, AgentEpisode, Proposal, TaskContext, run_episode
from simpatterns.agents.feedback import FEEDBACK, HISTORY, FeedbackOptions
from simpatterns.agents.folds import EVAL_SETUPS, NUM_FOLDS, Fold, get_fold
from simpatterns.agents.llm_agent import LLMAgent
from simpatterns.agents.menu import Choice, Menu, MenuStore, build_menu
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, Scores, SimulationStatus, auccess, compute_metrics, score
from simpatterns.agents.report import summarize, write_report
from simpatterns.agents.runner import Condition, EvalConfig, evaluate, make_conditions, read_run
from simpatterns.agents.tasks import Task, all_task_ids, task_id

__all__ = [
    "Agent", "AnnealAgent", "Attempt", "Choice", "Condition", "EVAL_SETUPS", "EvalConfig", "AgentEpisode", "FEEDBACK",
    "FeedbackOptions", "Fold", "HISTORY", "LLMAgent", "MAX_TEST_ATTEMPTS", "MemoryAgent", "MemoryTable", "Menu",
    "MenuStore", "NUM_FOLDS", "OracleAgent", "Proposal", "RandomAgent", "Scores", "SimulationStatus", "Task",
    "TaskContext", "all_task_ids", "auccess", "build_menu", "compute_metrics", "evaluate", "get_fold",
    "make_conditions", "read_run", "run_episode", "score", "summarize", "task_id", "train_memory", "write_report",
]
