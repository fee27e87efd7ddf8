"""The language-model agent: the task, the menu, one choice per attempt, feedback by condition.

Each attempt is one chat request (`simpatterns.llm`): the system prompt, the
task message (goal, object table and/or the initial scene's image, the menu;
`feedback.task_message`), then the history the condition keeps (earlier
answers and their feedback; `feedback.FeedbackOptions.history`). The model
answers with a ``CHOICE: <id>`` line; an answer without one, or naming a
choice not on the menu, is a wasted attempt, and so is a choice it already
tried (the loop's rule): both are logged with the raw answer. After a
simulated attempt the agent builds the feedback: the outcome, plus frames,
the annotation or a summary of it (`feedback.FEEDBACK`).

Library studies plug in through ``patterns``: the annotation shown is
restricted to those labels (the library still runs in full, so dependencies
fire as before).

LLM errors (server down, budget spent) propagate: the episode is not
recorded, and the run resumes there.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from simpatterns.agents.episode import Agent, Attempt, Proposal, TaskContext
from simpatterns.agents.feedback import (
    SYSTEM_PROMPT,
    FeedbackOptions,
    frame_parts,
    merge_parts,
    outcome_line,
    parse_choice,
    seconds,
    summary_request_messages,
    task_message,
    text_part,
    turn_prompt,
)
from simpatterns.llm import ChatRequest, LLMClient


def request_seed(seed: int, *keys: Any) -> int:
    h = hashlib.blake2b("\0".join(map(str, (seed, *keys))).encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


class LLMAgent(Agent):
    """See the module docstring. ``client`` is an `LLMClient` (`simpatterns.llm.make_client`)."""

    name = "llm"

    def __init__(self, client: LLMClient, options: FeedbackOptions = FeedbackOptions(), *, library=None,
                 patterns: Iterable[str] | None = None, temperature: float = 0.0, max_tokens: int = 1024,
                 condition: str | None = None):
        self.client = client
        self.options = options
        self.needs_trace = options.feedback != "outcome"
        self.patterns = None if patterns is None else set(patterns)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.condition = condition or f"llm/{options.feedback}"
        self._library = library

    @property
    def library(self):
        if self._library is None:
            from simpatterns.detectors.library import PatternLibrary

            self._library = PatternLibrary.builtin()
        return self._library

    # ------------------------------------------------------------ turns
    def start(self, context: TaskContext) -> None:
        super().start(context)
        if context.menu is None:
            raise ValueError("the language-model agent chooses from a menu")
        self._task = task_message(context.task.scene, context.menu.text(), self.options, context.budget)
        self._turns: list[dict[str, Any]] = []  # {"answer", "feedback" (parts), "line"}
        self._requests = 0
        self._tokens = 0

    def messages(self) -> list[dict[str, Any]]:
        """The chat for the next request, under the history mode."""
        opts = self.options
        turns = self._turns
        if opts.history == "full":
            shown = turns
        else:
            shown = turns[-(1 if opts.history == "stateless" else opts.window):]
        first = list(self._task)
        earlier = turns[: len(turns) - len(shown)]
        if earlier and opts.history == "windowed":
            first.append(text_part("Earlier attempts:\n" + "\n".join(t["line"] for t in earlier)))
        msgs: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        if not shown:
            msgs.append({"role": "user", "content": merge_parts(first + [text_part(turn_prompt([]))])})
            return msgs
        msgs.append({"role": "user", "content": merge_parts(first)})
        for t in shown:
            msgs.append({"role": "assistant", "content": t["answer"]})
            msgs.append({"role": "user", "content": merge_parts(t["feedback"] + [text_part(turn_prompt(["x"]))])})
        return msgs

    def _complete(self, messages: list[dict[str, Any]], max_tokens: int, *key: Any) -> str:
        req = ChatRequest(messages, temperature=self.temperature, max_tokens=max_tokens,
                          seed=request_seed(self.context.seed, self.context.task.id, self.condition, *key))
        completion = self.client.complete_one(req)
        self._requests += 1
        self._tokens += completion.usage.total_tokens
        return completion.text

    def propose(self) -> Proposal | None:
        text = self._complete(self.messages(), self.max_tokens, len(self._turns))
        choice, why = parse_choice(text)
        if choice is None:
            return Proposal(wasted=why, raw=text)
        if self.context.menu.index(choice) is None:
            return Proposal(choice=choice, wasted=f"{choice} is not on the menu", raw=text)
        return Proposal(choice=choice, raw=text)

    def observe(self, attempt: Attempt) -> None:
        trace = attempt.trace
        line = outcome_line(attempt.number, attempt.choice, attempt.status, attempt.reason,
                            seconds(trace) if trace is not None else None)
        parts = [text_part(line)]
        if trace is not None and attempt.status == "not_solved":
            parts += self._feedback(trace, attempt.number)
        self._turns.append({"answer": attempt.raw or "", "feedback": parts, "line": line})

    def _feedback(self, trace, number: int | None) -> list[dict[str, Any]]:
        from simpatterns.annotate import annotate
        from simpatterns.annotate.text import timeline_text
        from simpatterns.annotation import Annotation

        opts = self.options
        parts = []
        if opts.shows_frames:
            parts += frame_parts(trace, opts)
        if opts.shows_annotation:
            ann = annotate(trace, self.library)
            if self.patterns is not None:
                ann = Annotation({p: ev for p, ev in ann.pattern_events.items() if p in self.patterns},
                                 ann.num_frames, [p for p in ann.patterns if p in self.patterns], ann.dt,
                                 ann.trace_id, errors={k: v for k, v in ann.errors.items() if k in self.patterns})
            text = timeline_text(trace, ann, opts.budget_chars)
            if opts.feedback == "summary":
                summary = self._complete(summary_request_messages(text, opts), opts.summary_max_tokens,
                                         "summary", number)
                parts.append(text_part("Summary of the rollout:\n" + summary.strip()))
            else:
                parts.append(text_part("Annotation of the rollout (detected events):\n" + text))
        return parts

    def finish(self) -> dict[str, Any]:
        return {"requests": self._requests, "tokens": self._tokens}
