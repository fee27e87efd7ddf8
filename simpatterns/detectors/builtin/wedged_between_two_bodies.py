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

MAX_NET = 1.0  # |sum of unit normals into the body|: two normals 120 degrees apart sum to exactly 1
SQUEEZE_SLOPE = np.tan(np.radians(60))  # squeeze line steeper than 60 degrees is a load resting on the body
STILL_SPEED = 2.0  # px/s: a wedged body barely moves
MIN_SECONDS = 0.5  # a passing double contact is not a wedge
MERGE_GAP = 2  # frames of contact flicker that do not end the wedge


def runs(mask, gap=0):
    """(start, stop) of the True runs of a 1-D mask, stop exclusive; runs at most `gap` frames apart merge."""
    d = np.diff(np.concatenate(([0], np.asarray(mask, dtype=np.int8), [0])))
    start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    T, N = trace.num_frames, trace.num_bodies
    f, a, b, n = trace.contact_frame.astype(int), trace.contact_a, trace.contact_b, trace.contact_normal
    at_a, at_b = f * N + a, f * N + b  # the normal points from a into b

    def per_body(wa, wb):  # [T, N] sums over each body's contacts
        return (np.bincount(at_a, wa, T * N) + np.bincount(at_b, wb, T * N)).reshape(T, N)

    count = per_body(None, None)
    net_x, net_y = per_body(-n[:, 0], n[:, 0]), per_body(-n[:, 1], n[:, 1])
    abs_x, abs_y = per_body(np.abs(n[:, 0]), np.abs(n[:, 0])), per_body(np.abs(n[:, 1]), np.abs(n[:, 1]))
    v = trace.velocity
    squeezed = ((count >= 2) & (net_x ** 2 + net_y ** 2 <= MAX_NET ** 2) & (abs_y <= SQUEEZE_SLOPE * abs_x)
                & (v[..., 0] ** 2 + v[..., 1] ** 2 < STILL_SPEED ** 2) & trace.dynamic_mask)
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for x in np.flatnonzero(squeezed.sum(axis=0) >= min_frames):
        if trace.bodies[x].role == "wall":
            continue
        start, stop = runs(squeezed[:, x], MERGE_GAP)
        for s in start[stop - start >= min_frames]:
            rows = np.flatnonzero((f == s) & ((a == x) | (b == x)))
            into = np.where((b[rows] == x)[:, None], n[rows], -n[rows])
            k, m = np.unravel_index(np.argmin(into @ into.T), (rows.size, rows.size))  # the most opposed two
            pair = sorted(int(a[r] if b[r] == x else b[r]) for r in rows[[k, m]])
            out.append((int(s), {"object": trace.names[x], "between": [trace.names[i] for i in pair]}))
    return sorted(out, key=lambda ev: ev[0])
