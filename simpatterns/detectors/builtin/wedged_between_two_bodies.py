import numpy as np

PATTERN = "wedged between two bodies"
DESCRIPTION = (
    "A dynamic body is held between two others pressing from roughly opposite sides (two contact normals "
    "more than 120 degrees apart, e.g. jammed in a narrow gap or pinned under a body) while it stays "
    "nearly still (under 2 px/s) for at least 0.5 s. Emitted once at the start of each such interval, "
    "with object and the two bodies it is wedged between (between, in body index order)."
)
DEPENDS = []
PARAMS = ["object", "between"]

OPPOSE_COS = -0.5  # normals more than 120 degrees apart squeeze the body; a floor and a side wall (90) do not
STILL_SPEED = 2.0  # px/s: a wedged body barely moves
MIN_SECONDS = 0.5  # a passing double contact is not a wedge
MERGE_GAP = 2  # frames of contact flicker that do not end the wedge


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
        fr = f[rows]
        best = np.ones(T)  # per frame: the most opposed pair of normals (cosine)
        for lag in range(1, int(np.bincount(fr).max())):
            same = fr[lag:] == fr[:-lag]
            np.minimum.at(best, fr[lag:][same], (into[lag:] * into[:-lag]).sum(axis=1)[same])
        wedged = ((best <= OPPOSE_COS) & (speed[:, x] < STILL_SPEED)).astype(np.int8)
        d = np.diff(np.concatenate(([0], wedged, [0])))
        start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        merge = np.concatenate(([True], start[1:] - stop[:-1] > MERGE_GAP))
        start, stop = start[merge], stop[np.concatenate((merge[1:], [True]))]
        for s in start[stop - start >= min_frames]:
            k = np.flatnonzero(fr == s)
            cos = into[k] @ into[k].T
            p, q = np.unravel_index(np.argmin(cos), cos.shape)
            pair = sorted(int(np.where(a[rows[r]] == x, b[rows[r]], a[rows[r]])) for r in k[[p, q]])
            out.append((int(s), {"object": trace.names[x], "between": [trace.names[i] for i in pair]}))
    return sorted(out, key=lambda ev: ev[0])
