"""Pictures of annotations: a timeline plot (PNG) and the captioned rollout GIF.

Timeline plot: one row per pattern and group of bodies its events name
(library order, top to bottom; "touch start: green ball, purple pad"), time
in seconds along x. A bar spans consecutive frames on which the row is
active (an event with an integer ``frames`` param covers that many frames);
a single-frame activation is a vertical tick. Patterns that never fired get
one empty row with a grey label; a pattern whose detector failed shows
"error" in red. With the trace given, the title names the scene and action
and a dashed line marks when the goal was reached.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from simpatterns.annotate.phases import describe_trace
from simpatterns.annotation import Annotation
from simpatterns.annotate.text import activation_span
from simpatterns.files import atomic_open
from simpatterns.trace import Trace, runs_of_true


def event_bodies(params: dict, names: set[str] | None) -> tuple[str, ...]:
    """The bodies an event names: its string params (and list items) that are body names
    (any string param when the names are unknown), in the order given."""
    values = [x for v in params.values() for x in (v if isinstance(v, (list, tuple)) else [v])]
    return tuple(dict.fromkeys(v for v in values if isinstance(v, str) and (names is None or v in names)))


def timeline_rows(annotation: Annotation, names: set[str] | None = None) -> list[tuple[str, tuple[str, ...], list]]:
    """``(pattern, bodies, events)`` per timeline row: library order, then body groups sorted;
    a pattern with no events has one row with no bodies and no events."""
    rows = []
    for pattern in annotation.patterns:
        groups: dict[tuple[str, ...], list] = {}
        for e in annotation.by_pattern(pattern):
            groups.setdefault(event_bodies(e.params, names), []).append(e)
        rows += [(pattern, b, groups[b]) for b in sorted(groups)] or [(pattern, (), [])]
    return rows


def timeline_plot(annotation: Annotation, path: str | os.PathLike, trace: Trace | None = None) -> Path:
    """Write the timeline plot of ``annotation`` as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    path = Path(path)
    if trace is not None:
        names: set[str] | None = set(trace.names)
    else:
        names = {b.name for b in annotation.bodies} if annotation.bodies else None
    rows = timeline_rows(annotation, names)
    n = max(1, len(rows))
    dt = annotation.dt
    duration = max(annotation.num_frames * dt, dt)
    fig = Figure(figsize=(10, 0.9 + 0.28 * n), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    cmap = matplotlib.colormaps["tab10"]
    colour_of = {p: cmap(k % 10) for k, p in enumerate(annotation.patterns)}  # one colour per pattern
    for row, (pattern, _, events) in enumerate(rows):
        y = n - 1 - row
        colour = colour_of[pattern]
        if events:
            active = np.zeros(annotation.num_frames + 1, dtype=bool)
            for e in events:
                start, end = activation_span(e.frame, e.params, annotation.num_frames)
                active[max(start, 0): end + 1] = True
            runs = runs_of_true(active[: annotation.num_frames])
            spans = [(s * dt, (e - s + 1) * dt) for s, e in runs if e > s]
            ticks = [s * dt for s, e in runs if e == s]
            if spans:
                ax.broken_barh(spans, (y - 0.3, 0.6), facecolors=colour)
            if ticks:
                ax.vlines(ticks, y - 0.35, y + 0.35, colors=[colour], linewidth=1.2)
        if pattern in annotation.errors:
            ax.text(duration / 2, y, "error", color="red", va="center", ha="center", fontsize=8)
    ax.set_yticks(range(n))
    labels = [p + (": " + ", ".join(b) if b else "") for p, b, _ in reversed(rows)] or [""]
    ax.set_yticklabels(labels, fontsize=8)
    for tick, (_, _, events) in zip(ax.get_yticklabels(), reversed(rows)):
        if not events:
            tick.set_color("0.55")
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(0, duration * 1.01)
    ax.set_xlabel("time (s)")
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    title = annotation.trace_id or "annotation"
    if trace is not None:
        meta = trace.meta
        title = describe_trace(trace, decimals=2) or title
        solved = meta.get("solved_frame")
        if meta.get("success") and isinstance(solved, int):
            ax.axvline(solved * dt, color="green", linestyle="--", linewidth=1)
            title += f" - goal reached at {solved * dt:.2f} s"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png")
    return path


def frame_captions(annotation: Annotation, frames: list[int], trace: Trace | None = None,
                   max_lines: int = 6) -> list[list[str]]:
    """Per shown frame, the patterns active since the previous shown frame (inclusive
    of this one), as ``"pattern: objects"`` lines in library order, at most
    ``max_lines`` (the last one then says ``+k more``)."""
    names = set(trace.names) if trace is not None else set()
    order = {p: i for i, p in enumerate(annotation.patterns)}
    out: list[list[str]] = []
    bounds = [-1] + list(frames)
    by_frame: dict[int, list] = {}
    for e in annotation.events:
        by_frame.setdefault(e.frame, []).append(e)
    for k, f in enumerate(frames):
        seen: dict[str, tuple[int, int]] = {}
        for g in range(bounds[k] + 1, f + 1):
            for e in by_frame.get(g, []):
                objs = [v for v in e.params.values() if isinstance(v, str) and (not names or v in names)]
                text = e.pattern + (": " + ", ".join(objs) if objs else "")
                seen.setdefault(text, (order.get(e.pattern, len(order)), g))
        lines = sorted(seen, key=lambda t: seen[t])  # library order, like the timeline rows
        if len(lines) > max_lines:
            lines = lines[: max_lines - 1] + [f"+{len(lines) - max_lines + 1} more"]
        out.append(lines)
    return out


def captioned_gif(
    trace: Trace, annotation: Annotation, path: str | os.PathLike, fps: float = 30, stride: int = 2,
    size: int = 256, max_lines: int = 6,
) -> Path:
    """The rollout as a GIF (every ``stride``-th frame, plus the last) with the events active
    at each shown frame (since the previous shown one) captioned under it."""
    from simpatterns.simulators.phyre.render import caption_strip, render_frames

    if trace.dim == 3:  # MuJoCo traces: a side view drawn from the trace alone
        from simpatterns.simulators.mujoco.sketch import render_frames
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    path = Path(path)
    frames = list(range(0, trace.num_frames, stride))
    if frames[-1] != trace.num_frames - 1:
        frames.append(trace.num_frames - 1)
    captions = frame_captions(annotation, frames, trace, max_lines)
    height = max(1, max(len(c) for c in captions))
    images = []
    for f, img, lines in zip(frames, render_frames(trace, frames, size), captions):
        stamp = f"t = {f * trace.dt:.2f} s"
        images.append(caption_strip(img, [stamp] + lines + [""] * (height - len(lines))))
    with atomic_open(path, "wb") as fh:
        images[0].save(fh, format="GIF", save_all=True, append_images=images[1:],
                       duration=int(round(1000.0 / fps)), loop=0)
    return path
