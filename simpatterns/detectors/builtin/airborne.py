import numpy as np

PATTERN = "airborne"
DESCRIPTION = (
    "A dynamic body touches nothing (no other body, ground or wall) for at least 1/6 s. Emitted once at "
    "the first frame of each such interval (take-off, or frame 0 for a body that starts in the air), "
    "with its length in frames (counted up to the end of the trace if it is still airborne)."
)
DEPENDS = []
PARAMS = ["object", "frames"]

MIN_SECONDS = 1 / 6  # 10 frames: shorter gaps are the contact chatter of an impact or of a rough roll


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    free = ~np.take(trace.touching_matrix(), dyn, axis=1).any(axis=2)  # [T, M]
    edge = np.diff(np.concatenate([np.zeros((1, dyn.size), np.int8), free.astype(np.int8),
                                   np.zeros((1, dyn.size), np.int8)]), axis=0)
    start_t, start_k = np.nonzero(edge.T == 1)  # by body, then frame
    stop = np.nonzero(edge.T == -1)[1]
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = [(int(s), {"object": trace.names[dyn[k]], "frames": int(e - s)})
           for k, s, e in zip(start_t, start_k, stop) if e - s >= min_frames]
    return sorted(out, key=lambda ev: ev[0])
