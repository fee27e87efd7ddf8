import numpy as np

PATTERN = "comes to rest"
DESCRIPTION = (
    "A dynamic body stops moving: it is at rest (speed under 1 px/s and spin under 0.1 rad/s) for at least "
    "0.5 s (shorter lulls, such as the top of a bounce, are not rest). Emitted at the first frame of each "
    "such stretch (frame 0 for a body at rest from the start), with its length in frames (counted up to the "
    "end of the trace if it lasts that long) and surface: the body it rests on then (of the bodies it touches "
    "in the stretch's first 3 frames, the one whose contact pushes it most nearly straight up; \"none\" if "
    "it touches nothing)."
)
DEPENDS = []
PARAMS = ["object", "surface", "frames"]
BODY_PARAMS = ["object", "surface"]
DIRECTED = False
DURATION = "interval"

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s; at 1 px/s a body needs 25 s to cross a grid cell
REST_SPIN = 0.1  # rad/s: the rim of a 12 px ball then moves about 1 px/s
MIN_SECONDS = 0.5  # shorter lulls (the top of a bounce) are not rest
MERGE_GAP = 2  # frames: contacts flicker; look this far past the first frame for the support


def rests(trace):
    """Rest stretches of every dynamic body: arrays (body, first frame, stop frame exclusive), by body then frame."""
    dyn = np.flatnonzero(trace.dynamic_mask)
    T, M = trace.num_frames, dyn.size
    v2, w2 = np.take(trace.velocity, dyn, axis=1), np.take(trace.angular_velocity, dyn, axis=1)  # dynamic only
    v2 *= v2
    w2 *= w2
    # component by component: a numpy reduction over a last axis of 2 costs 8x more
    speed2 = sum((v2[:, :, k] for k in range(1, v2.shape[2])), v2[:, :, 0])  # [T, M]
    spin2 = w2 if w2.ndim == 2 else sum((w2[:, :, k] for k in range(1, w2.shape[2])), w2[:, :, 0])
    # one row per body with a free frame at either end, all rows laid end to end
    width = T + 2
    still = np.zeros((M, width), dtype=bool)
    still[:, 1:-1] = ((speed2 < REST_SPEED ** 2) & (spin2 < REST_SPIN ** 2)).T
    edge = np.flatnonzero(still.ravel()[1:] != still.ravel()[:-1])  # alternately the start and the stop of a rest
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    long = stop - start >= max(1, round(MIN_SECONDS / trace.dt))
    return dyn[row[long]], start[long], stop[long]


def supports(trace, body, first):
    """For each rest (body, first frame f): the body pushing it most nearly straight up in frames
    f .. f + MERGE_GAP, or -1 when it touches nothing then. All rests at once, over the contact rows
    of those frames (rows are sorted by frame)."""
    lo = np.searchsorted(trace.contact_frame, first)
    n = np.searchsorted(trace.contact_frame, first + MERGE_GAP + 1) - lo
    rest = np.repeat(np.arange(first.size), n)  # each row of each rest's frames, rests laid end to end
    rows = np.arange(n.sum()) + np.repeat(lo - (np.cumsum(n) - n), n)
    a, b, i = trace.contact_a[rows], trace.contact_b[rows], body[rest]
    mine = np.flatnonzero((a == i) | (b == i))  # the rows where the resting body touches something
    rows, rest, a, b, i = rows[mine], rest[mine], a[mine], b[mine], i[mine]
    up = trace.contact_normal[rows, 1 if trace.dim == 2 else 2]
    push = np.where(a == i, -up, up)  # the normal points from a into b: the push on i from the other body
    order = np.lexsort((-push, rest))  # by rest, strongest push first, then by row (the sort is stable)
    best = order[np.concatenate(([True], rest[order][1:] != rest[order][:-1]))[:order.size]]
    surface = np.full(first.size, -1)
    surface[rest[best]] = np.where(a == i, b, a)[best]
    return surface


def detect(trace, events):
    names = trace.names + ["none"]  # surface -1: none
    body, first, stop = rests(trace)
    out = [(s, {"object": names[i], "surface": names[j], "frames": e - s})
           for i, s, e, j in zip(body.tolist(), first.tolist(), stop.tolist(), supports(trace, body, first).tolist())]
    return sorted(out, key=lambda ev: ev[0])
