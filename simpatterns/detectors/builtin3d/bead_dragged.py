import numpy as np

PATTERN = "bead dragged"
DESCRIPTION = (
    "One bead of the rope is pulled ahead of the rest: it is the fastest bead, moving at 0.1 m/s or more "
    "and at least three times the rope's median bead speed, for at least 0.05 s, and the fastest bead stays "
    "within 3 beads of where it was (a new bead far away starts a new drag). Emitted once at the first frame "
    "of each such interval, with object the bead dragged most often in it and frames its length."
)
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

MIN_SPEED = 0.1  # m/s
RATIO = 3.0  # fastest bead over the median bead
MIN_SECONDS = 0.05
NEAR = 3  # beads the fastest bead may move along the rope between frames of one drag


def detect(trace, events):
    ropes = trace.meta.get("ropes") or []
    if not ropes or len(ropes[0].get("bodies", [])) < 4:
        return []
    beads = np.asarray(ropes[0]["bodies"], dtype=np.int64)
    if (np.diff(beads) == 1).all():  # consecutive bodies, as recorded: a view, not a copy
        v = trace.velocity[:, beads[0] : beads[-1] + 1]
    else:
        v = trace.velocity[:, beads]
    # [T, M]; component by component: a numpy reduction over a last axis of 3 costs several times more
    speed = np.sqrt(v[:, :, 0] * v[:, :, 0] + v[:, :, 1] * v[:, :, 1] + v[:, :, 2] * v[:, :, 2])
    fastest = np.argmax(speed, axis=1)
    top = speed[np.arange(speed.shape[0]), fastest]
    M = beads.size
    median = np.partition(speed, M // 2, axis=1)[:, M // 2]  # the median (a partition, no sort)
    dragged = (top >= MIN_SPEED) & (top >= RATIO * median)
    step = np.abs(np.diff(fastest))
    jump = np.concatenate(([False], np.minimum(step, M - step) > NEAR))
    new = dragged & (jump | ~np.concatenate(([False], dragged[:-1])))  # a drag starts here
    start = np.flatnonzero(new)
    ends_at = dragged & ~np.concatenate((dragged[1:] & ~jump[1:], [False]))  # last frame of a drag
    stop = np.flatnonzero(ends_at) + 1
    long = stop - start >= max(1, round(MIN_SECONDS / trace.dt))
    start, stop = start[long], stop[long]
    if not start.size:
        return []
    # the bead dragged most often in each drag (the lowest of those tied), all drags at once:
    # count (drag, fastest bead) over the drags' frames, then take each drag's top count
    length = stop - start
    drag = np.repeat(np.arange(start.size), length)
    frames = np.arange(length.sum()) + np.repeat(start - np.cumsum(length) + length, length)
    pair, count = np.unique(drag * M + fastest[frames], return_counts=True)
    order = np.lexsort((pair % M, -count, pair // M))
    first = order[np.concatenate(([True], pair[order][1:] // M != pair[order][:-1] // M))]
    names = trace.names
    return [
        (s, {"object": names[beads[b]], "frames": n})
        for s, b, n in zip(start.tolist(), (pair[first] % M).tolist(), length.tolist())
    ]
