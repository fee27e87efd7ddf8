"""Trace distance and annotation distance (paper §3.1), single pairs and N x N matrices.

**Trace distance** ``d_T(a, b)``: the mean, over frames, of the mean Euclidean
distance between the positions of the bodies the two traces share (matched
by name), i.e. the per-frame average distance normalised by the length of the
rollout.

- Unequal lengths: the shorter trace is padded by holding its last state, and
  the mean runs over ``max(T_a, T_b)`` frames. PHYRE rollouts stop at success
  (or rest), after which the bodies stay where they were, so holding the last
  state is what the world would have shown.
- Bodies that are static in both traces and sit at exactly the same place
  (the walls) are left out: they contribute 0 and would only dilute the
  mean by a factor that differs between pairs. If only such bodies are
  shared the distance is 0; traces with no body in common raise ValueError.
- Frames are compared by index, so both traces must share the frame rate
  (``dt * stride``); a mismatch raises ValueError.

**Annotation distance** ``d_A(a, b)``: for each pattern, the activation frames
(the pattern's column of the binary ``[T, L]`` matrix) are binned into ``B``
bins over a time horizon, smoothed and normalised to a distribution; the
distance is the symmetrised cross-entropy ``(H(p, q) + H(q, p)) / 2``
averaged over patterns.

- Horizon: for a matrix, the longest annotation's frame count (an absolute,
  shared time axis, as for the trace distance); for a single annotation,
  its own length unless given.
- Smoothing: counts are blurred over neighbouring bins with the kernel
  ``[1/4, 1/2, 1/4]`` (mass kept at the edges), normalised, then mixed with
  the uniform distribution: ``p = (1 - EPSILON) * p + EPSILON / B``.
  ``EPSILON = 0.01``, so ``-log`` of any bin is at most ``log(B / EPSILON)``.
  A pattern that never fires has the uniform distribution.
- ``DEFAULT_BINS = 20`` (0.83 s per bin for a full 1000-step PHYRE rollout).
- Cross-entropy of a distribution with itself is its entropy, not 0; pass
  ``divergence="jeffreys"`` for the symmetrised KL divergence, which is 0
  on identical annotations.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Sequence

import numpy as np

from simpatterns.annotation import Annotation, EventList
from simpatterns.files import atomic_open
from simpatterns.trace import Trace

DEFAULT_BINS = 20
EPSILON = 0.01
BLUR_KERNEL = (0.25, 0.5, 0.25)
_CACHE_VERSION = "trace-distance-v1"
_DIVERGENCES = ("cross-entropy", "jeffreys")
_FRAME = itemgetter(0)


# ---------------------------------------------------------------- trace distance
def _check_rates(traces: Sequence[Trace]) -> None:
    rates = {round(t.dt, 12) for t in traces}
    if len(rates) > 1:
        raise ValueError(f"traces have different frame intervals {sorted(rates)} s; resample them first")
    dims = {t.dim for t in traces}
    if len(dims) > 1:
        raise ValueError(f"traces mix dimensions {sorted(dims)}")


def trace_distance(a: Trace, b: Trace) -> float:
    """``d_T(a, b)`` for one pair; see the module docstring."""
    return float(trace_distance_matrix([a, b])[0, 1])


def trace_distance_matrix(
    traces: Sequence[Trace], cache_dir: str | os.PathLike | None = None, *,
    block_bytes: int = 8 << 20, threads: int | None = None,
) -> np.ndarray:
    """Symmetric ``[N, N]`` matrix of trace distances (zero diagonal).

    Vectorised over pairs: for each moving body, the positions of the traces
    that hold it go into one float32 ``[D, m, T]`` array (held last states) and
    each block of rows is compared with all later traces at once; bodies static
    in every trace reduce to one frame. ``threads`` (default: up to 4) run row
    blocks in parallel. With ``cache_dir`` the matrix is stored as ``.npy``
    keyed by a content hash of the traces (`dataset_hash`: positions, body
    names, static flags, frame interval) and reused when the same data set
    comes again.
    """
    traces = list(traces)
    n = len(traces)
    if n == 0:
        return np.zeros((0, 0))
    _check_rates(traces)
    cache_path = None
    if cache_dir is not None:
        cache_path = Path(cache_dir) / f"trace_distances_{dataset_hash(traces)}.npy"
        if cache_path.is_file():
            try:
                cached = np.load(cache_path, allow_pickle=False)
                if cached.shape == (n, n):
                    return cached
            except (OSError, ValueError):
                pass  # a damaged cache file is recomputed and replaced
    out = _trace_matrix(traces, block_bytes, threads or min(4, os.cpu_count() or 1))
    if cache_path is not None:
        with atomic_open(cache_path, "wb") as fh:
            np.save(fh, out)
    return out


def dataset_hash(traces: Sequence[Trace]) -> str:
    """Content hash of what the trace distance reads, in order."""
    h = hashlib.blake2b(_CACHE_VERSION.encode(), digest_size=16)
    for t in traces:
        dyn = t.dynamic_mask
        h.update(repr((t.names, dyn.tolist(), t.position.shape, round(t.dt, 12))).encode())
        h.update(np.ascontiguousarray(t.position[:, dyn], dtype=np.float64).tobytes())
        # static bodies cannot move: their first frame is their whole history
        h.update(np.ascontiguousarray(t.position[0, ~dyn], dtype=np.float64).tobytes())
    return h.hexdigest()


def _row_blocks(planes: np.ndarray, lens: np.ndarray, block_bytes: int) -> list[tuple[int, int, int]]:
    """Row blocks for `_pair_block`: traces sorted longest first, so a block of rows
    against all later traces needs only the frames of its first (longest) row."""
    m = planes.shape[1]
    blocks, start = [], 0
    while start < m:
        t_need = int(lens[start])
        per_row = max(1, (m - start) * t_need * 4 * 2)
        rows = max(1, min(m - start, int(block_bytes // per_row)))
        blocks.append((start, start + rows, t_need))
        start += rows
    return blocks


def _pair_block(planes: np.ndarray, lens: np.ndarray, out: np.ndarray, lo: int, hi: int, t_need: int) -> None:
    """Distances of one body between rows ``lo:hi`` and every trace from ``lo`` on,
    summed over each pair's ``max(T_i, T_j)`` frames, into ``out[lo:hi, lo:]``."""
    acc = None
    for k in range(planes.shape[0]):
        p = planes[k, :, :t_need]
        diff = p[lo:hi, None] - p[None, lo:]  # [r, m', t]
        np.multiply(diff, diff, out=diff)
        if acc is None:
            acc = diff
        else:
            acc += diff
    np.sqrt(acc, out=acc)
    total = acc.sum(-1, dtype=np.float64)
    # frames from a pair's own length up to t_need hold both last states: remove them
    pair_len = np.maximum(lens[lo:hi, None], lens[None, lo:])
    last = np.take_along_axis(acc, (pair_len - 1)[:, :, None], axis=-1)[..., 0]
    total -= (t_need - pair_len) * last
    out[lo:hi, lo:] = total


