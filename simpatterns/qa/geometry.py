"""Where a straight segment first enters a body's shape (for "which object blocks the line").

Bodies are the trace's collision geometry (`Body.parts`: circles and
polygons in the body frame) placed at a frame's position and angle. The
entry point is exact: a circle by the quadratic, a polygon by its edges (or
0 when the segment starts inside it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

EPS = 1e-9


def _world_parts(parts: tuple[dict[str, Any], ...], x: float, y: float, angle: float) -> list[dict[str, Any]]:
    c, s = math.cos(angle), math.sin(angle)
    out = []
    for p in parts:
        if p["kind"] == "circle":
            px, py = p["center"]
            out.append({"kind": "circle", "center": (x + c * px - s * py, y + s * px + c * py), "radius": p["radius"]})
        else:
            v = np.asarray(p["vertices"], dtype=float)
            out.append({"kind": "poly", "vertices": np.column_stack([x + c * v[:, 0] - s * v[:, 1],
                                                                      y + s * v[:, 0] + c * v[:, 1]])})
    return out


def _circle_entry(p: np.ndarray, d: np.ndarray, center: tuple[float, float], r: float) -> float | None:
    f = p - np.asarray(center)
    a, b, c = float(d @ d), 2.0 * float(f @ d), float(f @ f) - r * r
    if c <= 0:
        return 0.0  # starts inside
    disc = b * b - 4 * a * c
    if a < EPS or disc < 0:
        return None
    t = (-b - math.sqrt(disc)) / (2 * a)
    return t if 0.0 <= t <= 1.0 else None


def _inside(pt: np.ndarray, poly: np.ndarray) -> bool:
    x, y = pt
    inside = False
    n = len(poly)
    for k in range(n):
        (x1, y1), (x2, y2) = poly[k], poly[(k + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def _poly_entry(p: np.ndarray, d: np.ndarray, poly: np.ndarray) -> float | None:
    if _inside(p, poly):
        return 0.0
    best = None
    n = len(poly)
    for k in range(n):
        a, b = poly[k], poly[(k + 1) % n]
        e = b - a
        den = d[0] * e[1] - d[1] * e[0]
        if abs(den) < EPS:
            continue
        w = a - p
        t = (w[0] * e[1] - w[1] * e[0]) / den
        u = (w[0] * d[1] - w[1] * d[0]) / den
        if 0.0 <= t <= 1.0 and 0.0 <= u <= 1.0 and (best is None or t < best):
            best = t
    return best


def segment_entry(p0: Any, p1: Any, parts: tuple[dict[str, Any], ...], x: float, y: float,
                  angle: float) -> float | None:
    """Fraction along p0 -> p1 where the segment first meets the body (0..1), or None."""
    p, q = np.asarray(p0, dtype=float), np.asarray(p1, dtype=float)
    d = q - p
    best = None
    for part in _world_parts(parts, x, y, angle):
        if part["kind"] == "circle":
            t = _circle_entry(p, d, part["center"], part["radius"])
        else:
            t = _poly_entry(p, d, part["vertices"])
        if t is not None and (best is None or t < best):
            best = t
    return best
