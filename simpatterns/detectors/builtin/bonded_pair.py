import numpy as np

PATTERN = "bonded pair"
DESCRIPTION = (
    "Co-moving bonded pair: two dynamic bodies stay in contact for at least 0.5 s while moving as one "
    "(relative speed under 2 px/s) and together travel at least 20 px. Emitted once at the start of each "
    "such interval, with object_a and object_b in body index order and its length in frames."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]

REL_SPEED = 2.0  # px/s between the centres: they move as one body
MIN_SECONDS = 0.5  # a brief shared push is not a bond
MIN_TRAVEL = 20.0  # px the pair's midpoint moves: most of a grid cell, so two bodies resting together do not count
MERGE_GAP = 2  # frames of contact flicker that do not break the bond


def runs(mask, gap=0):
    """(start, stop) of the True runs of a 1-D mask, stop exclusive; runs at most `gap` frames apart merge."""
    d = np.diff(np.concatenate(([0], np.asarray(mask, dtype=np.int8), [0])))
    start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    T, N = trace.num_frames, trace.num_bodies
    ok = trace.dynamic_mask & np.array([b.role != "wall" for b in trace.bodies])
    a, b = trace.contact_a.astype(int), trace.contact_b.astype(int)
    rows = ok[a] & ok[b]
    key = a[rows] * N + b[rows]
    frames = trace.contact_frame[rows]
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for k in np.unique(key):
        i, j = divmod(int(k), N)
        mask = np.zeros(T, dtype=bool)
        mask[frames[key == k]] = True
        mask &= np.linalg.norm(trace.velocity[:, i] - trace.velocity[:, j], axis=1) < REL_SPEED
        start, stop = runs(mask, MERGE_GAP)
        mid = (trace.position[:, i] + trace.position[:, j]) / 2
        for s, e in zip(start, stop):
            if e - s >= min_frames and np.linalg.norm(np.diff(mid[s:e], axis=0), axis=1).sum() >= MIN_TRAVEL:
                out.append((int(s), {"object_a": trace.names[i], "object_b": trace.names[j], "frames": int(e - s)}))
    return sorted(out, key=lambda ev: ev[0])
