import numpy as np

PATTERN = "loop tightened"
DESCRIPTION = (
    "A loop of the rope is pulled tighter: while the number of crossings in the top view stays the same, "
    "the smallest loop (the shorter stretch of rope between the two passes of one crossing) shrinks by at "
    "least 4 beads and 30 percent. Emitted once per stretch of constant crossings, at the frame the "
    "shrinking starts, with object the bead on the upper strand of that crossing when the loop is "
    "tightest, beads the loop's length then, and frames how long the shrinking took."
)
DEPENDS = []
PARAMS = ["object", "beads", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

CHUNK = 32  # frames per vectorised batch (memory)
MIN_BEADS = 4
MIN_FRACTION = 0.3


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


def detect(trace, events):
    pos, closed = rope_positions(trace)
    if pos is None:
        return []
    T, M, _ = pos.shape
    S = M if closed else M - 1
    f, i, j, ti, tj, over_i = frame_crossings(pos, closed)
    if f.size == 0:
        return []
    counts = np.bincount(f, minlength=T)
    loop = j - i
    if closed:
        loop = np.minimum(loop, S - loop)
    smallest = np.full(T, np.iinfo(np.int64).max)
    np.minimum.at(smallest, f, loop)
    # the row of each frame's smallest loop (first such row)
    order = np.lexsort((loop, f))
    first = np.concatenate(([True], f[order][1:] != f[order][:-1]))
    row_of = np.full(T, -1)
    row_of[f[order][first]] = order[first]
    edge = np.flatnonzero(counts[1:] != counts[:-1]) + 1
    starts, ends = np.concatenate(([0], edge)), np.concatenate((edge, [T]))
    beads = np.asarray(trace.meta["ropes"][0]["bodies"])
    names = trace.names
    out = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if counts[s] == 0 or e - s < 2:
            continue
        m = smallest[s:e]
        low = int(np.argmin(m))
        high = int(np.argmax(m[:low + 1]))
        drop = int(m[high] - m[low])
        if drop < MIN_BEADS or drop < MIN_FRACTION * m[high]:
            continue
        r = row_of[s + low]
        bead = (i[r] + (ti[r] >= 0.5)) % M if over_i[r] else (j[r] + (tj[r] >= 0.5)) % M
        out.append((s + high, {"object": names[beads[bead]], "beads": int(m[low]), "frames": low - high + 1}))
    return out
