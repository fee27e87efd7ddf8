import numpy as np

PATTERN = "sliding to rolling"
DESCRIPTION = (
    "A round body (a ball) that was sliding on a still surface catches and starts rolling: right after its "
    "sliding contact ends it keeps touching the same surface, which stays still, and keeps moving, but its "
    "surface no longer slips at the contact (speed matches spin x radius) for at least 0.1 s. Emitted at "
    "the first rolling frame, with object and surface."
)
DEPENDS = ["sliding contact"]
PARAMS = ["object", "surface"]
BODY_PARAMS = ["object", "surface"]
DIRECTED = False
DURATION = "instant"

SLIP_SPEED = 2.0  # px/s: the same slip bound as "sliding contact"
MOVING_SPEED = 2.0  # px/s: a body that merely stopped is not rolling
STILL_SPEED = 1.0  # px/s: the surface stays still, as in "sliding contact"
ROLL_SECONDS = 0.1  # rolling must hold this long


def detect(trace, events):
    if trace.dim != 2 or not events["sliding contact"]:
        return []
    n = max(1, round(ROLL_SECONDS / trace.dt))
    out = []
    for frame, p in events["sliding contact"]:
        i, j = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if not all(part["kind"] == "circle" for part in trace.bodies[i].parts):  # boxes tumble, they do not roll
            continue
        end = frame + p["frames"]
        lo, hi = (i, j) if i < j else (j, i)
        rows = np.flatnonzero((trace.contact_a == lo) & (trace.contact_b == hi)
                              & (trace.contact_frame >= end) & (trace.contact_frame < end + n))
        if rows.size < n or trace.contact_frame[rows[0]] != end:
            continue
        f, pt, nrm = trace.contact_frame[rows], trace.contact_point[rows], trace.contact_normal[rows]
        surface = []
        for k in (i, j):
            r, w = pt - trace.position[f, k], trace.angular_velocity[f, k]
            surface.append(trace.velocity[f, k] + np.stack([-w * r[:, 1], w * r[:, 0]], axis=1))
        rel = surface[0] - surface[1]
        slip = np.abs(rel[:, 0] * -nrm[:, 1] + rel[:, 1] * nrm[:, 0])
        if ((slip < SLIP_SPEED) & (trace.speed(i)[f] > MOVING_SPEED) & (trace.speed(j)[f] < STILL_SPEED)).all():
            out.append((end, {"object": p["object_a"], "surface": p["object_b"]}))
    return out
