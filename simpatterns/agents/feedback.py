"""What the language-model agent is shown: the task, the menu, and feedback after each attempt.

Kept apart from the agent so that the feedback conditions can be shared with
the Q&A benchmark's conditions (same names, same image parts) once both
exist side by side.

**The task message** (every condition): the goal in words, the object table
(name, colour, shape, static or dynamic, size and initial centre in pixels:
what the paper gives the model in every condition), the initial scene as an
image (``scene_view`` "image" or "objects+image"), and the menu.

**Feedback conditions** (after each attempt; paper §5.1, Figure 9):

| condition | the model is told the outcome, plus |
|---|---|
| ``outcome`` | nothing more (a lower bound) |
| ``frames`` | frames of the rollout (``fps``, at most ``max_images``), as image parts |
| ``annotation`` | the rollout's annotation (the pattern timeline, `annotate.text.timeline_text`) |
| ``frames+annotation`` | both |
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

import base64
import io
import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from simpatterns.simulators.phyre import Scene, simulate
from simpatterns.simulators.phyre.render import render_frame
from simpatterns.trace import Trace

FEEDBACK = ("outcome", "frames", "annotation", "frames+annotation", "summary")
HISTORY = ("stateless", "windowed", "full")
SCENE_VIEWS = ("objects", "image", "objects+image")
CHOICE_PREFIX = "CHOICE:"
_CHOICE_RE = re.compile(r"CHOICE\s*[:=]\s*\**\s*\[?\s*([A-Za-z]?\s*\d+)", re.IGNORECASE)

SYSTEM_PROMPT = (
    "You solve 2D physics puzzles. A puzzle is a scene of rigid bodies under gravity (y points up, "
    "units are pixels of a 256 x 256 scene). You act once per attempt: you place a red ball, given by its "
    "centre (x, y) and radius r, and the world runs. Choose only from the listed actions. "
    f"End your answer with one line '{CHOICE_PREFIX} <id>', e.g. '{CHOICE_PREFIX} A12'."
)


@dataclass(frozen=True)
class FeedbackOptions:
    feedback: str = "annotation"
    history: str = "full"
    window: int = 3  # attempts kept with their feedback in "windowed"
    scene_view: str = "objects"
    fps: float = 1.0  # frames per second of rollout shown in the frames conditions
    max_images: int = 8
    image_size: int = 256
    budget_chars: int = 3000  # annotation text per attempt
    summary_sentences: int = 6
    summary_max_tokens: int = 400

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ the task
def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 0.05 else f"{v:.1f}"


def object_table(scene: Scene) -> str:
    """One line per body (walls summarised): name, shape, static/dynamic, size, initial centre."""
    bodies = scene.trace_bodies()
    initial = simulate(scene, None, max_steps=0).trace
    lines = ["Objects (initial centre in px):"]
    for i, b in enumerate(bodies):
        if b.role == "wall":
            continue
        x, y = initial.position[0, i]
        size = ", ".join(f"{k} {_fmt(v)}" for k, v in b.size.items())
        lines.append(f"- {b.name}: {b.shape}, {'dynamic' if b.dynamic else 'static'}, {size}, at ({x:.0f}, {y:.0f})")
    lines.append("- walls: ground, left wall, right wall, top wall (static, the scene border)")
    return "\n".join(lines)


def goal_text(scene: Scene) -> str:
    if scene.goal_names is None:
        raise ValueError(f"scene {scene.template or '?'} has no goal")
    a, b = scene.goal_names
    return f"Goal: make the {a} touch the {b}, and keep them touching for 3 seconds."


def png_part(image) -> dict[str, Any]:
    """A PIL image as an OpenAI image content part (PNG data URL)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def task_message(scene: Scene, menu_text: str, options: FeedbackOptions, budget: int) -> list[dict[str, Any]]:
    """Content parts of the first user message."""
    head = [
        f"Task (template {scene.template}, variant {scene.variant}): {scene.description}.",
        goal_text(scene),
        f"You have at most {budget} attempts; after each one you are told what happened.",
    ]
    parts = [text_part("\n".join(head))]
    if options.scene_view in ("objects", "objects+image"):
        parts.append(text_part(object_table(scene)))
    if options.scene_view in ("image", "objects+image"):
        parts.append(text_part("The initial scene:"))
        parts.append(png_part(render_frame(simulate(scene, None, max_steps=0).trace, 0, options.image_size)))
    parts.append(text_part("Actions (red ball centre x, y and radius r, in px):\n" + menu_text))
    return parts


# ------------------------------------------------------------------ feedback
def frame_indices(trace: Trace, fps: float, max_images: int) -> list[int]:
    """Frames at ``fps`` over the rollout (first and last included), at most ``max_images``."""
    step = max(1, int(round(1.0 / (fps * trace.dt))))
    frames = list(range(0, trace.num_frames, step))
    if frames[-1] != trace.num_frames - 1:
        frames.append(trace.num_frames - 1)
    if len(frames) > max_images:  # evenly spaced, ends kept
        idx = [round(k * (len(frames) - 1) / (max_images - 1)) for k in range(max_images)] if max_images > 1 else [0]
        frames = [frames[i] for i in idx]
    return frames


def frame_parts(trace: Trace, options: FeedbackOptions) -> list[dict[str, Any]]:
    frames = frame_indices(trace, options.fps, options.max_images)
    times = ", ".join(f"{f * trace.dt:.1f}" for f in frames)
    return [text_part(f"Frames of the rollout at t = {times} s:")] + [
        png_part(render_frame(trace, f, options.image_size)) for f in frames]


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


def summary_request_messages(annotation_text: str, options: FeedbackOptions) -> list[dict[str, Any]]:
    """Step 1 of the summary condition: the model summarises the annotation."""
    return [
        {"role": "system", "content": "You summarise what happened in 2D physics simulations, from a list of "
                                      "detected events."},
        {"role": "user", "content": (
            f"{annotation_text}\n\nSummarise in at most {options.summary_sentences} sentences what happened in "
            "this rollout: which bodies moved, what hit what and when, and where the goal bodies ended up.")},
    ]


def parse_choice(text: str) -> tuple[str | None, str]:
    """The choice id of a model's answer (its last ``CHOICE: <id>`` line), or (None, why not)."""
    found = _CHOICE_RE.findall(text or "")
    if not found:
        return None, f"no '{CHOICE_PREFIX} <id>' line in the answer"
    raw = re.sub(r"\s+", "", found[-1]).upper()
    return (raw if raw[0].isalpha() else "A" + str(int(raw))), ""


def turn_prompt(tried: Sequence[str]) -> str:
    return f"Choose your next action. End with '{CHOICE_PREFIX} <id>'." if tried else \
        f"Choose your first action. End with '{CHOICE_PREFIX} <id>'."


def content_size(parts: Sequence[dict[str, Any]]) -> int:
    """Characters of text parts (images excluded), for logs."""
    return sum(len(p.get("text", "")) for p in parts)


def merge_parts(parts: Sequence[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Plain text when there is no image (any chat server takes it), else the parts."""
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return list(parts)


def seconds(trace: Trace) -> float:
    return float(trace.time[-1]) if trace.num_frames else 0.0


