"""The agent benchmark as an Inspect agent task: ``inspect eval simpatterns/agent -T tasks=00000:001``.

One Sample per PHYRE task. The model sees what our language-model agent sees
(`agents.llm_agent.LLMAgent`: the system prompt, the task message with the menu)
and acts through one tool, ``choose(action_id)``; the tool's result is the
feedback condition's content (the outcome line, then frames, annotation, raw
state... of a rollout that did not solve). A reply that calls no tool counts
as our agent's text answer: its ``CHOICE: <id>`` line is the choice, and
without one the attempt is wasted. The attempts go through our episode loop
(`agents.episode.run_episode`: wasted turns and repeats count against the
budget, a solve ends the episode), run in a worker thread that the tool
feeds. The budget is also the task's message limit (two messages per attempt
after the first two). `auccess_metrics` is `agents.metrics.score` over the
episodes: AUCCESS, AUCCESS@budget, success@1, success@budget, mean attempts.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, ToolResult, tool

from simpatterns.agents.episode import (
    Attempt,
    AgentEpisode,
    Proposal,
    TaskContext,
    run_episode,
)
from simpatterns.agents.feedback import (
    SYSTEM_PROMPT,
    FeedbackOptions,
    parse_choice,
    task_message,
    turn_prompt,
)
from simpatterns.agents.llm_agent import LLMAgent
from simpatterns.agents.menu import DEFAULT_BINS, Menu, MenuStore
from simpatterns.agents.metrics import score as score_episodes
from simpatterns.agents.runner import episode_rng
from simpatterns.agents.tasks import Task as PhyreTask
from simpatterns.integrations.inspect.messages import to_inspect
from simpatterns.integrations.questions import as_list_text
from simpatterns.qa.context import merge_parts, text_part

TOOL_NOTE = ("Make each attempt by calling the tool `choose` with the id of one listed action; its result says "
             "what happened.")
CONDITION = "inspect"


class ToolAgent(LLMAgent):
    """Our language-model agent with the model outside: `propose` waits for the tool's choice,
    `observe` hands the attempt and its feedback parts back (built by `LLMAgent.observe`)."""

    def __init__(self, options: FeedbackOptions, library: Any = None):
        super().__init__(client=None, options=options, library=library, condition=CONDITION)  # type: ignore[arg-type]
        self.inbox: queue.Queue[Proposal | None] = queue.Queue()
        self.outbox: queue.Queue[tuple[Attempt, list[dict[str, Any]]]] = queue.Queue()

    def propose(self) -> Proposal | None:
        return self.inbox.get()

    def observe(self, attempt: Attempt) -> None:
        super().observe(attempt)
        self.outbox.put((attempt, self._turns[-1]["feedback"]))


class EpisodeThread:
    """One episode of `run_episode` in a worker thread, fed one proposal at a time."""

    def __init__(self, context: TaskContext, options: FeedbackOptions, library: Any = None):
        self.agent = ToolAgent(options, library)
        self.episode: AgentEpisode | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(context,), daemon=True)
        self._thread.start()

    def _run(self, context: TaskContext) -> None:
        try:
            self.episode = run_episode(self.agent, context, CONDITION)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the event loop by `submit` / `finish`)
            self.error = exc
        finally:
            self.agent.outbox.put(None)  # type: ignore[arg-type]  # wakes a waiting submit

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def _submit(self, proposal: Proposal) -> tuple[Attempt, list[dict[str, Any]]] | None:
        if self.done:
            return None
        self.agent.inbox.put(proposal)
        return self.agent.outbox.get()

    async def submit(self, proposal: Proposal) -> tuple[Attempt, list[dict[str, Any]]] | None:
        """The attempt and its feedback parts; None when the episode is already over."""
        got = await anyio.to_thread.run_sync(self._submit, proposal)
        if self.error is not None:
            raise self.error
        return got

    def finish(self) -> AgentEpisode:
        """End the episode (the model stopped: it gave up) and return its record."""
        if not self.done:
            self.agent.inbox.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.episode is not None
        return self.episode


def _feedback_content(got: tuple[Attempt, list[dict[str, Any]]] | None) -> Any:
    if got is None:
        return "The episode is over: no attempts are left or the task is solved."
    attempt, parts = got
    return merge_parts(parts if attempt.status == "solved" else parts + [text_part(turn_prompt(["x"]))])


@tool
def choose(episode: EpisodeThread) -> Tool:
    async def execute(action_id: str) -> ToolResult:
        """Try one listed action: place the red ball there and let the world run.

        Args:
          action_id: The id of one listed action, e.g. A12.
        """
        content = _feedback_content(await episode.submit(Proposal(choice=action_id.strip().upper(),
                                                                  raw=f"choose({action_id})")))
        return content if isinstance(content, str) else to_inspect([{"role": "user", "content": content}])[0].content

    return execute


@solver
def play(menus: dict[str, Menu], options: FeedbackOptions, budget: int, seed: int,
         episodes: dict[tuple[str, int], EpisodeThread]) -> Solver:
    """Run one episode: the model calls ``choose`` until the task is solved or the budget is spent."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        tid = str(state.sample_id)
        context = TaskContext(PhyreTask.from_id(tid), menus[tid], budget, seed, episode_rng(seed, tid, CONDITION))
        episode = episodes[(tid, state.epoch)] = EpisodeThread(context, options)
        state.tools = [choose(episode)]
        while not episode.done:
            state = await generate(state, tool_calls="single")
            if state.output.message.tool_calls:
                continue
            text = state.output.completion  # a text answer: our agent's CHOICE line, or a wasted turn
            choice, why = parse_choice(text)
            got = await episode.submit(Proposal(choice=choice, raw=text) if choice else Proposal(wasted=why, raw=text))
            if got is None:
                break
            state.messages.append(to_inspect([{"role": "user", "content": _feedback_content(got)}])[0])
        return state

    return solve


