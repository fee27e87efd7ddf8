import numpy as np

PATTERN = "at rest"
DESCRIPTION = (
    "A dynamic body is still: speed under 0.02 m/s and spin under 0.2 rad/s for at least 0.25 s. Emitted "
    "once at the first frame of each such interval, with its length in frames (up to the end of the trace "
    "if it lasts). Rope beads are left to the rope patterns."
)
DEPENDS = []
PARAMS = ["object", "frames"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "interval"

REST_SPEED = 0.02  # m/s
REST_SPIN = 0.2  # rad/s: the rim of a 10 cm ball then moves 1 cm/s
MIN_SECONDS = 0.25  # the top of a bounce is not rest


def detect(trace, events):
    bodies = np.flatnonzero(trace.dynamic_mask & np.array([b.role != "rope bead" for b in trace.bodies], dtype=bool))
    if bodies.size == 0:
        return []
    v = trace.velocity[:, bodies]
    w = trace.angular_velocity[:, bodies]
    spin2 = (w * w).sum(axis=2) if w.ndim == 3 else w * w
    still = ((v * v).sum(axis=2) < REST_SPEED ** 2) & (spin2 < REST_SPIN ** 2)  # [T, B]
    T, B = still.shape
    padded = np.zeros((B, T + 2), dtype=bool)
    padded[:, 1:-1] = still.T
    flat = padded.ravel()
    edge = np.flatnonzero(flat[1:] != flat[:-1])  # alternately the start and the end of a still run
    row = edge[::2] // (T + 2)
    start, stop = edge[::2] - row * (T + 2), edge[1::2] - row * (T + 2)
    long = np.flatnonzero(stop - start >= max(1, round(MIN_SECONDS / trace.dt)))
    names = trace.names
    out = [(s, {"object": names[b], "frames": e - s})
           for b, s, e in zip(bodies[row[long]].tolist(), start[long].tolist(), stop[long].tolist())]
    return sorted(out, key=lambda ev: ev[0])
