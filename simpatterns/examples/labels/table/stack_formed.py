import numpy as np

PATTERN = "stack formed"
DESCRIPTION = (
    "One dynamic body comes to rest on top of another dynamic body (not on the table or the floor): they "
    "touch with the contact normal within 45 degrees of up for at least MIN_SECONDS. Emitted once when the "
    "stack forms, with object_a the upper body, object_b the lower one, and frames how long it lasts."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "interval"

UP_COS = 0.7
MIN_SECONDS = 0.5  # a start value for the search to tune


def detect(trace, events):
    g = np.asarray(trace.meta.get("gravity", [0.0, 0.0, -9.81]), dtype=float)
    if trace.dim != 3 or not np.linalg.norm(g) > 0:
        return []
    up = -g / np.linalg.norm(g)
    u = trace.contact_normal @ up
    dyn = trace.dynamic_mask
    on_b, on_a = u >= UP_COS, u <= -UP_COS
    upper = np.where(on_b, trace.contact_b, trace.contact_a).astype(np.int64)
    lower = np.where(on_b, trace.contact_a, trace.contact_b).astype(np.int64)
    rows = np.flatnonzero((on_a | on_b) & dyn[upper] & dyn[lower])
    N = trace.num_bodies
    out = []
    if rows.size == 0:
        return out
    keys = np.sort(upper[rows] * N + lower[rows])
    for key in keys[np.concatenate(([True], keys[1:] != keys[:-1]))].tolist():  # unique keys, in order
        frames = trace.contact_frame[rows[(upper[rows] * N + lower[rows]) == key]]
        padded = np.zeros(trace.num_frames + 2, dtype=bool)
        padded[frames + 1] = True
        edge = np.flatnonzero(padded[1:] != padded[:-1])
        for s, e in zip(edge[::2].tolist(), edge[1::2].tolist()):
            if e - s >= max(1, round(MIN_SECONDS / trace.dt)):
                out.append((s, {"object_a": trace.names[key // N], "object_b": trace.names[key % N], "frames": e - s}))
    return sorted(out, key=lambda ev: ev[0])