@metric
def auccess_metrics() -> Metric:
    """`agents.metrics.score` over the episodes (PHYRE's AUCCESS, cap 100, and at the budget)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        metas = [s.score.metadata for s in scores if s.score.metadata and "budget" in s.score.metadata]
        if not metas:
            return {}
        budget = int(metas[0]["budget"])
        keys = [f"{m['task']}#{k}" for k, m in enumerate(metas)]  # epochs repeat a task
        result = score_episodes({k: m["solved_at"] for k, m in zip(keys, metas)},
                                {k: m["used"] for k, m in zip(keys, metas)}, budget)
        return {"auccess": result.auccess, f"auccess@{budget}": result.auccess_at[budget],
                "success@1": result.success_at_1, f"success@{budget}": result.success_at_budget,
                "mean_attempts": result.mean_attempts}

    return compute


@scorer(metrics=[auccess_metrics()])
def episode_scorer(episodes: dict[tuple[str, int], EpisodeThread]) -> Scorer:
    """1 when the episode solved its task; the metadata is the episode's record."""

    async def score(state: TaskState, target: Target) -> Score:
        ep = await anyio.to_thread.run_sync(episodes.pop((str(state.sample_id), state.epoch)).finish)
        record = ep.to_json()
        return Score(value=1.0 if ep.solved_at is not None else 0.0,
                     answer=next((a.choice for a in ep.attempts if a.status == "solved"), None),
                     explanation=f"solved at attempt {ep.solved_at}" if ep.solved_at else
                     f"not solved in {ep.used} attempts" + (f" ({ep.stopped})" if ep.stopped else ""),
                     metadata={"task": ep.task, "solved_at": ep.solved_at, "used": ep.used, "budget": ep.budget,
                               "wasted": record["wasted"], "attempts": record["attempts"]})

    return score


def _task_ids(tasks: str | list | None, setup: str | None, fold: int) -> list[str]:
    from simpatterns.agents.folds import get_fold
    from simpatterns.agents.tasks import normalize_task_id

    if tasks:
        return [normalize_task_id(t.strip()) for t in as_list_text(tasks).split(",") if t.strip()]
    if setup:
        return list(get_fold(setup, fold).test)
    raise ValueError("give tasks ('00000:001,00002:017') or an eval setup (setup=ball_within_template, fold=0)")


@task
def agent(tasks: str | list | None = None, setup: str | None = None, fold: int = 0, feedback: str = "annotation",
          history: str = "full", budget: int = 10, bins: int = DEFAULT_BINS, scan: str = "full",
          menu_cache: str | None = None, seed: int = 0, temperature: float = 0.0, max_tokens: int = 1024) -> Task:
    """The agent benchmark: ``tasks`` (comma-separated ids) or the test tasks of ``setup`` and ``fold``
    (use Inspect's ``--limit`` for a few); ``feedback``: outcome, frames, annotation,
    frames+annotation or state; ``budget``: attempts per task (also the message limit); the
    menu's ``bins``, ``scan`` and ``menu_cache`` as in `simpatterns agent eval`."""
    if feedback == "summary":
        raise ValueError("feedback 'summary' needs a second model request per attempt; use `simpatterns agent "
                         "eval` for it")
    options = FeedbackOptions(feedback=feedback, history=history)
    ids = _task_ids(tasks, setup, fold)
    store = MenuStore(menu_cache, bins, scan)
    menus = {tid: store.get(tid) for tid in ids}
    samples = []
    for tid in ids:
        scene = PhyreTask.from_id(tid).scene
        user = merge_parts(task_message(scene, menus[tid].text(), options, budget) + [text_part(turn_prompt([]))])
        samples.append(Sample(id=tid, input=to_inspect([{"role": "system", "content": f"{SYSTEM_PROMPT} {TOOL_NOTE}"},
                                                         {"role": "user", "content": user}]),
                              target="SOLVED", metadata={"template": scene.template, "variant": scene.variant,
                                                         "choices": len(menus[tid]), "solving": len(menus[tid].solving)}))
    episodes: dict[tuple[str, int], EpisodeThread] = {}
    return Task(dataset=MemoryDataset(samples, name="simpatterns-agent"),
                solver=play(menus, options, budget, seed, episodes),
                scorer=episode_scorer(episodes),
                message_limit=2 + 2 * budget,
                config=GenerateConfig(temperature=temperature, max_tokens=max_tokens, parallel_tool_calls=False),
                metadata={"feedback": feedback, "history": history, "budget": budget, "bins": bins, "scan": scan})
