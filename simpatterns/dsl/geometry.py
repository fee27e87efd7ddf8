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
    corners and, per corner, the index of the next corner around its polygon."""

    __slots__ = ("centres", "radii", "corners", "succ")

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
        self.centres = np.array(centres, dtype=float).reshape(-1, 2)
        self.radii = np.array(radii, dtype=float)
        self.corners = np.array(corners, dtype=float).reshape(-1, 2)
        self.succ = np.array(succ, dtype=int)


def _place(local: np.ndarray, pos: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Body-frame points [K, 2] -> world points [F, K, 2] for F frames."""
    x = pos[:, None, 0] + cos[:, None] * local[None, :, 0] - sin[:, None] * local[None, :, 1]
    y = pos[:, None, 1] + sin[:, None] * local[None, :, 0] + cos[:, None] * local[None, :, 1]
    return np.stack([x, y], axis=-1)


def _to_edges(points: np.ndarray, corners: np.ndarray, succ: np.ndarray) -> np.ndarray:
    """[F, P]: distance from each point [F, P, 2] to the nearest polygon edge (corners [F, W, 2])."""
    a = corners[:, None, :, :]  # [F, 1, W, 2]
    d = corners[:, succ][:, None] - a
    w = points[:, :, None, :] - a  # [F, P, W, 2]
    t = np.clip((w * d).sum(-1) / np.maximum((d * d).sum(-1), 1e-12), 0.0, 1.0)
    e = w - t[..., None] * d
    return np.sqrt((e * e).sum(-1)).min(axis=2)


class Outlines:
    """Surface gaps between the bodies of one trace (`gap`)."""

    def __init__(self, trace: "Trace"):
        self.trace = trace
        self.planar = trace.dim == 2
        self.outlines = [_Outline(b.parts) for b in trace.bodies] if self.planar else []
        self.bounding = np.array([b.bounding_radius for b in trace.bodies], dtype=float)

    def gap(self, i: int, j: int, frames: np.ndarray) -> np.ndarray:
        """[F]: the distance between the surfaces of bodies i and j at ``frames`` (>= 0)."""
        pos = self.trace.position
        if not self.planar:
            c = np.linalg.norm(pos[frames, i] - pos[frames, j], axis=-1)
            return np.maximum(c - self.bounding[i] - self.bounding[j], 0.0)
        placed = [self._placed(k, frames) for k in (i, j)]
        gaps = []
        (ci, ri, pi), (cj, rj, pj) = placed
        oi, oj = self.outlines[i], self.outlines[j]
        if ri.size and rj.size:
            d = np.linalg.norm(ci[:, :, None, :] - cj[:, None, :, :], axis=-1) - ri[:, None] - rj[None, :]
            gaps.append(d.reshape(len(frames), -1))
        for (cp, rp, pp), (_, _, pq), oq in (((ci, ri, pi), placed[1], oj), ((cj, rj, pj), placed[0], oi)):
            if not oq.succ.size:
                continue
            if rp.size:
                gaps.append(_to_edges(cp, pq, oq.succ) - rp[None, :])
            if pp.shape[1]:
                gaps.append(_to_edges(pp, pq, oq.succ))
        out = np.concatenate(gaps, axis=1).min(axis=1)
        return np.maximum(out, 0.0)

    def _placed(self, k: int, frames: np.ndarray):
        o = self.outlines[k]
        pos = self.trace.position[frames, k, :2]
        ang = self.trace.angle[frames, k]
        cos, sin = np.cos(ang), np.sin(ang)
        return _place(o.centres, pos, cos, sin), o.radii, _place(o.corners, pos, cos, sin)
