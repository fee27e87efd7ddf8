"""What a viewer page shows, as plain JSON-able data built from a trace and its companions.

The page draws the scene from the trace's own geometry (`Body.parts`), so
only body positions and angles travel per frame. Frames are decimated for
drawing only (`DrawFrames`: at most ``max_frames`` rows, the last frame
always kept); events are never decimated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simpatterns.annotate.plots import event_bodies
from simpatterns.simulators.mujoco.sketch import COLOURS
from simpatterns.simulators.phyre.render import PALETTE
from simpatterns.trace import Episode, Trace

if TYPE_CHECKING:
    from simpatterns.annotation import Annotation
    from simpatterns.dsl import RewardProgram

VIEWS_3D = {"side": (0, 2), "front": (1, 2), "top": (0, 1)}  # projected axes (right, up)
PROGRAM_CHECKPOINTS = 60  # frames at which the program is scored over time


def colour_hex(name: str) -> str:
    """A body colour word as the pictures draw it: PHYRE's palette (`render.PALETTE`, PHYRE's own
    values: its purple is a dark blue, its green a teal), else the 3D sketches' colours."""
    rgb = PALETTE.get(name) or COLOURS.get(name) or (0x55, 0x55, 0x55)
    return "#" + "".join(f"{c:02x}" for c in rgb)


@dataclass(frozen=True)
class DrawFrames:
    """The stored frames the page draws: every ``step``-th, plus the last."""

    frames: np.ndarray

    @classmethod
    def of(cls, num_frames: int, max_frames: int) -> DrawFrames:
        step = max(1, math.ceil(num_frames / max(1, max_frames)))
        frames = np.arange(0, num_frames, step)
        if frames[-1] != num_frames - 1:
            frames = np.append(frames, num_frames - 1)
        return cls(frames)


def _round(a: np.ndarray, digits: int) -> list:
    return np.round(a.astype(float), digits).tolist()


def _per_body(a: np.ndarray, digits: int) -> list:
    """``a[frame, body, ...]`` as one list per body: every drawn frame's value, or a single value
    for a body that never moves (the static scenery, most of a PHYRE scene's bodies)."""
    r = np.round(a.astype(float), digits)
    return [r[:1, i].tolist() if (r[:, i] == r[0, i]).all() else r[:, i].tolist() for i in range(r.shape[1])]


def scene_data(trace: Trace, max_frames: int = 1000) -> dict[str, Any]:
    """Bodies (name, colour, role, parts) and, per body, its position and angle at the drawn frames
    (one value when it never moves)."""
    draw = DrawFrames.of(trace.num_frames, max_frames)
    f = draw.frames
    bodies = [{"name": b.name, "color": b.color, "rgb": colour_hex(b.color), "dynamic": b.dynamic,
               "role": b.role, "shape": b.shape, "parts": list(b.parts)} for b in trace.bodies]
    scale = float(np.abs(trace.position).max()) if trace.position.size else 1.0
    digits = 2 if scale > 20 else 4  # pixels (PHYRE) or metres (MuJoCo)
    out: dict[str, Any] = {
        "dim": trace.dim, "bodies": bodies, "frames": f.tolist(),
        "position": _per_body(trace.position[f], digits), "angle": _per_body(trace.angle[f], 4),
    }
    if trace.dim == 2:
        w, h = trace.meta.get("world_size", [256.0, 256.0])
        out["world"] = [float(w), float(h)]
    else:
        out["views"] = {k: list(v) for k, v in VIEWS_3D.items()}
        out["quaternion"] = _per_body(trace.quaternion[f], 4) if trace.quaternion is not None else None
        dyn = trace.dynamic_mask
        p = trace.position[:, dyn] if dyn.any() else trace.position
        out["bounds"] = [_round(p.reshape(-1, 3).min(axis=0), 4), _round(p.reshape(-1, 3).max(axis=0), 4)]
    return out


