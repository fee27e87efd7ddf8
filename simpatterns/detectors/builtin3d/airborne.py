import numpy as np

PATTERN = "airborne"
DESCRIPTION = (
    "A dynamic body touches nothing (no other body, floor or table) for at least 0.1 s while gravity acts. "
    "Emitted once at the first frame of each such interval (take-off, or frame 0 for a body that starts in "
    "the air), with its length in frames (up to the end of the trace if it is still airborne). Traces "
    "without gravity, and rope beads, have none."
)
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

MIN_SECONDS = 0.1  # shorter gaps are the contact chatter of an impact or a roll


def detect(trace, events):
    g = np.asarray(trace.meta.get("gravity", [0.0, 0.0, -9.81]), dtype=float)
    if not np.linalg.norm(g) > 0:
        return []
    keep = trace.dynamic_mask & np.array([b.role != "rope bead" for b in trace.bodies], dtype=bool)
    dyn = np.flatnonzero(keep)
    T, M = trace.num_frames, dyn.size
    if M == 0:
        return []
    width = T + 2  # one row per body: column 1 + t is frame t, the first and last columns stay False
    slot = np.full(trace.num_bodies, M)
    slot[dyn] = np.arange(M)
    free = np.ones((M + 1) * width, dtype=bool)
    at = trace.contact_frame.astype(np.int64) + 1
    free[slot[trace.contact_a] * width + at] = False
    free[slot[trace.contact_b] * width + at] = False
    free = free[:M * width]
    free[::width] = False
    free[width - 1::width] = False
    edge = np.flatnonzero(free[1:] != free[:-1])
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    long = np.flatnonzero(stop - start >= max(1, round(MIN_SECONDS / trace.dt)))
    names = trace.names
    out = [(s, {"object": names[b], "frames": e - s})
           for b, s, e in zip(dyn[row[long]].tolist(), start[long].tolist(), stop[long].tolist())]
    return sorted(out, key=lambda ev: ev[0])