def _trace_matrix(traces: list[Trace], block_bytes: int, threads: int) -> np.ndarray:
    n = len(traces)
    dim = traces[0].dim
    lengths = np.array([t.num_frames for t in traces], dtype=np.int64)
    vocab: dict[str, int] = {}
    for t in traces:
        for name in t.names:
            vocab.setdefault(name, len(vocab))
    nb = len(vocab)
    present = np.zeros((n, nb), dtype=bool)
    static = np.zeros((n, nb), dtype=bool)
    cols = []
    for i, t in enumerate(traces):
        c = np.array([vocab[name] for name in t.names], dtype=np.intp)
        cols.append(c)
        present[i, c] = True
        static[i, c] = ~t.dynamic_mask
    shared_any = (present.astype(np.float64) @ present.T.astype(np.float64)) > 0
    if not shared_any.all():
        i, j = np.argwhere(~shared_any)[0]
        raise ValueError(f"traces {i} and {j} share no body by name; their trace distance is undefined")
    # bodies static wherever they appear need one frame; the others all frames
    moving = (present & ~static).any(axis=0)

    # static bodies, one at a time over the traces that hold it: a constant distance per
    # frame, counted for a pair only where the body's position differs
    s_sum = np.zeros((n, n))
    s_count = np.zeros((n, n))
    for c in np.nonzero(~moving)[0]:
        members = np.nonzero(present[:, c])[0]
        if members.size < 2:
            continue
        pos = np.array([traces[i].position[0, int(np.nonzero(cols[i] == c)[0][0])] for i in members])
        dist = np.linalg.norm(pos[:, None] - pos[None, :], axis=-1)
        idx = np.ix_(members, members)
        s_sum[idx] += dist
        s_count[idx] += dist > 0

    # moving bodies, one at a time over just the traces that hold it: [D, m, T] float32
    # planes (held last state), rows sorted longest first
    d_sum = np.zeros((n, n))
    d_count = np.zeros((n, n))
    tasks = []
    results = []
    for c in np.nonzero(moving)[0]:
        members = np.nonzero(present[:, c])[0]
        members = members[np.argsort(-lengths[members], kind="stable")]
        lens = lengths[members]
        planes = np.empty((dim, members.size, int(lens[0])), dtype=np.float32)
        for r, i in enumerate(members):
            j = int(np.nonzero(cols[i] == c)[0][0])
            pos = traces[i].position[:, j]  # [T_i, D]
            planes[:, r, : lens[r]] = pos.T
            planes[:, r, lens[r]:] = pos[-1][:, None]
        out = np.zeros((members.size, members.size))
        results.append((members, out))
        tasks += [(planes, lens, out, lo, hi, t_need) for lo, hi, t_need in _row_blocks(planes, lens, block_bytes)]
    if threads > 1 and len(tasks) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:  # numpy releases the GIL
            list(pool.map(lambda task: _pair_block(*task), tasks))
    else:
        for task in tasks:
            _pair_block(*task)
    for members, out in results:
        iu = np.triu_indices(members.size, 1)
        out[(iu[1], iu[0])] = out[iu]
        np.fill_diagonal(out, 0.0)
        idx = np.ix_(members, members)
        d_sum[idx] += out
        d_count[idx] += 1.0

    pair_len = np.maximum(lengths[:, None], lengths[None, :]).astype(np.float64)
    count = d_count + s_count
    total = d_sum + pair_len * s_sum
    out = np.where(count > 0, total / (pair_len * np.maximum(count, 1)), 0.0)
    np.fill_diagonal(out, 0.0)
    return np.maximum(out, 0.0)


