"""Pillow sketches of 3D traces (no model, no OpenGL): the side view, x right, z up.

For captioned GIFs of any 3D trace (``simpatterns annotate --gif``). Each body
part is drawn from the trace alone: balls as discs, boxes as the outline of
their projected corners, other shapes as their bounding disc; ropes as a line
through their beads. Bodies nearer the viewer (smaller y) are drawn last.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from simpatterns.trace import Trace

COLOURS = {
    "red": (0xE0, 0x40, 0x40), "green": (0x40, 0xB0, 0x60), "blue": (0x30, 0x70, 0xE0), "yellow": (0xE8, 0xC8, 0x20),
    "orange": (0xF0, 0x90, 0x30), "purple": (0x80, 0x50, 0xB0), "pink": (0xF0, 0x90, 0xC0), "cyan": (0x30, 0xC0, 0xD0),
    "brown": (0x8B, 0x5A, 0x2B), "black": (0x20, 0x20, 0x20), "white": (0xF0, 0xF0, 0xF0), "gray": (0xA0, 0xA0, 0xA0),
}
_BOX_CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` [..., 3] by the unit quaternion ``q`` (w, x, y, z)."""
    w, u = q[0], q[1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def _view(trace: Trace) -> tuple[float, float, float]:
    """(x min, z min, metres per image side) framing every dynamic body over the whole trace."""
    dyn = trace.dynamic_mask
    p = trace.position[:, dyn] if dyn.any() else trace.position
    lo, hi = p[..., [0, 2]].reshape(-1, 2).min(axis=0), p[..., [0, 2]].reshape(-1, 2).max(axis=0)
    span = float(max(hi - lo)) * 1.3 + 0.1
    centre = (lo + hi) / 2
    return float(centre[0] - span / 2), float(centre[1] - span / 2), span


def render_frames(trace: Trace, frames: Sequence[int] | None = None, size: int = 256) -> list[Image.Image]:
    """Side views of ``frames`` (default: all) as RGB images of ``size`` x ``size``."""
    if trace.dim != 3:
        raise ValueError("sketches are drawn for 3D traces; 2D traces use simpatterns.simulators.phyre.render")
    x0, z0, span = _view(trace)
    scale = size / span
    rope_beads = {i for rope in trace.meta.get("ropes") or [] for i in rope["bodies"]}

    def px(x: float, z: float) -> tuple[float, float]:
        return (x - x0) * scale, size - (z - z0) * scale

    out = []
    for f in (range(trace.num_frames) if frames is None else frames):
        img = Image.new("RGB", (size, size), (255, 255, 255))
        draw = ImageDraw.Draw(img)
        order = sorted((i for i in range(trace.num_bodies) if i not in rope_beads),
                       key=lambda i: -trace.position[f, i, 1])
        for i in order:
            body = trace.bodies[i]
            colour = COLOURS.get(body.color, COLOURS["gray"])
            q, c = trace.quaternion[f, i], trace.position[f, i]
            for part in body.parts:
                centre = c + _rotate(q, np.asarray(part["center"], dtype=float))
                if part["kind"] == "plane":
                    y = px(0.0, centre[2])[1]
                    draw.line([(0, y), (size, y)], fill=colour, width=2)
                elif part["kind"] == "box":
                    local = _BOX_CORNERS * np.asarray(part["half_size"], dtype=float)
                    corners = centre + _rotate(q, _rotate(np.asarray(part["quat"], dtype=float), local))
                    pts = [px(x, z) for x, _, z in corners]
                    hull = _hull(pts)
                    draw.polygon(hull, fill=colour, outline=(60, 60, 60))
                else:
                    r = part["radius"] * scale
                    cx, cy = px(centre[0], centre[2])
                    draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour, outline=(60, 60, 60))
        for rope in trace.meta.get("ropes") or []:
            beads = trace.position[f, rope["bodies"]]
            pts = [px(x, z) for x, _, z in beads] + ([px(beads[0, 0], beads[0, 2])] if rope.get("closed") else [])
            draw.line(pts, fill=COLOURS.get(trace.bodies[rope["bodies"][0]].color, COLOURS["gray"]), width=2)
        out.append(img)
    return out


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Convex hull (monotone chain) of a few 2D points."""
    pts = sorted(set(points))
    if len(pts) < 3:
        return pts

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]
