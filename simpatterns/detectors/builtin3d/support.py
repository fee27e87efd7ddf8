import numpy as np

PATTERN = "support"
DESCRIPTION = (
    "object_a rests on object_b: they touch and the contact normal is within 45 degrees of up (against "
    "gravity), object_a above. object_b may be any body, the floor or a table included. Emitted once at "
    "the first frame of each support interval, with its length in frames (up to the end of the trace if it "
    "lasts). Traces without gravity have no support."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "interval"

UP_COS = 0.7  # normal within 45 degrees of vertical: a tilted box on a box still rests, a side push does not
MERGE_SECONDS = 0.02  # resting contacts flicker for a step or two without the support ending


def detect(trace, events):
    g = np.asarray(trace.meta.get("gravity", [0.0, 0.0, -9.81]), dtype=float)
    if trace.dim != 3 or not np.linalg.norm(g) > 0:
        return []
    up = -g / np.linalg.norm(g)
    N = trace.num_bodies
    u = trace.contact_normal @ up  # the normal points from contact_a to contact_b
    on_b, on_a = u >= UP_COS, u <= -UP_COS
    upper = np.where(on_b, trace.contact_b, trace.contact_a).astype(np.int64)
    lower = np.where(on_b, trace.contact_a, trace.contact_b).astype(np.int64)
    rows = np.flatnonzero((on_a | on_b) & trace.dynamic_mask[upper])
    if rows.size == 0:
        return []
    key = upper[rows] * N + lower[rows]
    frame = trace.contact_frame[rows].astype(np.int64)
    order = np.lexsort((frame, key))
    key, frame = key[order], frame[order]
    gap = max(1, int(round(MERGE_SECONDS / trace.dt)))
    new = np.ones(key.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]) | (frame[1:] - frame[:-1] > gap + 1)
    starts = np.flatnonzero(new)
    ends = np.concatenate((starts[1:], [key.size])) - 1
    names = trace.names
    out = [(int(frame[s]), {"object_a": names[int(key[s]) // N], "object_b": names[int(key[s]) % N],
                             "frames": int(frame[e] - frame[s] + 1)})
           for s, e in zip(starts.tolist(), ends.tolist())]
    return sorted(out, key=lambda ev: ev[0])