# ----------------------------------------------------------- annotation distance
def smooth_histograms(counts: np.ndarray) -> np.ndarray:
    """Counts ``[..., B]`` -> distributions: blur over bins (mass kept at the edges),
    normalise, mix with uniform (`BLUR_KERNEL`, `EPSILON`); all-zero rows become uniform."""
    c = np.asarray(counts, dtype=np.float64)
    if c.shape[-1] > 1:
        left = np.concatenate([c[..., :1], c[..., :-1]], axis=-1)
        right = np.concatenate([c[..., 1:], c[..., -1:]], axis=-1)
        c = BLUR_KERNEL[0] * left + BLUR_KERNEL[1] * c + BLUR_KERNEL[2] * right
    total = c.sum(-1, keepdims=True)
    bins = c.shape[-1]
    p = np.divide(c, total, out=np.full_like(c, 1.0 / bins), where=total > 0)
    return (1.0 - EPSILON) * p + EPSILON / bins


def activation_histograms(
    frames: Sequence[Sequence[int] | np.ndarray], horizon: int | Sequence[int] | np.ndarray, bins: int = DEFAULT_BINS
) -> np.ndarray:
    """``[N, B]``: per row of ``frames`` (one pattern on one trace), the smoothed, normalised
    histogram of its active frames; the one implementation behind every histogram here and
    behind the evolver's fitness.

    Each frame counts once (as in the binary ``[T, L]`` matrix), falls in bin
    ``min(frame * B // horizon, B - 1)`` and the counts go through `smooth_histograms`.
    ``horizon`` (frames) is one number for all rows or one per row. Vectorised: one pass
    over the frames, one ``np.unique`` and one ``bincount``.
    """
    lens = np.fromiter(map(len, frames), dtype=np.int64, count=len(frames))
    flat = np.fromiter(chain.from_iterable(frames), dtype=np.int64, count=int(lens.sum()))
    return _binned(lens, flat, horizon, bins)


