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

    __slots__ = ("cx", "cy", "radii", "kx", "ky", "ex", "ey", "dx", "dy", "inv", "round")

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
        # one circle on the body's origin (a ball): its outline does not turn with the body
        self.round = len(radii) == 1 and not len(k) and self.cx[0] == 0 and self.cy[0] == 0


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
    """Surface gaps between the bodies of one trace (`gap`, `least_gap`)."""

    def __init__(self, trace: "Trace"):
        self.trace = trace
        self.planar = trace.dim == 2
        self._outlines: dict[int, _Outline] = {}  # built on first use: a program reads a few bodies
        self._bounding: dict[int, float] = {}

    def outline(self, i: int) -> _Outline:
        out = self._outlines.get(i)
        if out is None:
            out = self._outlines[i] = _Outline(self.trace.bodies[i].parts)
        return out

    def bounding(self, i: int) -> float:
        out = self._bounding.get(i)
        if out is None:
            out = self._bounding[i] = self.trace.bodies[i].bounding_radius
        return out

    def least_gap(self, i: int, j: int, lo: int, hi: int, touching: np.ndarray) -> tuple[float, int]:
        """(the least of `gap` over frames ``lo..hi``, reading 0 where ``touching`` (one per
        frame), and the first frame that has it): the minimum of `gap` over those frames,
        measuring few of them. The centre distance less both bounding radii is a lower bound
        of the gap; only frames where it does not exceed the gap found so far are measured
        (first those where it is least), and of frames that repeat the one before (`gap`
        reads only the centres' offset and the two angles: bodies at rest, or moving
        together), the first."""
        if hi < lo:
            return np.inf, lo
        frames = np.arange(lo, hi + 1)
        if not self.planar or hi == lo or (self.outline(i).round and self.outline(j).round):
            # in 3-D the gap is the bound itself; two balls cost a few operations per frame, less
            # than choosing frames (their bound ties with the gap to the last digits)
            return self._least(i, j, frames, touching)
        pos, angle = self.trace.position, self.trace.angle
        d = pos[lo : hi + 1, i, :2] - pos[lo : hi + 1, j, :2]
        ai, aj = angle[lo : hi + 1, i], angle[lo : hi + 1, j]
        reach = self.bounding(i) + self.bounding(j)
        low = np.sqrt(np.einsum("fd,fd->f", d, d)) - reach
        least = float(low.min())
        if not (np.isfinite(least) and np.isfinite(ai @ aj)):  # a NaN frame: measure them all
            return self._least(i, j, frames, touching)

        def measure(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if idx.size > 8:  # the first of each run of repeated frames
                state = np.column_stack([d[idx], ai[idx], aj[idx], touching[idx]])
                first = np.ones(idx.size, dtype=bool)
                first[1:] = (state[1:] != state[:-1]).any(axis=1)
                idx = idx[first]
            g = self.gap(i, j, frames[idx])
            g[touching[idx]] = 0.0
            return idx, g

        # slack: the bound and the gap round differently, by about 1e-15 of the lengths
        near = touching | (low <= least + 1e-9 * (1.0 + reach + abs(least)))
        idx, g = measure(np.flatnonzero(near))
        m = float(g.min())
        more = np.flatnonzero(~near & (low <= m + 1e-9 * (1.0 + reach + abs(m))))
        if more.size:
            idx2, g2 = measure(more)
            order = np.argsort(np.concatenate([idx, idx2]), kind="stable")
            idx, g = np.concatenate([idx, idx2])[order], np.concatenate([g, g2])[order]
        k = int(np.argmin(g))
        return float(g[k]), lo + int(idx[k])

    def _least(self, i: int, j: int, frames: np.ndarray, touching: np.ndarray) -> tuple[float, int]:
        """`least_gap` measuring every frame."""
        g = self.gap(i, j, frames)
        g[touching] = 0.0
        k = int(np.argmin(g))
        return float(g[k]), int(frames[k])

    def gap(self, i: int, j: int, frames: np.ndarray) -> np.ndarray:
        """[F]: the distance between the surfaces of bodies i and j at ``frames`` (>= 0).
        Each body's outline is carried into the other's frame, where its edges are constants."""
        pos = self.trace.position
        if not self.planar:
            c = np.linalg.norm(pos[frames, i] - pos[frames, j], axis=-1)
            return np.maximum(c - self.bounding(i) - self.bounding(j), 0.0)
        out = np.full(len(frames), np.inf)
        pi, pj = pos[frames, i, :2], pos[frames, j, :2]
        ai, aj = self.trace.angle[frames, i], self.trace.angle[frames, j]
        oi, oj = self.outline(i), self.outline(j)
        if oi.round and oj.round and np.isfinite(ai.sum()):
            # two balls: the general path below reduces to these operations, in this order
            # (its turned offsets of a centre at the origin are the centre offset itself)
            cb, sb = np.cos(aj), np.sin(aj)
            rel = pi - pj
            offx = cb * rel[:, 0] + sb * rel[:, 1]
            offy = -sb * rel[:, 0] + cb * rel[:, 1]
            return np.maximum(np.sqrt(offx * offx + offy * offy) - oi.radii[0] - oj.radii[0], 0.0)
        for (p, q), (a, b), (o, other) in ((((pi, pj)), (ai, aj), (oi, oj)), ((pj, pi), (aj, ai), (oj, oi))):
            if not other.inv.size and not (o is oi and o.radii.size and other.radii.size):
                continue  # nothing of o to measure against other's edges (circle pairs: measured once)
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
