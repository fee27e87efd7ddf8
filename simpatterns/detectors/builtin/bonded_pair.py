import numpy as np

PATTERN = "bonded pair"
DESCRIPTION = (
    "Co-moving bonded pair: two dynamic bodies stay in contact for at least 0.5 s while moving as one "
    "(relative speed under 2 px/s) and together travel at least 20 px. Emitted once at the start of each "
    "such interval, with object_a and object_b in body index order and its length in frames."
)
DEPENDS = ["collision start", "collision end"]
PARAMS = ["object_a", "object_b", "frames"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "interval"

REL_SPEED = 2.0  # px/s between the centres: they move as one body
MIN_SECONDS = 0.5  # a brief shared push is not a bond
MIN_TRAVEL = 20.0  # px the pair's midpoint moves: most of a grid cell, so two bodies resting together do not count
MERGE_GAP = 2  # frames apart that still count as one contact (flicker while pushing)


def squared(v):
    """[L]: squared length of each row of v [L, D] (the sum of squares, in axis order)."""
    return sum(v[:, d] ** 2 for d in range(v.shape[1]))


def detect(trace, events):
    T = trace.num_frames
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    movable = {}  # body name -> dynamic and not a wall

    def can_bond(name):
        if name not in movable:
            body = trace.body(name)
            movable[name] = body.dynamic and body.role != "wall"
        return movable[name]

    ends = {}
    for frame, p in events["collision end"]:
        ends.setdefault((p["object_a"], p["object_b"]), []).append(frame)
    contacts = {}  # pair of dynamic non-wall bodies -> [start, stop) contact intervals, flicker merged
    for frame, p in events["collision start"]:
        pair = (p["object_a"], p["object_b"])
        if not (can_bond(pair[0]) and can_bond(pair[1])):
            continue
        stop = next((e for e in ends.get(pair, []) if e > frame), T)
        spans = contacts.setdefault(pair, [])
        if spans and frame - spans[-1][1] <= MERGE_GAP:
            spans[-1][1] = stop
        else:
            spans.append([frame, stop])
    out = []
    for (name_a, name_b), spans in contacts.items():
        i, j = trace.body_index(name_a), trace.body_index(name_b)
        for start, stop in spans:
            if stop - start < min_frames:
                continue
            together = squared(trace.velocity[start:stop, i] - trace.velocity[start:stop, j]) < REL_SPEED ** 2
            padded = np.concatenate(([False], together, [False]))
            edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately a start and a stop of moving as one
            mid = (trace.position[start:stop, i] + trace.position[start:stop, j]) / 2
            for s, e in zip(edge[::2].tolist(), edge[1::2].tolist()):
                if e - s >= min_frames and np.sqrt(squared(np.diff(mid[s:e], axis=0))).sum() >= MIN_TRAVEL:
                    out.append((start + s, {"object_a": name_a, "object_b": name_b, "frames": e - s}))
    return sorted(out, key=lambda ev: ev[0])
