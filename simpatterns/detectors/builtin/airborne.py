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
    free = ~trace.touching_matrix().any(axis=2) & trace.dynamic_mask  # [T, N]
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for i in np.flatnonzero(free.any(axis=0)):
        d = np.diff(np.concatenate(([0], free[:, i].astype(np.int8), [0])))
        for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            if e - s >= min_frames:
                out.append((int(s), {"object": trace.names[i], "frames": int(e - s)}))
    return out
