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
    # speeds of every body are computed once per trace and shared (the speed is under 1 exactly when its square is)
    spin2 = trace.angular_velocity ** 2
    if spin2.ndim == 3:  # 3D: component by component, a numpy reduction over a last axis of 3 costs 8x more
        spin2 = spin2[:, :, 0] + spin2[:, :, 1] + spin2[:, :, 2]
    at_rest = (trace.speed() < REST_SPEED) & (spin2 < REST_SPIN ** 2)  # [T, N]
    # one row per body with a free frame at either end, all rows laid end to end
    width = T + 2
    still = np.zeros((M, width), dtype=bool)
    still[:, 1:-1] = np.take(at_rest, dyn, axis=1).T  # dynamic bodies only
    edge = np.flatnonzero(still.ravel()[1:] != still.ravel()[:-1])  # alternately the start and the stop of a rest
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    long = stop - start >= max(1, round(MIN_SECONDS / trace.dt))
    return dyn[row[long]], start[long], stop[long]


def supports(trace, body, first):
    """For each rest (body, first frame f): the body pushing it most nearly straight up in frames
    f .. f + MERGE_GAP, or -1 when it touches nothing then. All rests at once, over the contact rows
    of those frames (rows are sorted by frame)."""
    lo, hi = np.searchsorted(trace.contact_frame, [first, first + MERGE_GAP + 1])
    n = hi - lo
    rest = np.repeat(np.arange(first.size), n)  # each row of each rest's frames, rests laid end to end
    rows = np.arange(rest.size) + np.repeat(lo - (np.cumsum(n) - n), n)
    a, b, i = trace.contact_a[rows], trace.contact_b[rows], body[rest]
    on_a = a == i
    mine = np.flatnonzero(on_a | (b == i))  # the rows where the resting body touches something
    rows, rest, on_a, other = rows[mine], rest[mine], on_a[mine], np.where(on_a, b, a)[mine]
    up = trace.contact_normal[rows, 1 if trace.dim == 2 else 2]
    push = np.where(on_a, -up, up)  # the normal points from a into b: the push on i from the other body
    order = np.lexsort((-push, rest))  # by rest, strongest push first, then by row (the sort is stable)
    best = order[np.concatenate(([True], rest[order][1:] != rest[order][:-1]))[:order.size]]
    surface = np.full(first.size, -1)
    surface[rest[best]] = other[best]
    return surface


def detect(trace, events):
    names = trace.names + ["none"]  # surface -1: none
    body, first, stop = rests(trace)
    out = [(s, {"object": names[i], "surface": names[j], "frames": e - s})
           for i, s, e, j in zip(body.tolist(), first.tolist(), stop.tolist(), supports(trace, body, first).tolist())]
    return sorted(out, key=lambda ev: ev[0])
