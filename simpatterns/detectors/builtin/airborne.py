import numpy as np

PATTERN = "airborne"
DESCRIPTION = (
    "A dynamic body touches nothing (no other body, ground or wall) for at least 1/6 s. Emitted once at "
    "the first frame of each such interval (take-off, or frame 0 for a body that starts in the air), "
    "with its length in frames (counted up to the end of the trace if it is still airborne)."
)
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

MIN_SECONDS = 1 / 6  # 10 frames: shorter gaps are the contact chatter of an impact or of a rough roll


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    T, M = trace.num_frames, dyn.size
    width = T + 2  # one row per dynamic body: column 1 + t is frame t, the first and last columns stay False
    slot = np.full(trace.num_bodies, M)  # row of each dynamic body; fixed bodies share a spare last row
    slot[dyn] = np.arange(M)
    free = np.ones((M + 1) * width, dtype=bool)  # the body touches nothing at that frame
    at = trace.contact_frame + 1
    free[slot[trace.contact_a] * width + at] = free[slot[trace.contact_b] * width + at] = False
    free = free[:M * width]
    free[::width] = free[width - 1::width] = False
    edge = np.flatnonzero(free[1:] != free[:-1])  # alternately the start and the end of a free run
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    long = np.flatnonzero(stop - start >= max(1, round(MIN_SECONDS / trace.dt)))
    names = trace.names
    out = [(s, {"object": names[b], "frames": e - s})
           for b, s, e in zip(dyn[row[long]].tolist(), start[long].tolist(), stop[long].tolist())]
    return sorted(out, key=lambda ev: ev[0])
