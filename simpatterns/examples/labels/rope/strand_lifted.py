import numpy as np

PATTERN = "strand lifted"
DESCRIPTION = (
    "A stretch of the rope is lifted: some bead rises more than LIFT metres above the rope's median height "
    "for at least MIN_SECONDS. Emitted once at the first frame of each such interval, with object the "
    "highest bead then and frames its length."
)
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

LIFT = 0.05  # m above the median bead: a start value for the search to tune
MIN_SECONDS = 0.1


def detect(trace, events):
    ropes = trace.meta.get("ropes") or []
    if not ropes:
        return []
    beads = np.asarray(ropes[0]["bodies"], dtype=np.int64)
    z = trace.position[:, beads, 2]
    mid = z.shape[1] // 2
    above = z - np.partition(z, mid, axis=1)[:, mid:mid + 1]  # minus the median height
    top = np.argmax(above, axis=1)
    lifted = above[np.arange(z.shape[0]), top] > LIFT
    padded = np.concatenate(([False], lifted, [False]))
    edge = np.flatnonzero(padded[1:] != padded[:-1])
    start, stop = edge[::2], edge[1::2]
    long = stop - start >= max(1, round(MIN_SECONDS / trace.dt))
    names = trace.names
    return [(s, {"object": names[beads[top[s]]], "frames": e - s}) for s, e in zip(start[long].tolist(), stop[long].tolist())]