def event_data(annotation: Annotation, names: Sequence[str]) -> list[dict[str, Any]]:
    """Every event: pattern, frame, length in frames (intervals: the ``frames`` param), the bodies
    it names (params whose value is a body name) and its params."""
    known = set(names)
    out = []
    for e in annotation.events:
        bodies = list(event_bodies(e.params, known))
        length = e.params.get("frames")
        length = int(length) if isinstance(length, (int, float)) and not isinstance(length, bool) and length > 0 else 0
        out.append({"pattern": e.pattern, "frame": int(e.frame), "length": length, "bodies": bodies,
                    "params": e.params})
    return out


def prefix(trace: Trace, frames: int) -> Trace:
    """The rollout cut after its first ``frames`` stored frames, its horizon kept (so a reward
    program's time windows mean the same) and nothing assumed about what follows; the trace
    itself when nothing is cut (what is known after its last frame still holds)."""
    if frames >= trace.num_frames:
        return trace
    rows = trace.contact_frame < frames
    meta = dict(trace.meta, horizon=trace.horizon, stopped=None)
    return Trace(
        bodies=trace.bodies, time=trace.time[:frames], position=trace.position[:frames],
        angle=trace.angle[:frames], velocity=trace.velocity[:frames],
        angular_velocity=trace.angular_velocity[:frames], contact_frame=trace.contact_frame[rows],
        contact_a=trace.contact_a[rows], contact_b=trace.contact_b[rows], contact_point=trace.contact_point[rows],
        contact_normal=trace.contact_normal[rows], contact_impulse=trace.contact_impulse[rows],
        events=[e for e in trace.events if e.frame < frames], meta=meta,
        quaternion=None if trace.quaternion is None else trace.quaternion[:frames],
    )


def program_data(program: RewardProgram, trace: Trace, annotation: Annotation | None) -> dict[str, Any]:
    """The program's verdict (what ``reward eval --explain`` prints), its success and each
    clause's score on the rollout cut at checkpoint frames, and the frame that decided each
    clause: the first frame at which the clause, on the rollout cut there, is determined (no later
    frame could change it) and has its final success (bisection between checkpoints); the last
    frame when only the whole rollout decides it (NEVER, a clause about the end)."""
    final = program.evaluate(annotation if annotation is not None and program.covers(annotation) else None,
                             trace, explain=True)
    n = trace.num_frames
    cache: dict[int, Any] = {}

    def at(frame: int):
        if frame not in cache:
            cache[frame] = program.evaluate(None, prefix(trace, frame + 1))
        return cache[frame]

    checkpoints = sorted({round(k * (n - 1) / (PROGRAM_CHECKPOINTS - 1)) for k in range(PROGRAM_CHECKPOINTS)})
    series = [at(f) for f in checkpoints]
    decided = []
    for c, clause in enumerate(final.clauses):
        def settled(r, c=c, want=clause.success) -> bool:
            return r.clauses[c].determined and r.clauses[c].success == want

        ok = [settled(r) for r in series]
        k = len(ok) - 1
        while k > 0 and ok[k - 1]:
            k -= 1
        if not ok[k]:  # only the full rollout (with the given annotation) reaches the verdict
            decided.append(n - 1)
            continue
        lo, hi = (checkpoints[k - 1], checkpoints[k]) if k > 0 else (-1, checkpoints[0])
        while hi - lo > 1:  # lo: the verdict differs; hi: it holds
            mid = (lo + hi) // 2
            if settled(at(mid)):
                hi = mid
            else:
                lo = mid
        decided.append(hi)
    return {
        "text": program.text, "success": final.success, "score": final.score, "determined": final.determined,
        "explain": final.explain_text(),
        "clauses": [{"text": c.text, "success": c.success, "score": c.score, "detail": c.detail,
                     "decided": d} for c, d in zip(final.clauses, decided)],
        "over_time": {"frames": checkpoints, "success": [r.success for r in series],
                      "score": [round(r.score, 4) for r in series],
                      "clauses": [[round(r.clauses[c].score, 4) for r in series] for c in range(len(final.clauses))]},
    }


def episode_data(trace: Trace) -> dict[str, Any]:
    ep: Episode = trace.episode
    return {"frames": ep.frames, "horizon": ep.horizon, "stopped": ep.stopped, "goal": list(ep.goal)}
