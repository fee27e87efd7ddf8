import numpy as np

PATTERN = "support relationship"
DESCRIPTION = (
    "object_a rests on object_b: they touch and object_b pushes object_a upward (the contact normal is "
    "within 60 degrees of straight up, so object_a is above the contact). object_b may be any body, the "
    "ground included. Emitted once at the first frame of each support interval, with its length in frames "
    "(counted up to the end of the trace if the support lasts that long)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]

UP_COS = 0.5  # normal within 60 degrees of vertical: a 20 degree ramp supports, a side wall does not
MERGE_GAP = 2  # frames: resting contacts flicker for a step or two without the support ending


def detect(trace, events):
    T, N = trace.num_frames, trace.num_bodies
    up = trace.contact_normal[:, 1]  # the normal points from contact_a to contact_b
    on_b = up >= UP_COS  # contact_b rests on contact_a
    on_a = up <= -UP_COS
    upper = np.where(on_b, trace.contact_b, trace.contact_a)[on_a | on_b].astype(int)
    lower = np.where(on_b, trace.contact_a, trace.contact_b)[on_a | on_b].astype(int)
    frame = trace.contact_frame[on_a | on_b]
    keep = trace.dynamic_mask[upper]
    upper, lower, frame = upper[keep], lower[keep], frame[keep]
    key = upper * N + lower
    out = []
    for k in np.unique(key):
        mask = np.zeros(T, dtype=np.int8)
        mask[frame[key == k]] = 1
        d = np.diff(np.concatenate(([0], mask, [0])))
        start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        merge = np.concatenate(([True], start[1:] - stop[:-1] > MERGE_GAP))
        start, stop = start[merge], stop[np.concatenate((merge[1:], [True]))]
        a, b = trace.names[k // N], trace.names[k % N]
        out += [(int(s), {"object_a": a, "object_b": b, "frames": int(e - s)}) for s, e in zip(start, stop)]
    return sorted(out, key=lambda ev: ev[0])
