"""What the language-model agent is shown: the task, the menu, and feedback after each attempt.

The conditions are the Q&A benchmark's (`simpatterns.qa.context`), built by
the same code: the same object table, frame selection, image parts,
annotation text and summary request; ``FeedbackOptions`` extends its
``ContextOptions`` (budget, frame rate, images, summary length).

**The task message** (every condition): the goal in words, the object table
(id, name, colour, shape, static or dynamic, size and initial centre in
pixels: what the paper gives the model in every condition), the initial
scene as an image (``scene_view`` "image" or "objects+image"), and the menu.

**Feedback conditions** (after each attempt; paper §5.1, Figure 9):

| condition | the model is told the outcome, plus |
|---|---|
| ``outcome`` | nothing more (a lower bound; Q&A's ``objects``) |
| ``frames`` | frames of the rollout (``fps``, at most ``max_images``), as image parts |
| ``annotation`` | the rollout's annotation (the pattern timeline, `annotate.text.timeline_text`) |
| ``frames+annotation`` | both |
| ``state`` | the raw numbers (positions, velocities, contacts), cut to the annotation's budget |
| ``summary`` | a summary of the annotation the model wrote first, in a separate request |

Images are OpenAI content parts (``{"type": "image_url", "image_url":
{"url": "data:image/png;base64,..."}}``), which vLLM-served vision models
accept.

**History** (KnotGym's prompting modes): ``full`` keeps every earlier
attempt and its feedback in the conversation; ``windowed`` the last
``window`` of them, plus one line per earlier attempt (choice and outcome);
``stateless`` only the last attempt's feedback and nothing of the earlier
ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from simpatterns.qa.context import (
    CONDITIONS,
    ContextOptions,
    evidence_parts,
    image_part,
    object_table,
    render_png,
    summary_messages,
    text_part,
)
from simpatterns.simulators.phyre import Scene, simulate
from simpatterns.trace import Trace

FEEDBACK = ("outcome", "frames", "annotation", "frames+annotation", "state", "summary")
HISTORY = ("stateless", "windowed", "full")
SCENE_VIEWS = ("objects", "image", "objects+image")
CHOICE_PREFIX = "CHOICE:"
_CHOICE_RE = re.compile(r"CHOICE\s*[:=]\s*\**\s*\[?\s*([A-Za-z]?\s*\d+)", re.IGNORECASE)
assert set(FEEDBACK) - {"outcome"} <= set(CONDITIONS)

SYSTEM_PROMPT = (
    "You solve 2D physics puzzles. A puzzle is a scene of rigid bodies under gravity (y points up, "
    "units are pixels of a 256 x 256 scene). You act once per attempt: you place a red ball, given by its "
    "centre (x, y) and radius r, and the world runs. Choose only from the listed actions. "
    f"End your answer with one line '{CHOICE_PREFIX} <id>', e.g. '{CHOICE_PREFIX} A12'."
)


@dataclass(frozen=True)
class FeedbackOptions(ContextOptions):
    """The Q&A conditions' options (smaller defaults: a conversation holds many rollouts) and the agent's."""

    budget_chars: int = 3000  # annotation (and raw state) text per attempt
    fps: float = 1.0  # frames per second of rollout shown in the frames conditions
    max_images: int = 8
    summary_sentences: int = 6
    feedback: str = "annotation"
    history: str = "full"
    window: int = 3  # attempts kept with their feedback in "windowed"
    scene_view: str = "objects"

    def __post_init__(self) -> None:
        for name, value, allowed in (("feedback", self.feedback, FEEDBACK), ("history", self.history, HISTORY),
                                     ("scene_view", self.scene_view, SCENE_VIEWS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        if self.window < 1 or self.max_images < 1 or self.budget_chars < 200 or not self.fps > 0:
            raise ValueError("window and max_images must be >= 1, budget_chars >= 200, fps > 0")

    @property
    def shows_frames(self) -> bool:
        return self.feedback in ("frames", "frames+annotation")

    @property
    def shows_annotation(self) -> bool:
        return self.feedback in ("annotation", "frames+annotation", "summary")

    @property
    def condition(self) -> str:
        """The Q&A condition this feedback is (``outcome`` shows what ``objects`` does: nothing more)."""
        return "objects" if self.feedback == "outcome" else self.feedback


# ------------------------------------------------------------------ the task
def scene_table(scene: Scene) -> str:
    """The Q&A object table of the scene before it runs (walls included, as in every Q&A condition)."""
    return object_table(simulate(scene, None, max_steps=0).trace, recording=False)


def goal_text(scene: Scene) -> str:
    if scene.goal_names is None:
        raise ValueError(f"scene {scene.template or '?'} has no goal")
    a, b = scene.goal_names
    return f"Goal: make the {a} touch the {b}, and keep them touching for 3 seconds."


def task_message(scene: Scene, menu_text: str, options: FeedbackOptions, budget: int) -> list[dict[str, Any]]:
    """Content parts of the first user message."""
    head = [
        f"Task (template {scene.template}, variant {scene.variant}): {scene.description}.",
        goal_text(scene),
        f"You have at most {budget} attempts; after each one you are told what happened.",
    ]
    parts = [text_part("\n".join(head))]
    if options.scene_view in ("objects", "objects+image"):
        parts.append(text_part(scene_table(scene)))
    if options.scene_view in ("image", "objects+image"):
        parts.append(text_part("The initial scene:"))
        parts.append(image_part(render_png(simulate(scene, None, max_steps=0).trace, 0, options.image_size)))
    parts.append(text_part("Actions (red ball centre x, y and radius r, in px):\n" + menu_text))
    return parts


# ------------------------------------------------------------------ feedback
def feedback_parts(trace: Trace, options: FeedbackOptions, annotation_text: str | None = None,
                   summary: str | None = None) -> list[dict[str, Any]]:
    """What the feedback condition shows of a rollout beyond its outcome (`qa.context.evidence_parts`)."""
    return evidence_parts(options.condition, trace, options,
                          (lambda: annotation_text) if annotation_text is not None else None, summary)


def outcome_line(number: int | None, choice: str | None, status: str, reason: str = "",
                 duration_s: float | None = None) -> str:
    what = f"Attempt {number}" if number is not None else "Your answer"
    on = f" ({choice})" if choice else ""
    if status == "solved":
        return f"{what}{on}: SOLVED."
    if status == "wasted":
        return f"{what}{on}: wasted ({reason}); it used one attempt."
    if status == "invalid":
        return f"{what}{on}: invalid ({reason}); it did not use an attempt."
    run = f" The rollout ran {duration_s:.1f} s." if duration_s is not None else ""
    return f"{what}{on}: not solved.{run}"


def summary_request_messages(scene: Scene, annotation_text: str, options: FeedbackOptions) -> list[dict[str, Any]]:
    """Step 1 of the summary condition: the model summarises the rollout's annotation (Q&A's request)."""
    return summary_messages(scene_table(scene), annotation_text, options.summary_sentences)


def parse_choice(text: str) -> tuple[str | None, str]:
    """The choice id of a model's answer (its last ``CHOICE: <id>`` line), or (None, why not)."""
    found = _CHOICE_RE.findall(text or "")
    if not found:
        return None, f"no '{CHOICE_PREFIX} <id>' line in the answer"
    raw = re.sub(r"\s+", "", found[-1]).upper()
    return (raw if raw[0].isalpha() else "A" + str(int(raw))), ""


def choice_grammar(ids: Sequence[str]) -> str:
    """GBNF for an answer that is exactly one ``CHOICE: <id>`` line naming a menu choice."""
    return f'root ::= "{CHOICE_PREFIX} " (' + " | ".join(f'"{i}"' for i in ids) + ")\n"


def turn_prompt(tried: Sequence[str]) -> str:
    return f"Choose your next action. End with '{CHOICE_PREFIX} <id>'." if tried else \
        f"Choose your first action. End with '{CHOICE_PREFIX} <id>'."


def seconds(trace: Trace) -> float:
    return float(trace.time[-1]) if trace.num_frames else 0.0

