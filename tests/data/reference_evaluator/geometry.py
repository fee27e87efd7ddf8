# Frozen reference: simpatterns/dsl/geometry.py before issue 32's speed-up (imports made relative). Do not edit.
"""Distances between body surfaces, for the DSL's DISTANCE.

A body's outline is its `Body.parts` (circles and convex polygons in the
body frame) placed at the body's position and angle in each frame. The gap
between two bodies is the smallest distance between their outlines: exact
for separated convex parts (circle to circle, circle to polygon edge, polygon
corner to polygon edge), clamped at 0; the evaluator reads 0 wherever the
trace records a contact. 3-D traces (and bodies without parts) use the
bounding spheres: centre distance minus both bounding radii.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from simpatterns.trace import Trace


class _Outline:
    """One body's parts in its own frame: circle centres and radii, polygon
    corners and the polygon edges (start, direction, 1 / squared length), as x and y columns."""

    __slots__ = ("cx", "cy", "radii", "kx", "ky", "ex", "ey", "dx", "dy", "inv")

    def __init__(self, parts):
        centres, radii, corners, succ = [], [], [], []
        for part in parts:
            if part.get("kind") == "circle":
                centres.append(part["center"])
                radii.append(float(part["radius"]))
            elif part.get("vertices"):
                n, k = len(corners), len(part["vertices"])
                corners += [list(v)[:2] for v in part["vertices"]]
                succ += list(range(n + 1, n + k)) + [n]
        if not centres and not corners:  # no geometry: a point at the origin
            centres, radii = [[0.0, 0.0]], [0.0]
        c = np.array(centres, dtype=float).reshape(-1, 2)
        k = np.array(corners, dtype=float).reshape(-1, 2)
        d = k[np.array(succ, dtype=int)] - k if len(k) else k
        self.cx, self.cy = c[:, 0], c[:, 1]
        self.radii = np.array(radii, dtype=float)
        self.kx, self.ky = k[:, 0], k[:, 1]
        self.ex, self.ey, self.dx, self.dy = k[:, 0], k[:, 1], d[:, 0], d[:, 1]
        self.inv = 1.0 / np.maximum(d[:, 0] ** 2 + d[:, 1] ** 2, 1e-12)


def _in_frame(px: np.ndarray, py: np.ndarray, off: np.ndarray, cos: np.ndarray, sin: np.ndarray):
    """Body-frame points (x [K], y [K]) -> [F, K] x and y in another body's frame, per frame."""
    x = off[:, None, 0] + cos[:, None] * px[None, :] - sin[:, None] * py[None, :]
    y = off[:, None, 1] + sin[:, None] * px[None, :] + cos[:, None] * py[None, :]
    return x, y


def _edge_dist2(x: np.ndarray, y: np.ndarray, o: _Outline) -> np.ndarray:
    """[F, P]: squared distance from points (x, y [F, P], in o's frame) to o's nearest polygon edge."""
    wx = x[..., None] - o.ex  # [F, P, W]
    wy = y[..., None] - o.ey
    t = np.clip((wx * o.dx + wy * o.dy) * o.inv, 0.0, 1.0)
    wx -= t * o.dx
    wy -= t * o.dy
    return (wx * wx + wy * wy).min(axis=-1)


class Outlines:
    """Surface gaps between the bodies of one trace (`gap`)."""

    def __init__(self, trace: "Trace"):
        self.trace = trace
        self.planar = trace.dim == 2
        self.outlines = [_Outline(b.parts) for b in trace.bodies] if self.planar else []
        self.bounding = np.array([b.bounding_radius for b in trace.bodies], dtype=float)

    def gap(self, i: int, j: int, frames: np.ndarray) -> np.ndarray:
        """[F]: the distance between the surfaces of bodies i and j at ``frames`` (>= 0).
        Each body's outline is carried into the other's frame, where its edges are constants."""
        pos = self.trace.position
        if not self.planar:
            c = np.linalg.norm(pos[frames, i] - pos[frames, j], axis=-1)
            return np.maximum(c - self.bounding[i] - self.bounding[j], 0.0)
        out = np.full(len(frames), np.inf)
        pi, pj = pos[frames, i, :2], pos[frames, j, :2]
        ai, aj = self.trace.angle[frames, i], self.trace.angle[frames, j]
        oi, oj = self.outlines[i], self.outlines[j]
        for (p, q), (a, b), (o, other) in ((((pi, pj)), (ai, aj), (oi, oj)), ((pj, pi), (aj, ai), (oj, oi))):
            # o's parts in other's frame: rotate by a - b, shift by the centre offset seen from other
            cb, sb = np.cos(b), np.sin(b)
            rel = p - q
            off = np.stack([cb * rel[:, 0] + sb * rel[:, 1], -sb * rel[:, 0] + cb * rel[:, 1]], axis=1)
            cos, sin = np.cos(a - b), np.sin(a - b)
            if o.radii.size:
                x, y = _in_frame(o.cx, o.cy, off, cos, sin)
                if o is oi and other.radii.size:  # circle to circle, once
                    ddx = x[..., None] - other.cx
                    ddy = y[..., None] - other.cy
                    d = np.sqrt(ddx * ddx + ddy * ddy) - o.radii[:, None] - other.radii[None, :]
                    np.minimum(out, d.reshape(len(frames), -1).min(axis=1), out=out)
                if other.inv.size:
                    np.minimum(out, (np.sqrt(_edge_dist2(x, y, other)) - o.radii).min(axis=1), out=out)
            if o.kx.size and other.inv.size:
                x, y = _in_frame(o.kx, o.ky, off, cos, sin)
                np.minimum(out, np.sqrt(_edge_dist2(x, y, other).min(axis=1)), out=out)
        return np.maximum(out, 0.0)