def event_histograms(events: Sequence[EventList], horizon: int | Sequence[int] | np.ndarray,
                     bins: int = DEFAULT_BINS) -> np.ndarray:
    """`activation_histograms` of event lists ``[(frame, params), ...]`` (one per row), read
    as they are stored (`Annotation.events_of`, a detector's output): no frame lists built."""
    lens = np.fromiter(map(len, events), dtype=np.int64, count=len(events))
    flat = np.fromiter(map(_FRAME, chain.from_iterable(events)), dtype=np.int64, count=int(lens.sum()))
    return _binned(lens, flat, horizon, bins)


def _binned(lens: np.ndarray, flat: np.ndarray, horizon: int | Sequence[int] | np.ndarray, bins: int) -> np.ndarray:
    """Smoothed histograms of rows given as their lengths and their concatenated frames."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    n = lens.size
    counts = np.zeros((n, bins))
    if flat.size:
        rows = np.repeat(np.arange(n, dtype=np.int64), lens)
        span = int(flat.max()) + 1
        key = rows * span + flat
        if key.size > 1 and bool((key[1:] >= key[:-1]).all()):  # rows sorted by frame (events are): no sort
            key = key[np.concatenate(([True], key[1:] != key[:-1]))]  # drop repeated (row, frame)
        else:
            key = np.unique(key)
        r, f = key // span, key % span
        if np.ndim(horizon) == 0:
            h: int | np.ndarray = max(int(horizon), 1)  # type: ignore[arg-type]
        else:
            h = np.maximum(np.asarray(horizon, dtype=np.int64)[r], 1)
        b = np.clip(f * bins // h, 0, bins - 1)
        counts = np.bincount(r * bins + b, minlength=n * bins).reshape(n, bins).astype(np.float64)
    return smooth_histograms(counts)


def _pattern_events(annotations: Sequence[Annotation], patterns: Sequence[str]) -> list[EventList]:
    """Row ``k * L + l``: the events of pattern ``l`` on annotation ``k``."""
    return [a.pattern_events.get(p, _NONE) for a in annotations for p in patterns]


_NONE: EventList = []


def pattern_histograms(
    annotation: Annotation, patterns: Sequence[str], bins: int = DEFAULT_BINS, horizon: int | None = None
) -> np.ndarray:
    """``[L, B]``: per pattern, the smoothed, normalised histogram of activation times.

    ``horizon`` (frames) spans the bins; default ``annotation.num_frames``.
    """
    h = annotation.num_frames if horizon is None else int(horizon)
    return event_histograms(_pattern_events([annotation], patterns), h, bins)


def histogram_stack(
    annotations: Sequence[Annotation], patterns: Sequence[str], bins: int = DEFAULT_BINS, horizon: int | None = None
) -> np.ndarray:
    """``[N, L, B]`` histograms on a shared horizon (default: the longest annotation)."""
    if horizon is None:
        horizon = max((a.num_frames for a in annotations), default=1)
    hist = event_histograms(_pattern_events(annotations, patterns), int(horizon), bins)
    return hist.reshape(len(annotations), len(patterns), bins)


def histogram_cross_entropy(p: np.ndarray, q: np.ndarray) -> float:
    """Symmetrised cross-entropy ``(H(p, q) + H(q, p)) / 2`` of two smoothed histograms (nats)."""
    return float(histogram_cross_entropy_stack(np.asarray(p), np.asarray(q)))


def histogram_cross_entropy_stack(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Elementwise over leading axes (broadcast): ``p[..., B]``, ``q[..., B]`` -> ``[...]``.

    For novelty: a candidate's histograms ``[N, 1, B]`` against the library's
    ``[N, L, B]`` on the same traces give ``[N, L]`` in one call.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    return -0.5 * ((p * np.log(q)).sum(-1) + (q * np.log(p)).sum(-1))


def histogram_cross_entropy_matrix(p: np.ndarray, q: np.ndarray | None = None) -> np.ndarray:
    """Pairwise symmetrised cross-entropy: ``p[N, B]``, ``q[M, B]`` -> ``[N, M]`` (matrix products)."""
    p = np.asarray(p, dtype=np.float64)
    q = p if q is None else np.asarray(q, dtype=np.float64)
    return -0.5 * (p @ np.log(q).T + np.log(p) @ q.T)


def pattern_distance_matrices(hist: np.ndarray, divergence: str = "cross-entropy") -> np.ndarray:
    """``[L, N, N]``: per-pattern distance matrices from ``hist[N, L, B]``.

    The evolver keeps these for the library and averages in a candidate's own
    matrix instead of recomputing everything.
    """
    _check_divergence(divergence)
    h = np.asarray(hist, dtype=np.float64).transpose(1, 0, 2)  # [L, N, B]
    logh = np.log(h)
    cross = np.einsum("lib,ljb->lij", h, logh)  # sum_b p_i log p_j
    d = -0.5 * (cross + cross.transpose(0, 2, 1))
    if divergence == "jeffreys":
        ent = -np.einsum("lib,lib->li", h, logh)
        d = d - 0.5 * (ent[:, :, None] + ent[:, None, :])
    return d


def _check_divergence(divergence: str) -> None:
    if divergence not in _DIVERGENCES:
        raise ValueError(f"divergence must be one of {_DIVERGENCES}, got {divergence!r}")


def distance_from_histograms(hist: np.ndarray, divergence: str = "cross-entropy") -> np.ndarray:
    """``[N, N]`` annotation distances from ``hist[N, L, B]`` (mean over patterns).

    All patterns at once as one ``[N, L*B] @ [L*B, N]`` product.
    """
    _check_divergence(divergence)
    h = np.asarray(hist, dtype=np.float64)
    n, num_patterns, _ = h.shape
    if num_patterns == 0:
        return np.zeros((n, n))
    flat = h.reshape(n, -1)
    logflat = np.log(flat)
    cross = flat @ logflat.T
    d = -0.5 * (cross + cross.T) / num_patterns
    if divergence == "jeffreys":
        ent = -(flat * logflat).sum(-1) / num_patterns
        d = d - 0.5 * (ent[:, None] + ent[None, :])
        np.fill_diagonal(d, 0.0)
        d = np.maximum(d, 0.0)
    return d


def annotation_distance(
    a: Annotation, b: Annotation, patterns: Sequence[str], bins: int = DEFAULT_BINS,
    horizon: int | None = None, divergence: str = "cross-entropy",
) -> float:
    """``d_A(a, b)`` for one pair (horizon default: the longer of the two)."""
    return float(annotation_distance_matrix([a, b], patterns, bins, horizon, divergence)[0, 1])


def annotation_distance_matrix(
    annotations: Sequence[Annotation], patterns: Sequence[str], bins: int = DEFAULT_BINS,
    horizon: int | None = None, divergence: str = "cross-entropy",
) -> np.ndarray:
    """Symmetric ``[N, N]`` annotation distances over ``patterns`` (see module docstring)."""
    return distance_from_histograms(histogram_stack(annotations, patterns, bins, horizon), divergence)
