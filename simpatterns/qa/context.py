"""The conditions: what a model is shown with a question, as chat messages.

Every condition starts with the object table the paper gives in all of them
(id, name, colour, shape, dynamic or static, size, initial centre) and the
visible time span. Then, per condition:

- ``annotation``: the library's annotation as timeline text (`annotate.text`);
- ``frames``: rendered frames at ``fps`` (at most ``max_images``), as OpenAI
  image content parts (``{"type": "image_url", "image_url": {"url":
  "data:image/png;base64,..."}}``), which vLLM-served vision models accept;
- ``frames+annotation``: both;
- ``state``: the raw numbers (positions, velocities, contacts) sampled evenly,
  as many samples as fit the same character budget as the annotation;
- ``summary`` (§5.1): the model first summarises the annotation (one request
  per rollout and visible span), then answers from its summary alone;
- ``objects``: the object table only (a lower bound).

A prediction question shows the trace only up to its cut: frames, numbers and
the annotation, which is recomputed on the truncated trace (`views.truncate`).

The language-model agent (`simpatterns.agents`) shows its rollouts under the
same conditions with the same pieces (`object_table`, `evidence_parts`,
`merge_parts`, `summary_messages`), so a condition means the same thing on
both benchmarks.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.annotate import Annotation
from simpatterns.detectors.thresholds import THRESHOLDS, Thresholds
from simpatterns.parallel import Backend
from simpatterns.qa.questions import NONE, Question, dataset_root
from simpatterns.qa.views import restrict, truncate
from simpatterns.trace import Trace

CONDITIONS = ("annotation", "frames", "frames+annotation", "state", "summary", "objects")
ANSWER_PREFIX = "ANSWER:"


@dataclass(frozen=True)
class ContextOptions:
    budget_chars: int = 4000  # annotation timeline, and the raw-state text cut to the same size
    fps: float = 2.0  # frames condition: images per second of visible recording
    max_images: int = 12
    image_size: int = 256
    summary_sentences: int = 8
    summary_max_tokens: int = 400

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check_conditions(names: Sequence[str]) -> list[str]:
    out = []
    for n in names:
        n = n.strip()
        if n not in CONDITIONS:
            raise ValueError(f"unknown condition {n!r}; choose from {', '.join(CONDITIONS)}")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("no condition given")
    return out


# ------------------------------------------------------------------ text pieces
def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def object_table(trace: Trace, visible_end_s: float | None = None, recording: bool = True) -> str:
    """Bodies (id, name, colour, shape, dynamic/static, size, initial centre) and the time span
    (``recording=False``: no time span, for a scene not yet run)."""
    w, h = trace.meta.get("world_size", [256, 256])
    lines = [f"Scene: {_num(w)} x {_num(h)} px, x to the right, y up, gravity pulls down; "
             f"{1 / trace.dt:.0f} frames per second."]
    lines.append("Objects (id. name: colour, shape, dynamic or static, size, initial centre (x, y) in px):")
    for i, b in enumerate(trace.bodies):
        size = ", ".join(f"{k} {_num(round(v, 1))}" for k, v in b.size.items())
        kind = "static, scene border" if b.role == "wall" else ("dynamic" if b.dynamic else "static")
        x, y = trace.position[0, i]
        lines.append(f"{i + 1}. {b.name}: {b.color}, {b.shape}, {kind}, {size}, at ({x:.1f}, {y:.1f})")
    total = (trace.num_frames - 1) * trace.dt
    if not recording:
        pass
    elif visible_end_s is None:
        lines.append(f"Recording: 0.00 to {total:.2f} s ({trace.num_frames} frames).")
    else:
        lines.append(f"You see the recording from 0.00 to {visible_end_s:.2f} s only; the simulation goes on after "
                     "that.")
    return "\n".join(lines)


def conventions(th: Thresholds = THRESHOLDS) -> str:
    """The definitions the gold answers use, from the shared thresholds."""
    walls = "the left, right and top boundaries"
    ground = " or ".join(th.ground_names)
    return (
        "Conventions: two objects touch (collide) in a frame when they are in contact in that frame. An object "
        f"is moving when its speed is at least {_num(th.rest_speed)} px/s or it spins at least "
        f"{th.rest_spin:g} rad/s; \"no object moving\" needs every object at rest for at least "
        f"{th.rest_min_seconds:g} s. Free fall: touching nothing for at least {th.free_fall_min_seconds * 60:.0f} "
        f"frames ({th.free_fall_min_seconds:.2f} s). The walls are {walls}; the {ground} is the bottom boundary; "
        "static obstacles are objects that cannot move and are neither walls nor the ground. Percentages are of "
        "all frames of the recording."
    )


SYSTEM_PROMPT = (
    "You answer questions about a recorded 2D rigid-body physics simulation (a PHYRE puzzle: a red ball is "
    "placed in the scene, then everything falls and collides under gravity). {conventions}\n"
    "Think briefly, then end your reply with exactly one line of the form\n"
    f"{ANSWER_PREFIX} <answer>"
)


def answer_format(q: Question) -> str:
    if q.answer_type == "integer":
        return f"Give the answer as a whole number: {ANSWER_PREFIX} <number>"
    if q.answer_type == "percent":
        return f"Give the answer as a number from 0 to 100: {ANSWER_PREFIX} <percentage>"
    if q.answer_type == "yesno":
        return f"Give the answer as yes or no: {ANSWER_PREFIX} <yes or no>"
    none = f", or {NONE}" if q.choices and NONE in q.choices else ""
    if q.answer_type == "object":
        return f"Give the answer as one object name from the object list{none}: {ANSWER_PREFIX} <name>"
    return (f"Give the answer as object names from the object list, separated by commas: "
            f"{ANSWER_PREFIX} <name>, <name>, ...")


def state_text(trace: Trace, budget_chars: int) -> str:
    """Positions, velocities and contacts at evenly spaced frames: as many as fit ``budget_chars``."""
    dyn = np.flatnonzero(trace.dynamic_mask)
    names = trace.names

    def row(f: int) -> str:
        parts = [f"t={trace.time[f] - trace.time[0]:.2f}"]
        for i in dyn:
            (x, y), (vx, vy) = trace.position[f, i], trace.velocity[f, i]
            parts.append(f"{names[i]} ({x:.1f}, {y:.1f}) v ({vx:.1f}, {vy:.1f})")
        pairs = trace.touching(f)
        parts.append("contacts: " + (", ".join(f"{a}-{b}" for a, b in pairs) if pairs else "none"))
        return " | ".join(parts)

    def compose(n: int) -> str:
        frames = np.unique(np.round(np.linspace(0, trace.num_frames - 1, n)).astype(int))
        step = (trace.num_frames - 1) * trace.dt / max(1, n - 1)
        head = (f"Raw state at {len(frames)} evenly spaced frames (every {step:.2f} s): position (x, y) px and "
                "velocity (vx, vy) px/s of every object that can move, and the pairs in contact.")
        return "\n".join([head] + [row(int(f)) for f in frames])

    lo, hi = 1, trace.num_frames
    if len(compose(1)) > budget_chars:
        return compose(1)[:budget_chars]
    while lo < hi:  # most samples that fit
        mid = (lo + hi + 1) // 2
        if len(compose(mid)) <= budget_chars:
            lo = mid
        else:
            hi = mid - 1
    return compose(lo)


def frame_indices(trace: Trace, fps: float, max_images: int) -> list[int]:
    """Frames at ``fps`` over the trace (first and last included), evenly thinned to ``max_images``."""
    duration = (trace.num_frames - 1) * trace.dt
    n = max(2, int(math.floor(duration * fps)) + 1)
    n = min(n, max_images, trace.num_frames)
    return sorted(set(np.round(np.linspace(0, trace.num_frames - 1, n)).astype(int).tolist()))


def image_part(png: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}


def render_png(trace: Trace, frame: int, size: int) -> bytes:
    from simpatterns.simulators.phyre.render import render_frame

    buf = io.BytesIO()
    render_frame(trace, frame, size).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# ------------------------------------------------------------------ content shared with the agents
ANNOTATION_HEADER = "Annotation (events detected in the recording; times in seconds):"
SUMMARY_HEADER = "Summary of the recording (written from its annotation):"
FRAMES_HEADER = "Frames of the recording:"
EVIDENCE = ("annotation", "frames", "frames+annotation", "state", "summary")  # conditions that show a recording


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def evidence_parts(condition: str, trace: Trace, options: ContextOptions,
                   annotation: Callable[[], str] | None = None, summary: str | None = None) -> list[dict[str, Any]]:
    """What ``condition`` shows of one recording besides the object table, as content parts: frames
    (a caption, then "t = ... s" and the image, per frame), the annotation (``annotation()``: its
    timeline text), both, the raw state, or ``summary`` (step 1's text). ``objects`` shows nothing.
    The Q&A questions and the agents' feedback are built from it."""
    if condition == "objects":
        return []
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose from {', '.join(CONDITIONS)}")
    if condition == "state":
        return [text_part(state_text(trace, options.budget_chars))]
    if condition == "summary":
        if summary is None:
            raise ValueError("the summary condition needs the summary of step 1")
        return [text_part(f"{SUMMARY_HEADER}\n{summary.strip()}")]
    parts: list[dict[str, Any]] = []
    if condition in ("frames", "frames+annotation"):
        parts.append(text_part(FRAMES_HEADER))
        for f in frame_indices(trace, options.fps, options.max_images):
            parts.append(text_part(f"t = {f * trace.dt:.2f} s"))
            parts.append(image_part(render_png(trace, f, options.image_size)))
    if condition in ("annotation", "frames+annotation"):
        if annotation is None:
            raise ValueError(f"the {condition} condition needs the annotation text")
        parts.append(text_part(f"{ANNOTATION_HEADER}\n{annotation()}"))
    return parts


def merge_parts(parts: Sequence[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One message's content: plain text when there is no image (any chat server takes it); else the
    parts, with consecutive texts joined except an image's caption (the text right before it)."""
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    out: list[dict[str, Any]] = []
    for k, p in enumerate(parts):
        caption = k + 1 < len(parts) and parts[k + 1]["type"] != "text"
        if p["type"] == "text" and not caption and out and out[-1]["type"] == "text":
            out[-1] = text_part(out[-1]["text"] + "\n\n" + p["text"])
        else:
            out.append(dict(p))
    return out


def summary_messages(table: str, annotation_text: str, sentences: int) -> list[dict[str, Any]]:
    """Step 1 of the summary condition (§5.1): the model summarises an annotation."""
    user = (f"{table}\n\n{ANNOTATION_HEADER}\n{annotation_text}\n\nSummarise what happens in this recording in at "
            f"most {sentences} sentences: which objects move, what touches what and when, and how the objects end "
            "up. Mention times. Do not answer any question.")
    return [{"role": "system", "content": "You summarise recorded 2D physics simulations accurately."},
            {"role": "user", "content": user}]


# ------------------------------------------------------------------ builder
@dataclass
class ContextBuilder:
    """Builds the messages of (question, condition) pairs for one data set, library view and options.

    Annotations come from ``annotations`` (filled by `prepare`): one per rollout
    for the whole trace and one per (rollout, cut) for prediction questions.
    ``visible`` restricts the annotation to those patterns (library studies).
    """

    root: Path
    library: Any  # PatternLibrary
    options: ContextOptions = field(default_factory=ContextOptions)
    visible: list[str] | None = None
    thresholds: Thresholds = THRESHOLDS
    annotations: dict[tuple[str, int | None], Annotation] = field(default_factory=dict)
    _traces: dict[str, Trace] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @classmethod
    def for_questions(cls, questions_path: str | Path, library: Any, **kwargs: Any) -> "ContextBuilder":
        return cls(dataset_root(questions_path), library, **kwargs)

    # ---- data ------------------------------------------------------------------
    def trace(self, rollout: str) -> Trace:
        if rollout not in self._traces:
            self._traces[rollout] = Trace.load(self.root / rollout)
        return self._traces[rollout]

    def visible_trace(self, q: Question) -> Trace:
        tr = self.trace(q.rollout)
        return truncate(tr, q.cut_frame) if q.cut_frame is not None else tr

    def prepare(self, questions: Sequence[Question], conditions: Sequence[str], workers: int = 1,
                progress: bool = False, backend: Backend | None = None) -> None:
        """Annotate every (rollout, cut) the annotation conditions need, in one batch (on ``backend``)."""
        if not any(c in ("annotation", "frames+annotation", "summary") for c in conditions):
            return
        from simpatterns.annotate import annotate_many

        keys = sorted({(q.rollout, q.cut_frame) for q in questions} - set(self.annotations),
                      key=lambda k: (k[0], -1 if k[1] is None else k[1]))
        if not keys:
            return
        items = [truncate(self.trace(r), c) if c is not None else self.trace(r) for r, c in keys]
        anns = annotate_many(items, self.library, workers=workers, progress=progress, backend=backend,
                             trace_ids=[f"{r}@{c}" if c is not None else r for r, c in keys])
        self.annotations.update(zip(keys, anns))

    def annotation(self, q: Question) -> Annotation:
        key = (q.rollout, q.cut_frame)
        if key not in self.annotations:
            self.prepare([q], ["annotation"])
        return restrict(self.annotations[key], self.visible)

    def annotation_text(self, q: Question) -> str:
        from simpatterns.annotate.text import timeline_text

        return timeline_text(self.visible_trace(q), self.annotation(q), self.options.budget_chars)

    # ---- messages --------------------------------------------------------------
    def system(self) -> dict[str, str]:
        return {"role": "system", "content": SYSTEM_PROMPT.format(conventions=conventions(self.thresholds))}

    def table(self, q: Question) -> str:
        return object_table(self.trace(q.rollout), q.window[1] if q.cut_frame is not None else None)

    def ask(self, q: Question) -> str:
        return f"Question: {q.text}\n{answer_format(q)}"

    def summary_request_messages(self, q: Question) -> list[dict[str, Any]]:
        """Step 1 of the summary condition (shared by the questions of one rollout and visible span)."""
        return summary_messages(self.table(q), self.annotation_text(q), self.options.summary_sentences)

    def messages(self, q: Question, condition: str, summary: str | None = None) -> list[dict[str, Any]]:
        """The chat messages of ``q`` under ``condition`` (``summary``: step 1's text, summary condition)."""
        evidence = evidence_parts(condition, self.visible_trace(q), self.options, lambda: self.annotation_text(q),
                                  summary)
        parts = [text_part(self.table(q))] + evidence + [text_part(self.ask(q))]
        return [self.system(), {"role": "user", "content": merge_parts(parts)}]
