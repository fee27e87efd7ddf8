"""The evidence fitness: how far above chance a candidate's events sit in the traces.

Why not the paper's correlation alone: see ``docs/design/evolve.md`` (issue 19). This
module compares like with like — per body and aligned in time — and measures
every quantity against chance, in standard deviations, so that one number
means the same for every label, library and data set.

**Units.** An event names bodies in its params (values, or list items, that
are body names of the trace); it is attributed to the *dynamic* bodies it
names, or to every dynamic body of the trace when it names no body at all
(``global rest``). An event naming only fixed bodies says nothing this
fitness can check and adds no unit. Its unit is
``(trace, body, frame)``. Events of one body closer than ``merge_s`` (0.25 s)
form one episode, kept at its first frame: a detector that fires on every
frame of an interval says one thing, once (without this a detector firing on
every moving frame would pile up thousands of weakly telling units).

**Dynamics evidence.** For every unit the trace gives three local change
features of the body: the speed change into the frame, ``log1p(|v_t -
v_{t-1}| / s)`` with ``s`` the median change in the data; the number of bodies
it starts or stops touching; and the log ratio of its mean speed over the
next and the previous ``window_s`` (1/12 s). The first two are max-pooled over
±1 frame (detectors emit at the contact frame or the first frame after it).
Each is centred per (trace, body), so a unit is compared with the same body at
other moments of the same trace. The candidate's episode indicator ``c`` is
regressed against these features; the whitened score vector ``t = C^-1/2 S'c /
sqrt(c'c)`` is standard normal when the events are unrelated to the trace
(random frames, wrong bodies), so ``Q = |t|^2`` is chi-square with d degrees of
freedom and the Wilson–Hilferty transform turns it into a z-score:

- ``dynamics`` (own): the plain regression;
- ``new``: the same given the library — the library's episode indicators enter
  the regression first (group-centred), so a candidate gets credit only for
  what they do not already explain. A copy of a library pattern scores 0.

**Place evidence.** Events may be about *where* rather than what happens (a
body crossing a grid line). Per body and axis, a 64-bin histogram of the
positions at the candidate's episodes is compared with that body's positions
over all frames (G-test, chi-square, z-score).

**Fitness.** ``evidence = sqrt(max(own, 0) * max(new, 0))`` with ``own =
max(dynamics, place)``: high only when the events are tied to the traces *and*
add to the library. The geometric mean keeps a detector that is mostly
explained by the library (its ``new`` small) above a novel but mistimed one
(its ``own`` small): the benchmark chose it over ``new`` alone. Penalties and
acceptance are in `simpatterns.evolve.fitness`.

Cost: the per-(trace, body, frame) features and the library's regression are
computed once per (traces, library); a candidate costs one pass over its
events plus ``O(n log m)`` lookups, elementwise numpy only (a multi-threaded
BLAS makes tiny products very slow on a loaded machine, see docs/design/evolve.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simpatterns.annotation import EventList
from simpatterns.trace import Trace

MERGE_S = 0.25  # events of one body closer than this are one episode
WINDOW_S = 1 / 12  # speed before / after a frame: 5 frames at 60 Hz
POOL_FRAMES = 1  # impulse features are max-pooled over +-1 frame
PLACE_BINS = 64
CHECK_SHIFTS_S = (0.25, 1.5)  # acceptance: time shifts tried, both ways
FEATURES = ("speed change", "contact change", "log speed ratio")


def wilson_hilferty(q: float, dof: int) -> float:
    """z-score of a chi-square value ``q`` with ``dof`` degrees of freedom."""
    if dof <= 0:
        return 0.0
    a = 2.0 / (9.0 * dof)
    return float((max(q / dof, 0.0) ** (1.0 / 3.0) - (1.0 - a)) / math.sqrt(a))


@dataclass
class EvidenceParts:
    evidence: float  # sqrt(max(own, 0) * max(new, 0)), in standard deviations above chance
    dynamics: float  # z of the dynamics regression alone
    place: float  # z of the place (G) test
    new: float  # z of the dynamics regression given the library
    episodes: int
    signature: tuple[float, ...]


class TraceSalience:
    """The trace side of the evidence fitness, computed once per set of traces.

    ``S[u, k]``: feature k of unit ``u = (trace * V + body) * H + frame`` (centred per
    (trace, body), zero on frames past a trace's end); ``place[u, a]``: the position bin
    on axis ``a``; ``valid[u]``: the unit is a real frame of a dynamic body.
    """

    def __init__(self, traces: Sequence[Trace]):
        traces = list(traces)
        if not traces:
            raise ValueError("evidence fitness needs traces")
        self.n = len(traces)
        self.dt = dt = traces[0].dt
        self.merge = max(1, int(round(MERGE_S / dt)))
        window = max(1, int(round(WINDOW_S / dt)))
        vocab: dict[str, int] = {}
        for t in traces:
            for name, dyn in zip(t.names, t.dynamic_mask):
                if dyn:
                    vocab.setdefault(name, len(vocab))
        self.vocab = vocab
        self.body_cols = [{name: vocab[name] for name, dyn in zip(t.names, t.dynamic_mask) if dyn} for t in traces]
        V, H = max(1, len(vocab)), max(t.num_frames for t in traces)
        self.offsets = [{name: ((i * V + vocab[name]) * H if dyn else -1) for name, dyn in zip(t.names, t.dynamic_mask)}
                        for i, t in enumerate(traces)]
        self.every = [[o for o in off.values() if o >= 0] for off in self.offsets]
        V = self.V = max(1, len(vocab))
        H = self.H = max(t.num_frames for t in traces)
        D = self.dim = traces[0].dim
        raw = np.zeros((self.n, V, H, len(FEATURES)), dtype=np.float32)
        pos = np.zeros((self.n, V, H, D), dtype=np.float32)
        valid = np.zeros((self.n, V, H), dtype=bool)
        change = []  # (i, v, T, |dv| per frame, mean speed before, after): scaled once the median is known
        for i, t in enumerate(traces):
            T = t.num_frames
            touch = t.touching_matrix()
            for name, v in self.body_cols[i].items():
                j = t.body_index(name)
                vel = t.velocity[:, j]
                valid[i, v, :T] = True
                pos[i, v, :T] = t.position[:, j]
                pos[i, v, T:] = t.position[-1, j]
                dv = np.zeros(T)
                dv[1:] = np.sqrt(((vel[1:] - vel[:-1]) ** 2).sum(-1))
                tc = np.zeros(T)
                tc[1:] = (touch[1:, j] != touch[:-1, j]).sum(-1)
                raw[i, v, :T, 1] = tc
                speed = np.sqrt((vel**2).sum(-1))
                cs = np.concatenate([[0.0], np.cumsum(speed)])
                idx = np.arange(T)
                lo, hi = np.maximum(idx - window, 0), np.minimum(idx + window, T)
                before = (cs[idx] - cs[lo]) / np.maximum(idx - lo, 1)
                after = (cs[hi] - cs[idx]) / np.maximum(hi - idx, 1)
                change.append((i, v, T, dv, before, after))
        allchg = np.concatenate([c[3][c[3] > 0] for c in change]) if change else np.zeros(0)
        scale = float(np.median(allchg)) if allchg.size else 1.0
        scale = scale if scale > 0 else 1.0
        for i, v, T, dv, before, after in change:
            raw[i, v, :T, 0] = np.log1p(dv / scale)
            r = np.log((after + scale) / (before + scale))  # speeds below the typical step count as rest
            r[0] = 0.0
            raw[i, v, :T, 2] = r
        for k in (0, 1):  # impulses: tolerate an emit frame one off the contact frame
            x = raw[..., k].copy()
            for o in range(1, POOL_FRAMES + 1):
                np.maximum(raw[:, :, o:, k], x[:, :, :-o], out=raw[:, :, o:, k])
                np.maximum(raw[:, :, :-o, k], x[:, :, o:], out=raw[:, :, :-o, k])
        raw[~valid] = 0.0
        count = np.maximum(valid.sum(-1), 1)[..., None]
        raw -= (raw.sum(2) / count)[:, :, None, :]
        raw[~valid] = 0.0
        self.S = raw.reshape(-1, len(FEATURES))
        self.valid = valid.ravel()
        self.units = int(self.valid.sum())
        S64 = self.S.astype(np.float64)
        self.cov = S64.T @ S64 / max(self.units, 1)
        # covariance of two different bodies' features at the same frame: an event naming k moving
        # bodies is k correlated units (a collision moves both), not k independent draws
        frame_sum = raw.sum(1, dtype=np.float64)  # [N, H, d]
        bodies = valid.sum(1).astype(np.float64)  # [N, H]
        pairs = float((bodies * (bodies - 1)).sum())
        same = np.einsum("nhd,nhe->de", frame_sum, frame_sum) - S64.T @ S64
        self.cov_pair = same / pairs if pairs > 0 else np.zeros_like(self.cov)
        self.group_frames = np.maximum(valid.reshape(self.n * V, H).sum(-1), 1).astype(np.float64)
        # place: per (body, axis) bins over the body's range, and the null histogram
        flat = pos.reshape(-1, D)
        body = (np.arange(flat.shape[0]) // H) % V
        self.place = np.zeros(flat.shape, dtype=np.int64)
        self.place_null = np.zeros((V, D, PLACE_BINS))
        for v in range(V):
            rows = (body == v) & self.valid
            if not rows.any():
                continue
            lo, hi = flat[rows].min(0), flat[rows].max(0)
            b = ((flat[body == v] - lo) / np.maximum(hi - lo, 1e-9) * PLACE_BINS).astype(np.int64)
            self.place[body == v] = np.clip(b, 0, PLACE_BINS - 1)
            for a in range(D):
                self.place_null[v, a] = np.bincount(self.place[rows, a], minlength=PLACE_BINS)
        self.place_null = (self.place_null + 0.5) / (self.place_null + 0.5).sum(-1, keepdims=True)

    # ------------------------------------------------------------------ events
    def episodes(self, events: Sequence[EventList], other_bodies: bool = False) -> np.ndarray:
        """Sorted unit ids of the episodes of a detector's events (see the module docstring).
        ``other_bodies``: the same frames on the moving bodies each event does *not* name (events
        naming no body are left out): the units of the body check."""
        if len(events) != self.n:
            raise ValueError(f"events for {len(events)} traces, expected {self.n}")
        ids: list[int] = []
        add = ids.append
        for i, evs in enumerate(events):
            if not evs:
                continue
            where = self.offsets[i]  # body name -> unit id of its frame 0, or -1 for a fixed body
            every = self.every[i]
            for f, params in evs:
                mine = []
                for val in params.values():
                    if type(val) is str:
                        o = where.get(val)
                        if o is not None:
                            mine.append(o)
                    elif type(val) is list or type(val) is tuple:
                        for x in val:
                            if type(x) is str:
                                o = where.get(x)
                                if o is not None:
                                    mine.append(o)
                if not mine:  # names no body: a scene-wide event concerns every moving body
                    if not other_bodies:
                        ids.extend(o + f for o in every)
                elif other_bodies:
                    ids.extend(o + f for o in every if o not in mine)
                else:
                    for o in mine:
                        if o >= 0:
                            add(o + f)
        return self.merge_units(np.asarray(ids, dtype=np.int64))

    def merge_units(self, ids: np.ndarray) -> np.ndarray:
        """Unique, sorted, and episodes of one body closer than ``merge`` frames kept at their first frame."""
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        u = np.unique(ids)
        H = self.H
        keep = np.ones(u.size, dtype=bool)
        keep[1:] = (u[1:] // H != u[:-1] // H) | (u[1:] - u[:-1] > self.merge)
        return u[keep]

    def shift_units(self, u: np.ndarray, frames: int) -> np.ndarray:
        """The units moved by ``frames`` within their trace; those falling off it are dropped."""
        f = u % self.H + frames
        moved = u + frames
        ok = (f >= 0) & (f < self.H)
        moved = moved[ok]
        return self.merge_units(moved[self.valid[moved]])

    def place_z(self, u: np.ndarray) -> float:
        """G-test of the episodes' positions against each body's positions over all frames."""
        if u.size == 0:
            return 0.0
        V, D, B = self.V, self.dim, PLACE_BINS
        body = (u // self.H) % V
        g = 0.0
        dof = 0
        for a in range(D):
            obs = np.bincount(body * B + self.place[u, a], minlength=V * B).reshape(V, B).astype(np.float64)
            n = obs.sum(-1)
            exp = n[:, None] * self.place_null[:, a]
            m = obs > 0
            g += 2.0 * float((obs[m] * np.log(obs[m] / exp[m])).sum())
            dof += int((n > 0).sum()) * (B - 1)
        return wilson_hilferty(g, dof)


class EvidenceContext:
    """The library's side, computed once per (traces, library); `score` per candidate."""

    def __init__(self, salience: TraceSalience, library_events: dict[str, Sequence[EventList]]):
        self.sal = sal = salience
        S = sal.S.astype(np.float64)
        units = float(sal.units)
        groups = sal.n * sal.V
        lib = [sal.episodes(evs) for evs in library_events.values()]
        self.lib_units = [u for u in lib if u.size]
        L = len(self.lib_units)
        # own regression: S is centred per group already, so its covariance is S'S / units
        self.cov_own = sal.cov
        self.W_own = _whitener(sal.cov)
        if L:
            G = np.zeros((groups, L))  # episodes per (trace, body) and pattern
            XtS = np.zeros((L, S.shape[1]))
            XtX = np.zeros((L, L))
            for a, ua in enumerate(self.lib_units):
                G[:, a] = np.bincount(ua // sal.H, minlength=groups)
                XtS[a] = S[ua].sum(0)
                for b in range(a, L):
                    XtX[a, b] = XtX[b, a] = np.intersect1d(ua, self.lib_units[b], assume_unique=True).size
            self.G_scaled = G / sal.group_frames[:, None]
            # every library unit with its pattern, sorted by unit: one lookup counts a candidate's
            # units shared with each pattern
            order = np.argsort(np.concatenate(self.lib_units), kind="stable")
            self._lib_u = np.concatenate(self.lib_units)[order]
            self._lib_p = np.concatenate([np.full(x.size, a) for a, x in enumerate(self.lib_units)])[order]
            XtX -= G.T @ self.G_scaled  # the indicators centred per (trace, body), as S is
            self.XtX_inv = np.linalg.pinv(XtX)
            self.A = self.XtX_inv @ XtS
            self.cov_new = (S.T @ S - XtS.T @ self.A) / units
        else:
            self.cov_new = self.cov_own

    def _shared(self, u: np.ndarray) -> np.ndarray:
        """Per library pattern, how many of the units ``u`` it has too."""
        lo = np.searchsorted(self._lib_u, u, "left")
        k = np.searchsorted(self._lib_u, u, "right") - lo
        total = int(k.sum())
        if total == 0:
            return np.zeros(len(self.lib_units))
        pos = np.repeat(lo - (np.cumsum(k) - k), k) + np.arange(total)
        return np.bincount(self._lib_p[pos], minlength=len(self.lib_units)).astype(np.float64)

    def _q(self, u: np.ndarray, given_library: bool) -> tuple[float, int, np.ndarray]:
        """(Q, dof, sum of the features at the episodes): ``Q = s' V^-1 s / c'c`` with ``V`` the
        null covariance of one episode, chi-square with ``dof`` degrees of freedom by chance."""
        sal = self.sal
        cg = np.bincount(u // sal.H, minlength=sal.n * sal.V).astype(np.float64)
        ctc = u.size - float((cg * cg / sal.group_frames).sum())
        cts = sal.S[u].sum(0, dtype=np.float64)
        own = cts
        cov = self.cov_own
        if given_library and self.lib_units:
            b = self._shared(u) - (self.G_scaled * cg[:, None]).sum(0)
            ctc -= float((b * (self.XtX_inv * b).sum(1)).sum())
            cts = cts - (b[:, None] * self.A).sum(0)
            cov = self.cov_new
        if ctc <= 1e-9:
            return 0.0, cts.size, own
        # episodes sharing a frame (one event on several bodies) add their same-frame covariance
        frame = (u // (sal.V * sal.H)) * sal.H + u % sal.H
        m = np.unique(frame, return_counts=True)[1].astype(np.float64)
        cov = cov + (float((m * (m - 1)).sum()) / u.size) * sal.cov_pair
        w, vecs = np.linalg.eigh(cov)
        keep = w > 1e-12 * max(float(w.max()), 1e-300)
        proj = (cts[:, None] * vecs[:, keep]).sum(0)
        return float((proj * proj / w[keep]).sum() / ctc), int(keep.sum()), own

    def score(self, events: Sequence[EventList]) -> EvidenceParts:
        u = self.sal.episodes(events)
        if u.size == 0:
            return EvidenceParts(0.0, 0.0, 0.0, 0.0, 0, (0.0,) * self.sal.n)
        q_own, dof, total = self._q(u, False)
        dynamics = wilson_hilferty(q_own, dof)
        new = wilson_hilferty(*self._q(u, True)[:2]) if self.lib_units else dynamics
        place = self.sal.place_z(u)
        own = max(dynamics, place)
        evidence = math.sqrt(max(own, 0.0) * max(new, 0.0))
        return EvidenceParts(evidence, dynamics, place, new, int(u.size),
                             self._signature(u, (total[:, None] * self.W_own).sum(0)))

    def own(self, u: np.ndarray) -> float:
        """``max(dynamics, place)`` of a set of units: the evidence that does not involve the library."""
        if u.size == 0:
            return 0.0
        return max(wilson_hilferty(*self._q(u, False)[:2]), self.sal.place_z(u))

    def checks(self, events: Sequence[EventList], time_margin: float, body_margin: float) -> list[str]:
        """What makes a detector's events look misplaced (empty when none): its own evidence would grow
        by more than ``time_margin`` standard deviations if every event moved by the same time shift
        (`CHECK_SHIFTS_S` both ways, every 2 frames: the best of ~76 shifts, hence a wider margin), or
        by more than ``body_margin`` if its events named the other moving bodies at the same frames
        instead of their own. For acceptance, not for ranking (it costs about 80 scorings)."""
        sal = self.sal
        u = sal.episodes(events)
        if u.size == 0:
            return []
        base = self.own(u)
        out = []
        lo, hi = (max(1, int(round(x / sal.dt))) for x in CHECK_SHIFTS_S)
        best, best_lag = -math.inf, 0
        for lag in range(lo, hi + 1, 2):
            for sign in (-1, 1):
                v = self.own(sal.shift_units(u, sign * lag))
                if v > best:
                    best, best_lag = v, sign * lag
        if best > base + time_margin:
            out.append(f"mistimed: moving every event by {best_lag * sal.dt:+.2f} s raises its evidence from "
                       f"{base:.1f} to {best:.1f} sd")
        others = sal.episodes(events, other_bodies=True)
        if others.size:
            o = self.own(others)
            if o > base + body_margin:
                out.append(f"wrong bodies: the other moving bodies at its frames show more ({o:.1f} sd) than "
                           f"the bodies it names ({base:.1f} sd)")
        return out

    def _signature(self, u: np.ndarray, t_own: np.ndarray) -> tuple[float, ...]:
        """Per trace: the candidate's whitened feature sum at its episodes on that trace, projected
        on its overall direction and divided by sqrt(episodes) (its per-trace evidence)."""
        sal = self.sal
        norm = float(np.sqrt(t_own @ t_own))
        direction = t_own / norm if norm > 0 else t_own
        proj = (sal.S[u] * (self.W_own * direction).sum(1)).sum(1, dtype=np.float64)
        trace = u // (sal.V * sal.H)
        s = np.bincount(trace, weights=proj, minlength=sal.n)
        k = np.bincount(trace, minlength=sal.n)
        return tuple(float(x) for x in s / np.sqrt(np.maximum(k, 1)))


def _whitener(cov: np.ndarray) -> np.ndarray:
    """``W`` with ``W W' = cov^-1`` (features that never vary are dropped)."""
    w, vecs = np.linalg.eigh(cov)
    keep = w > 1e-12 * max(float(w.max()), 1e-300)
    return vecs[:, keep] / np.sqrt(w[keep])
