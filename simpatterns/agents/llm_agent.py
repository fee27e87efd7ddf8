"""The language-model agent: the task, the menu, one choice per attempt, feedback by condition.

Each attempt is one chat request (`simpatterns.llm`): the system prompt, the
task message (goal, object table and/or the initial scene's image, the menu;
`feedback.task_message`), then the history the condition keeps (earlier
answers and their feedback; `feedback.FeedbackOptions.history`). The model
answers with a ``CHOICE: <id>`` line; an answer without one, or naming a
choice not on the menu, is a wasted attempt, and so is a choice it already
tried (the loop's rule): both are logged with the raw answer. After a
simulated attempt the agent builds the feedback: the outcome, plus frames,
the annotation, the raw state or a summary of the annotation
(`feedback.FEEDBACK`: the Q&A benchmark's conditions, built by its code).

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
    choice_grammar,
    feedback_parts,
    outcome_line,
    parse_choice,
    seconds,
    summary_request_messages,
    task_message,
    turn_prompt,
)
from simpatterns.llm import ChatRequest, LLMClient
from simpatterns.qa.context import merge_parts, text_part


def request_seed(seed: int, *keys: Any) -> int:
    h = hashlib.blake2b("\0".join(map(str, (seed, *keys))).encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


class LLMAgent(Agent):
    """See the module docstring. ``client`` is an `LLMClient` (`simpatterns.llm.make_client`)."""

    name = "llm"

    def __init__(self, client: LLMClient, options: FeedbackOptions = FeedbackOptions(), *, library=None,
                 patterns: Iterable[str] | None = None, temperature: float = 0.0, max_tokens: int = 1024,
                 condition: str | None = None, sample_seed: int = 0, choice_grammar: bool = False):
        """``sample_seed`` != 0 draws other request seeds (repeats of a study); 0 keeps the run's own.
        ``choice_grammar``: constrain each answer to one ``CHOICE: <id>`` line of the menu (no reasoning
        text), where the backend takes grammars; for small models that do not keep the answer format."""
        self.client = client
        self.options = options
        self.needs_trace = options.feedback != "outcome"
        self.patterns = None if patterns is None else set(patterns)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.sample_seed = int(sample_seed)
        self.choice_grammar = bool(choice_grammar)
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
        self._grammar = choice_grammar([c.id for c in context.menu.choices]) if self.choice_grammar else None
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

    def _complete(self, messages: list[dict[str, Any]], max_tokens: int, *key: Any, grammar: str | None = None) -> str:
        req = ChatRequest(messages, temperature=self.temperature, max_tokens=max_tokens, grammar=grammar,
                          seed=request_seed(self.context.seed, self.context.task.id, self.condition, *key,
                                            *((self.sample_seed,) if self.sample_seed else ())))
        completion = self.client.complete_one(req)
        self._requests += 1
        self._tokens += completion.usage.total_tokens
        return completion.text

    def propose(self) -> Proposal | None:
        text = self._complete(self.messages(), self.max_tokens, len(self._turns), grammar=self._grammar)
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
        opts = self.options
        text = summary = None
        if opts.shows_annotation:
            from simpatterns.annotate import annotate
            from simpatterns.annotate.text import timeline_text
            from simpatterns.qa.views import restrict

            ann = restrict(annotate(trace, self.library), self.patterns)
            text = timeline_text(trace, ann, opts.budget_chars)
            if opts.feedback == "summary":
                summary = self._complete(summary_request_messages(self.context.task.scene, text, opts),
                                         opts.summary_max_tokens, "summary", number)
        return feedback_parts(trace, opts, text, summary)

    def finish(self) -> dict[str, Any]:
        return {"requests": self._requests, "tokens": self._tokens}
