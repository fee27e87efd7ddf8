"""The knot oracle: crossings of a closed (or open) 3D polyline seen along a
direction, its Gauss code, Reidemeister I/II simplification, and Gauss-code
comparison up to the start point and the direction of travel.

Crossings (`find_crossings`): the polyline's segments are projected onto the
plane perpendicular to ``direction`` (default +z: the top-down camera) and
every pair of non-adjacent segments is tested, vectorised over all pairs.
The tests are half-open (a segment owns its start point, not its end), so a
crossing exactly through a vertex is counted once. Adjacent segments (which
share a vertex) are skipped, as are the two segments that meet at the
closing vertex of a closed curve. A crossing is *ambiguous* when the two
strands' heights there differ by at most ``min_gap`` (which is over?), or
when it lies within ``edge_tol`` of a segment end or on nearly parallel
segments (a tiny rotation of the view would add or remove it). A projection
with an ambiguous crossing is *degenerate*: `diagram` then re-projects along
slightly tilted directions (a fixed sequence, so results are deterministic)
and keeps the first clean one; if none is clean it keeps the first
projection with the ambiguous crossings flagged.

Gauss code (`GaussCode`): walking the curve from vertex 0 in index order,
each crossing is met twice, once over and once under; an entry records the
crossing's label (numbered by first visit, from 1), whether this pass is
over, and the crossing's sign (+1 right-handed, -1 left-handed, from the
projected directions of the two strands: positive when turning the over
strand counter-clockwise by less than half a turn aligns it with the under
strand, seen from the side ``direction`` points to). Written as
``1O+ 2U- 1U+ 2O-``; no crossings is the empty code.

Simplification (`GaussCode.simplify`): Reidemeister I removes a crossing whose
two passes are consecutive (a kink); Reidemeister II removes two crossings
met consecutively on two stretches of the curve, over both times on one
stretch and under both times on the other (with opposite signs: a bigon).
Both are valid on any code from a planar projection, because a loop or a
bigon with no crossing on its edges can hold no other strand of a connected
curve. Moves repeat until none applies. R1/R2 alone do not reduce every
diagram of the unknot (some need R3); `is_unknot` therefore also tries the
other axes' projections, and the tests cross-check its verdict against knot
Floer homology.

Comparison (`GaussCode.canonical`, `same_code`): the code read from any start
point and in either direction of travel is the same diagram; ``canonical``
is the least relabelled rotation of the code and of its reverse, so two codes
are the same diagram iff their canonical forms are equal. ``mirror=True``
also identifies a diagram with its mirror image (over and under swapped,
signs flipped). KnotGym compares code strings read from bead 0 instead
(`GaussCode.text` equality, ``strict`` in the environment).

`pd_code` writes a diagram as a planar-diagram code (KnotTheory's
convention: ``(a, b, c, d)`` with ``a`` the incoming under edge, then
counter-clockwise) for independent invariants (``knot_floer_homology``,
``spherogram``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

Z_UP = (0.0, 0.0, 1.0)
# re-projection tilts (radians about x, then y) tried in order when a view is degenerate
_TILTS = ((0.0, 0.0), (0.013, 0.0), (0.0, 0.017), (-0.019, 0.011), (0.023, -0.029), (-0.031, -0.037),
          (0.05, 0.043), (-0.061, 0.07))


@dataclass(frozen=True)
class Crossing:
    """One crossing of the projection: the over and under segments (segment ``i``
    runs from vertex ``i`` to ``i + 1``), where along them (fraction in [0, 1)),
    the sign, the height gap and whether it is ambiguous."""

    over: int
    under: int
    over_at: float
    under_at: float
    sign: int
    gap: float
    ambiguous: bool = False

    @property
    def over_position(self) -> float:
        """Position along the curve in segment units (segment + fraction)."""
        return self.over + self.over_at

    @property
    def under_position(self) -> float:
        return self.under + self.under_at


Entry = tuple[int, bool, int]  # (label, over, sign)


@dataclass(frozen=True)
class GaussCode:
    """A signed Gauss code: ``entries[k] = (label, over, sign)`` in travel order."""

    entries: tuple[Entry, ...] = ()

    @property
    def num_crossings(self) -> int:
        return len(self.entries) // 2

    def __len__(self) -> int:
        return self.num_crossings

    def __str__(self) -> str:
        return self.text

    @property
    def text(self) -> str:
        """``1O+ 2U- 1U+ 2O-``; the empty string when there are no crossings."""
        return " ".join(f"{lab}{'O' if over else 'U'}{'+' if s > 0 else '-'}" for lab, over, s in self.entries)

    @staticmethod
    def parse(text: str) -> "GaussCode":
        """Read `text` back; raises ValueError naming the bad entry."""
        entries: list[Entry] = []
        for k, tok in enumerate(text.replace(",", " ").split()):
            if len(tok) < 3 or tok[-2] not in "OU" or tok[-1] not in "+-" or not tok[:-2].isdigit():
                raise ValueError(f"Gauss code entry {k + 1} {tok!r}: expected LABEL, O or U, + or - (e.g. 1O+)")
            entries.append((int(tok[:-2]), tok[-2] == "O", 1 if tok[-1] == "+" else -1))
        code = GaussCode(tuple(entries))
        code.check()
        return code

    def check(self) -> None:
        """Each label appears exactly twice, once over and once under, with one sign."""
        seen: dict[int, list[Entry]] = {}
        for e in self.entries:
            seen.setdefault(e[0], []).append(e)
        for lab, es in seen.items():
            if len(es) != 2 or es[0][1] == es[1][1] or es[0][2] != es[1][2]:
                raise ValueError(f"Gauss code crossing {lab}: needs one over and one under pass with the same sign")

    # ------------------------------------------------------------- moves
    def simplify(self) -> "GaussCode":
        """Apply Reidemeister I and II moves until none applies (see the module docstring)."""
        seq = list(self.entries)
        changed = True
        while changed and seq:
            changed = False
            n = len(seq)
            for k in range(n):  # R1: a crossing's two passes are consecutive
                if seq[k][0] == seq[(k + 1) % n][0]:
                    drop = {k, (k + 1) % n}
                    seq = [e for i, e in enumerate(seq) if i not in drop]
                    changed = True
                    break
            if changed:
                continue
            pairs: dict[frozenset[int], list[int]] = {}
            for k in range(n):
                a, b = seq[k], seq[(k + 1) % n]
                if a[1] == b[1] and a[0] != b[0]:
                    pairs.setdefault(frozenset((a[0], b[0])), []).append(k)
            for key, spots in pairs.items():
                overs = {seq[k][1] for k in spots}
                if len(spots) >= 2 and overs == {True, False}:
                    labs = list(key)
                    sign = {e[0]: e[2] for e in seq}
                    if sign[labs[0]] == sign[labs[1]]:
                        continue  # not a bigon of a planar diagram; cannot happen for real projections
                    seq = [e for e in seq if e[0] not in key]
                    changed = True
                    break
        return GaussCode(tuple(seq)).relabelled()

    def relabelled(self) -> "GaussCode":
        """Labels renumbered 1, 2, ... in order of first visit."""
        new: dict[int, int] = {}
        out = []
        for lab, over, s in self.entries:
            if lab not in new:
                new[lab] = len(new) + 1
            out.append((new[lab], over, s))
        return GaussCode(tuple(out))

    def reversed(self) -> "GaussCode":
        """The code read in the opposite direction of travel (signs are unchanged)."""
        return GaussCode(tuple(reversed(self.entries))).relabelled()

    def mirrored(self) -> "GaussCode":
        """The mirror image: over and under swapped, signs flipped."""
        return GaussCode(tuple((lab, not over, -s) for lab, over, s in self.entries))

    def rotated(self, k: int) -> "GaussCode":
        """The code read from its ``k``-th entry."""
        e = self.entries
        return GaussCode(e[k:] + e[:k]).relabelled() if e else self

    def canonical(self, mirror: bool = False) -> tuple[Entry, ...]:
        """The least relabelled rotation of the code and of its reverse (and, with
        ``mirror``, of their mirror images): equal for codes of the same diagram."""
        if not self.entries:
            return ()
        variants = [self, self.reversed()]
        if mirror:
            variants += [v.mirrored() for v in variants]
        n = len(self.entries)
        return min(v.rotated(k).entries for v in variants for k in range(n))

    def same_as(self, other: "GaussCode", mirror: bool = False) -> bool:
        return self.canonical(mirror) == other.canonical(mirror)


def same_code(a: GaussCode, b: GaussCode, mirror: bool = False) -> bool:
    """True when ``a`` and ``b`` are the same diagram read from any start and direction
    (and, with ``mirror``, in a mirror)."""
    return a.same_as(b, mirror)


@dataclass(frozen=True)
class Diagram:
    """One projection of a curve: its crossings in no particular order, the Gauss
    code, the direction it was seen along and whether a re-projection was needed."""

    crossings: tuple[Crossing, ...]
    code: GaussCode
    direction: tuple[float, float, float]
    reprojected: bool = False
    ambiguous: tuple[int, ...] = field(default=())  # indices into crossings

    @property
    def num_crossings(self) -> int:
        return len(self.crossings)

    @property
    def degenerate(self) -> bool:
        return bool(self.ambiguous)


def _basis(direction: Sequence[float]) -> np.ndarray:
    """Rows u, v, w: an orthonormal, right-handed frame with w along ``direction``."""
    w = np.asarray(direction, dtype=np.float64)
    w = w / np.linalg.norm(w)
    helper = np.array([1.0, 0.0, 0.0]) if abs(w[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    if np.allclose(w, [0.0, 0.0, 1.0]):
        return np.eye(3)
    u = np.cross(helper, w)
    u /= np.linalg.norm(u)
    v = np.cross(w, u)
    return np.stack([u, v, w])


def find_crossings(points: np.ndarray, direction: Sequence[float] = Z_UP, *, closed: bool = True,
                   min_gap: float = 1e-9, edge_tol: float = 1e-9) -> list[Crossing]:
    """Every crossing of the projection of ``points`` ``[M, 3]`` along ``direction``
    (see the module docstring); ordered by the earlier segment of each pair."""
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points must be [M, 3], got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("points contain NaN or infinite values")
    q = p @ _basis(direction).T  # [M, 3]: (u, v, height)
    a = q[:, :2]
    b = np.roll(a, -1, axis=0) if closed else a[1:]
    h0 = q[:, 2]
    h1 = np.roll(h0, -1) if closed else h0[1:]
    if not closed:
        a, h0 = a[:-1], h0[:-1]
    n = a.shape[0]
    if n < 3:
        return []
    # candidate pairs: bounding boxes overlap (an n x n test is cheap), non-adjacent, each pair once
    lo, hi = np.minimum(a, b) - edge_tol, np.maximum(a, b) + edge_tol
    near = ((lo[:, None, 0] <= hi[None, :, 0]) & (lo[None, :, 0] <= hi[:, None, 0])
            & (lo[:, None, 1] <= hi[None, :, 1]) & (lo[None, :, 1] <= hi[:, None, 1]))
    near = np.triu(near, k=2)
    if closed:
        near[0, n - 1] = False  # they share the closing vertex
    i, j = np.nonzero(near)
    d = b - a
    r, s = d[i], d[j]
    diff = a[j] - a[i]
    denom = r[:, 0] * s[:, 1] - r[:, 1] * s[:, 0]
    scale = np.abs(r).sum(axis=1) * np.abs(s).sum(axis=1)
    parallel = np.abs(denom) <= 1e-12 * np.maximum(scale, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (diff[:, 0] * s[:, 1] - diff[:, 1] * s[:, 0]) / denom  # along segment i
        u = (diff[:, 0] * r[:, 1] - diff[:, 1] * r[:, 0]) / denom  # along segment j
    hit = ~parallel & (t >= 0) & (t < 1) & (u >= 0) & (u < 1)
    # parallel segments that overlap in the projection: an ambiguous contact, not a crossing
    overlap = parallel & (np.abs(diff[:, 0] * r[:, 1] - diff[:, 1] * r[:, 0]) <= 1e-12 * np.maximum(scale, 1e-300))
    out: list[Crossing] = []
    for k in np.flatnonzero(hit):
        si, sj, ti, uj = int(i[k]), int(j[k]), float(t[k]), float(u[k])
        zi = h0[si] + ti * (h1[si] - h0[si])
        zj = h0[sj] + uj * (h1[sj] - h0[sj])
        over_i = zi > zj
        over, under = (si, sj) if over_i else (sj, si)
        o_at, u_at = (ti, uj) if over_i else (uj, ti)
        do, du = (r[k], s[k]) if over_i else (s[k], r[k])
        sign = 1 if do[0] * du[1] - do[1] * du[0] > 0 else -1
        near_end = min(ti, 1 - ti, uj, 1 - uj) * min(np.linalg.norm(r[k]), np.linalg.norm(s[k])) <= edge_tol
        gap = abs(zi - zj)
        out.append(Crossing(over, under, o_at, u_at, sign, gap, bool(gap <= min_gap or near_end)))
    for k in np.flatnonzero(overlap):
        si, sj = int(i[k]), int(j[k])
        out.append(Crossing(si, sj, 0.0, 0.0, 1, 0.0, True))
    return out


def gauss_code_of(crossings: Iterable[Crossing]) -> GaussCode:
    """The Gauss code of a set of crossings, read from vertex 0 in index order."""
    passes: list[tuple[float, int, bool, int]] = []
    for c in crossings:
        passes.append((c.over_position, id(c), True, c.sign))
        passes.append((c.under_position, id(c), False, c.sign))
    passes.sort(key=lambda x: x[0])
    labels: dict[int, int] = {}
    entries = []
    for _, key, over, sign in passes:
        if key not in labels:
            labels[key] = len(labels) + 1
        entries.append((labels[key], over, sign))
    return GaussCode(tuple(entries))


def _tilted(direction: Sequence[float], ax: float, ay: float) -> np.ndarray:
    cx, sx, cy, sy = math.cos(ax), math.sin(ax), math.cos(ay), math.sin(ay)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    return ry @ rx @ np.asarray(direction, dtype=np.float64)


def diagram(points: np.ndarray, direction: Sequence[float] = Z_UP, *, closed: bool = True,
            min_gap: float = 1e-9, edge_tol: float = 1e-9, reproject: bool = True) -> Diagram:
    """The projection of ``points`` along ``direction``, re-projected along slightly
    tilted directions while it is degenerate (see the module docstring)."""
    first: Diagram | None = None
    for k, (ax, ay) in enumerate(_TILTS if reproject else _TILTS[:1]):
        dirn = _tilted(direction, ax, ay)
        cs = tuple(find_crossings(points, dirn, closed=closed, min_gap=min_gap, edge_tol=edge_tol))
        amb = tuple(n for n, c in enumerate(cs) if c.ambiguous)
        clean = [c for c in cs if not (c.ambiguous and c.gap == 0.0 and c.over_at == 0.0 and c.under_at == 0.0)]
        d = Diagram(cs, gauss_code_of(clean), tuple(float(x) for x in dirn), k > 0, amb)
        if not amb:
            return d
        if first is None:
            first = d
    assert first is not None
    return first


def gauss_code(points: np.ndarray, direction: Sequence[float] = Z_UP, **kwargs) -> GaussCode:
    """The Gauss code of ``points`` seen along ``direction`` (`diagram`'s code)."""
    return diagram(points, direction, **kwargs).code


def num_crossings(points: np.ndarray, direction: Sequence[float] = Z_UP, **kwargs) -> int:
    """Crossings of the projection along ``direction`` (KnotGym's #X for +z)."""
    return diagram(points, direction, **kwargs).num_crossings


def _spiral(n: int) -> tuple[tuple[float, float, float], ...]:
    """``n`` directions spread over the upper half sphere (a golden-angle spiral)."""
    k = np.arange(n) + 0.5
    z = 1.0 - k / n  # (0, 1]: one of each pair of opposite directions is enough
    r = np.sqrt(1.0 - z * z)
    a = k * math.pi * (3.0 - math.sqrt(5.0))
    return tuple((float(x), float(y), float(w)) for x, y, w in zip(r * np.cos(a), r * np.sin(a), z))


# the top view first (what the camera and the tasks use), then the axes, then a spread of others
UNKNOT_DIRECTIONS = (Z_UP, (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)) + _spiral(23)


def is_unknot(points: np.ndarray, directions: Sequence[Sequence[float]] = UNKNOT_DIRECTIONS,
              **kwargs) -> bool:
    """True when some projection of the closed curve simplifies to no crossings by
    Reidemeister I/II moves (a proof that it is the unknot). False: none of the
    tried projections (the top view, the axes and 23 more, stopping at the first
    success) did, so it is knotted or an unknot whose diagrams all need R3 moves."""
    return any(not gauss_code(points, d, **kwargs).simplify().entries for d in directions)


def pd_code(code: GaussCode) -> list[tuple[int, int, int, int]]:
    """The planar-diagram code of a signed Gauss code (see the module docstring);
    edges are numbered from 0, edge ``k`` leaving the ``k``-th pass."""
    n = len(code.entries)
    where: dict[int, dict[bool, int]] = {}
    sign: dict[int, int] = {}
    for k, (lab, over, s) in enumerate(code.entries):
        where.setdefault(lab, {})[over] = k
        sign[lab] = s
    out = []
    for lab in sorted(where):
        p, q = where[lab][False], where[lab][True]
        a, c = (p - 1) % n, p  # under strand: in, out
        j_in, j_out = (q - 1) % n, q  # over strand: in, out
        out.append((a, j_out, c, j_in) if sign[lab] > 0 else (a, j_in, c, j_out))
    return out
