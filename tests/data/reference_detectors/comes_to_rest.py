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
    """Rest stretches of every dynamic body: lists (body, first frame, stop frame exclusive)."""
    T = trace.num_frames
    v, w = trace.velocity, trace.angular_velocity
    # component by component: a numpy reduction over a last axis of 2 costs 8x more
    speed2 = sum(v[:, :, k] * v[:, :, k] for k in range(v.shape[2]))  # [T, N]
    spin2 = w * w if w.ndim == 2 else sum(w[:, :, k] * w[:, :, k] for k in range(w.shape[2]))
    still = (speed2 < REST_SPEED ** 2) & (spin2 < REST_SPIN ** 2) & trace.dynamic_mask[None, :]
    padded = np.zeros((T + 2, trace.num_bodies), dtype=bool)
    padded[1:-1] = still
    edge = np.diff(padded.astype(np.int8), axis=0)  # +1 at a start, -1 just past a stop
    bs, fs = np.nonzero(edge.T == 1)
    be, fe = np.nonzero(edge.T == -1)  # both ordered by body, then frame: they pair up
    long = fe - fs >= max(1, round(MIN_SECONDS / trace.dt))
    return bs[long], fs[long], fe[long]


def support(trace, i, f):
    """The body pushing body i most nearly straight up in frames f .. f + MERGE_GAP, or None."""
    rows = np.flatnonzero((trace.contact_frame >= f) & (trace.contact_frame <= f + MERGE_GAP)
                          & ((trace.contact_a == i) | (trace.contact_b == i)))
    if not rows.size:
        return None
    a, b = trace.contact_a[rows], trace.contact_b[rows]
    up = trace.contact_normal[rows, -1] if trace.dim == 2 else trace.contact_normal[rows, 2]
    push = np.where(a == i, -up, up)  # the normal points from a into b: the push on i from the other body
    k = int(np.argmax(push))
    return int(b[k] if a[k] == i else a[k])


def detect(trace, events):
    names = trace.names
    out = []
    for i, s, e in zip(*(x.tolist() for x in rests(trace))):
        j = support(trace, i, s)
        out.append((s, {"object": names[i], "surface": names[j] if j is not None else "none", "frames": e - s}))
    return sorted(out, key=lambda ev: ev[0])
