import numpy as np

PATTERN = "crossing formed"
DESCRIPTION = (
    "A new crossing appears in the top view of the rope (seen from above, along z): one stretch of rope "
    "comes to lie over another. The change must last 0.05 s. Emitted when it appears, with object_a the "
    "bead on the upper strand, object_b the bead on the lower strand, and crossings the number of "
    "crossings after it."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "crossings"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "instant"

CHUNK = 32  # frames per vectorised batch (memory)
HOLD_SECONDS = 0.05
MATCH = 6  # segments a crossing may slide between the two frames compared


def rope_positions(trace):
    """The first rope's bead positions [T, M, 3] (in order along the rope) and whether it is a
    closed loop; (None, False) when the trace has no rope."""
    ropes = trace.meta.get("ropes") or []
    if not ropes or len(ropes[0].get("bodies", [])) < 4:
        return None, False
    beads = np.asarray(ropes[0]["bodies"], dtype=np.int64)
    return trace.position[:, beads], bool(ropes[0].get("closed", True))


def frame_crossings(pos, closed):
    """Crossings of the top view (x, y; z is height) at every frame, as arrays (frame, i, j, ti, tj,
    over_i): segment i runs from bead i to bead i + 1, i < j; tests are half-open so a crossing through a
    bead counts once; neighbouring segments are skipped."""
    T, M, _ = pos.shape
    S = M if closed else M - 1
    pairs = np.triu(np.ones((S, S), dtype=bool), 2)  # non-adjacent pairs, each once
    if closed:
        pairs[0, S - 1] = False  # they share the closing bead
    nxt = np.roll(pos, -1, axis=1) if closed else pos[:, 1:]
    a, d = pos[:, :S], nxt[:, :S] - pos[:, :S]
    lo, hi = np.minimum(a, a + d)[..., :2], np.maximum(a, a + d)[..., :2]
    out = []
    for start in range(0, T, CHUNK):
        L, H = lo[start:start + CHUNK], hi[start:start + CHUNK]
        near = ((L[:, :, None, 0] <= H[:, None, :, 0]) & (L[:, None, :, 0] <= H[:, :, None, 0])
                & (L[:, :, None, 1] <= H[:, None, :, 1]) & (L[:, None, :, 1] <= H[:, :, None, 1]) & pairs)
        f, i, j = np.nonzero(near)  # candidates only: bounding boxes overlap
        f = f + start
        r, s, w = d[f, i, :2], d[f, j, :2], a[f, j, :2] - a[f, i, :2]
        den = r[:, 0] * s[:, 1] - r[:, 1] * s[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (w[:, 0] * s[:, 1] - w[:, 1] * s[:, 0]) / den
            u = (w[:, 0] * r[:, 1] - w[:, 1] * r[:, 0]) / den
        k = np.flatnonzero((t >= 0) & (t < 1) & (u >= 0) & (u < 1))
        f, i, j, ti, tj = f[k], i[k], j[k], t[k], u[k]
        zi = a[f, i, 2] + ti * d[f, i, 2]
        zj = a[f, j, 2] + tj * d[f, j, 2]
        out.append((f, i, j, ti, tj, zi > zj))
    return tuple(np.concatenate(cols) for cols in zip(*out))


def count_changes(counts, hold):
    """(frame, frame_before, old, new) for each change of the crossing count that lasts at least
    ``hold`` frames; shorter blips are the flicker of two strands sliding over each other."""
    T = counts.size
    edge = np.flatnonzero(counts[1:] != counts[:-1]) + 1
    starts, ends = np.concatenate(([0], edge)), np.concatenate((edge, [T]))
    kept = []  # (start, value) of the runs that count
    for s, e, v in zip(starts.tolist(), ends.tolist(), counts[starts].tolist()):
        if kept and (e - s < hold or v == kept[-1][1]):
            continue
        kept.append((s, v))
    out = []
    for (_, old), (s, new) in zip(kept, kept[1:]):
        before = np.flatnonzero(counts[:s] == old)
        out.append((s, int(before[-1]) if before.size else s - 1, old, new))
    return out


def unmatched(first, second, segments, closed):
    """Indices of crossings ``first`` [n, 2] (segment pairs) with no counterpart in ``second``
    (greedy nearest match along the rope, at most MATCH segments away at each end)."""
    if len(second) == 0:
        return list(range(len(first)))

    def along(x, y):
        d = np.abs(x - y)
        return np.minimum(d, segments - d) if closed else d

    a, b = first[:, None, :], second[None, :, :]
    dist = np.minimum(along(a[..., 0], b[..., 0]) + along(a[..., 1], b[..., 1]),
                      along(a[..., 0], b[..., 1]) + along(a[..., 1], b[..., 0]))
    taken_a, taken_b = set(), set()
    for flat in np.argsort(dist, axis=None, kind="stable").tolist():
        x, y = divmod(flat, dist.shape[1])
        if dist[x, y] > 2 * MATCH:
            break
        if x not in taken_a and y not in taken_b:
            taken_a.add(x)
            taken_b.add(y)
    return [x for x in range(len(first)) if x not in taken_a]


def detect(trace, events):
    pos, closed = rope_positions(trace)
    if pos is None:
        return []
    T, M, _ = pos.shape
    S = M if closed else M - 1
    f, i, j, ti, tj, over_i = frame_crossings(pos, closed)
    counts = np.bincount(f, minlength=T)
    at = np.concatenate(([0], np.cumsum(counts)))
    beads = np.asarray(trace.meta["ropes"][0]["bodies"])
    names = trace.names
    out = []
    for frame, before, old, new in count_changes(counts, max(1, round(HOLD_SECONDS / trace.dt))):
        if new <= old:
            continue
        now, then = slice(at[frame], at[frame + 1]), slice(at[before], at[before + 1])
        pairs_now = np.stack([i[now], j[now]], axis=1)
        pairs_then = np.stack([i[then], j[then]], axis=1)
        for k in unmatched(pairs_now, pairs_then, S, closed):
            r = at[frame] + k
            bi, bj = (i[r] + (ti[r] >= 0.5)) % M, (j[r] + (tj[r] >= 0.5)) % M
            up, down = (bi, bj) if over_i[r] else (bj, bi)
            out.append((frame, {"object_a": names[beads[up]], "object_b": names[beads[down]], "crossings": int(new)}))
    return out
