import numpy as np

PATTERN = "global rest"
DESCRIPTION = (
    "Every dynamic body is at rest (speed under 1 px/s, spin under 0.1 rad/s) for at least 0.5 s. "
    "Emitted once at the first frame of each such period, with its length in frames (counted up to the "
    "end of the trace if it lasts that long)."
)
DEPENDS = []
PARAMS = ["frames"]
BODY_PARAMS = []
DIRECTED = False
DURATION = "interval"

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s; at 1 px/s a body needs 25 s to cross a grid cell
REST_SPIN = 0.1  # rad/s: the rim of a 12 px ball then moves about 1 px/s
MIN_SECONDS = 0.5  # shorter lulls (the top of a bounce) are not rest


def detect(trace, events):
    still = np.ones(trace.num_frames, dtype=bool)
    for i in np.flatnonzero(trace.dynamic_mask):  # a few bodies: one column at a time
        v, w = trace.velocity[:, i], trace.angular_velocity[:, i]
        speed2 = v[:, 0] ** 2 + v[:, 1] ** 2
        if trace.dim == 3:
            speed2 = speed2 + v[:, 2] ** 2
        spin2 = w * w if w.ndim == 1 else (w * w).sum(axis=1)  # 3-D traces: spin vectors
        still &= (speed2 < REST_SPEED ** 2) & (spin2 < REST_SPIN ** 2)
    padded = np.concatenate(([False], still, [False]))
    edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately the start and the end of a rest
    start, stop = edge[::2], edge[1::2]
    long = stop - start >= max(1, round(MIN_SECONDS / trace.dt))
    return [(s, {"frames": e - s}) for s, e in zip(start[long].tolist(), stop[long].tolist())]
