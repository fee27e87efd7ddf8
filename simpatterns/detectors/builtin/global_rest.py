import numpy as np

PATTERN = "global rest"
DESCRIPTION = (
    "Every dynamic body is at rest (speed under 1 px/s, spin under 0.1 rad/s) for at least 0.5 s. "
    "Emitted once at the first frame of each such period, with its length in frames (counted up to the "
    "end of the trace if it lasts that long)."
)
DEPENDS = []
PARAMS = ["frames"]

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s; at 1 px/s a body needs 25 s to cross a grid cell
REST_SPIN = 0.1  # rad/s: the rim of a 12 px ball then moves about 1 px/s
MIN_SECONDS = 0.5  # shorter lulls (the top of a bounce) are not rest


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    v = np.take(trace.velocity, dyn, axis=1)
    spin = np.take(trace.angular_velocity, dyn, axis=1)
    spin = spin * spin if spin.ndim == 2 else (spin * spin).sum(axis=2)  # 3-D traces: spin vectors
    still = ((v * v).sum(axis=2) < REST_SPEED ** 2) & (spin < REST_SPIN ** 2)
    d = np.diff(np.concatenate(([0], still.all(axis=1).astype(np.int8), [0])))
    start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    return [(int(s), {"frames": int(e - s)}) for s, e in zip(start, stop) if e - s >= min_frames]
