import numpy as np

PATTERN = "wedged between two bodies"
DESCRIPTION = (
    "A dynamic body is jammed between two others pressing from roughly opposite sides (two contact normals "
    "more than 120 degrees apart, squeezing along a line within 60 degrees of horizontal, e.g. stuck in a "
    "narrow gap; a body merely carrying a load on top is not wedged) while it stays nearly still (under "
    "2 px/s) for at least 0.5 s. Emitted once at the start of each such interval, with object and the two "
    "bodies it is wedged between (between, in body index order)."
)
DEPENDS = []
PARAMS = ["object", "between"]

OPPOSE_COS = -0.5  # normals more than 120 degrees apart squeeze the body; a floor and a side wall (90) do not
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
    T = trace.num_frames
    f, a, b, n = trace.contact_frame, trace.contact_a, trace.contact_b, trace.contact_normal
    speed = trace.speed()
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for x in np.flatnonzero(trace.dynamic_mask):
        rows = np.flatnonzero((a == x) | (b == x))
        rows = rows[np.argsort(f[rows], kind="stable")]
        if rows.size < 2 or trace.bodies[x].role == "wall":
            continue
        into = np.where((b[rows] == x)[:, None], n[rows], -n[rows])  # contact normals pointing into x
        other = np.where(a[rows] == x, b[rows], a[rows])
        fr = f[rows]
        # every two contacts of x in the same frame (rows are frame-sorted, so they sit < lag apart)
        lags = range(1, int(np.bincount(fr).max()))
        same = [np.flatnonzero(fr[lag:] == fr[:-lag]) for lag in lags]
        if not same:
            continue
        p = np.concatenate(same)
        q = p + np.concatenate([np.full(k.size, lag) for lag, k in zip(lags, same)])
        cos = (into[p] * into[q]).sum(axis=1)
        squeeze = into[p] - into[q]
        ok = (cos <= OPPOSE_COS) & (np.abs(squeeze[:, 1]) <= SQUEEZE_SLOPE * np.abs(squeeze[:, 0]))
        wedged = np.zeros(T, dtype=bool)
        wedged[fr[p[ok]]] = True
        start, stop = runs(wedged & (speed[:, x] < STILL_SPEED), MERGE_GAP)
        for s in start[stop - start >= min_frames]:
            m = np.flatnonzero(ok & (fr[p] == s))
            k = m[np.argmin(cos[m])]
            pair = sorted((int(other[p[k]]), int(other[q[k]])))
            out.append((int(s), {"object": trace.names[x], "between": [trace.names[i] for i in pair]}))
    return sorted(out, key=lambda ev: ev[0])
