import numpy as np

PATTERN = "wedged between two bodies"
DESCRIPTION = (
    "A dynamic body is jammed between bodies pressing from roughly opposite sides (the contact normals "
    "pushing into it nearly cancel: for two contacts, more than 120 degrees apart) along a line within 60 "
    "degrees of horizontal (e.g. stuck in a narrow gap; a body merely carrying a load on top is not wedged), "
    "while it stays nearly still (under 2 px/s) for at least 0.5 s. Emitted once at the start of each such "
    "interval, with object and the two most opposed bodies it is wedged between (between, in index order)."
)
DEPENDS = []
PARAMS = ["object", "between"]
BODY_PARAMS = ["object", "between"]
DIRECTED = False
DURATION = "instant"

MAX_NET = 1.0  # |sum of unit normals into the body|: two normals 120 degrees apart sum to exactly 1
SQUEEZE_SLOPE = np.tan(np.radians(60))  # squeeze line steeper than 60 degrees is a load resting on the body
STILL_SPEED = 2.0  # px/s: a wedged body barely moves
MIN_SECONDS = 0.5  # a passing double contact is not a wedge
MERGE_GAP = 2  # frames of contact flicker that do not end the wedge


def runs(mask, gap=0):
    """(start, stop) of the True runs of a 1-D mask, stop exclusive; runs at most `gap` frames apart merge."""
    padded = np.concatenate(([False], mask, [False]))
    edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately a start and a stop
    start, stop = edge[::2], edge[1::2]
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    T, N = trace.num_frames, trace.num_bodies
    f, a, b, n = trace.contact_frame, trace.contact_a, trace.contact_b, trace.contact_normal
    # contacts per frame of each dynamic non-wall body (row slot[x]; the rest share a spare last row)
    wedgeable = np.flatnonzero(trace.dynamic_mask & np.array([body.role != "wall" for body in trace.bodies]))
    M = wedgeable.size
    slot = np.full(N, M)
    slot[wedgeable] = np.arange(M)
    count = (np.bincount(np.take(slot, a) * T + f, minlength=(M + 1) * T)
             + np.bincount(np.take(slot, b) * T + f, minlength=(M + 1) * T)).reshape(M + 1, T)
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    # a wedged body touches two or more bodies for long enough; most bodies never do
    for x in wedgeable[(count[:M] >= 2).sum(axis=1) >= min_frames]:
        v = trace.velocity[:, x]
        maybe = (count[slot[x]] >= 2) & (v[:, 0] ** 2 + v[:, 1] ** 2 < STILL_SPEED ** 2)
        if maybe.sum() < min_frames:
            continue
        as_a, as_b = np.flatnonzero(a == x), np.flatnonzero(b == x)  # its contacts; normals point from a into b
        fa, fb = f[as_a].astype(np.intp), f[as_b].astype(np.intp)  # bincount's index type: converted once, not per call
        na, nb = np.take(n, as_a, axis=0), np.take(n, as_b, axis=0)

        def per_frame(wa, wb):  # [T] sums over the body's contacts at each frame
            return np.bincount(fa, wa, T) + np.bincount(fb, wb, T)

        net_x, net_y = per_frame(-na[:, 0], nb[:, 0]), per_frame(-na[:, 1], nb[:, 1])
        abs_x, abs_y = per_frame(np.abs(na[:, 0]), np.abs(nb[:, 0])), per_frame(np.abs(na[:, 1]), np.abs(nb[:, 1]))
        squeezed = maybe & (net_x ** 2 + net_y ** 2 <= MAX_NET ** 2) & (abs_y <= SQUEEZE_SLOPE * abs_x)
        if squeezed.sum() < min_frames:
            continue
        start, stop = runs(squeezed, MERGE_GAP)
        for s in start[stop - start >= min_frames].tolist():
            lo, hi = np.searchsorted(f, [s, s + 1])  # the contacts at frame s
            rows = lo + np.flatnonzero((a[lo:hi] == x) | (b[lo:hi] == x))
            into = np.where((b[rows] == x)[:, None], n[rows], -n[rows])
            k, m = np.unravel_index(np.argmin(into @ into.T), (rows.size, rows.size))  # the most opposed two
            pair = sorted(int(a[r] if b[r] == x else b[r]) for r in rows[[k, m]])
            out.append((s, {"object": trace.names[x], "between": [trace.names[i] for i in pair]}))
    return sorted(out, key=lambda ev: ev[0])
