import math

import numpy as np

PATTERN = "high energy impact"
DESCRIPTION = (
    "Two bodies collide hard: at the collision start their surfaces approach each other along the contact normal "
    "at 100 px/s or more (a free fall of 85 px, a third of a PHYRE scene, reaches that). Emitted at the "
    "collision start frame, with object_a and object_b in body index order and the approach speed (px/s)."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "speed"]

HIGH_SPEED = 100.0  # px/s along the normal; settling contacts are < 5 px/s, rolling taps ~10-50 px/s


def closing_speed(trace, frame, a, b):
    """How fast the surfaces of a and b approach each other along their contact normal just before `frame`
    (rotation included: the end of a turning lever moves faster than its centre)."""
    rows = np.flatnonzero(trace.contact_frame == frame)
    lo, hi = min(a, b), max(a, b)
    row = rows[(trace.contact_a[rows] == lo) & (trace.contact_b[rows] == hi)][0]
    p, n = trace.contact_point[row], trace.contact_normal[row] * (1 if a < b else -1)
    v = []
    for i in (a, b):
        r, w = p - trace.position[frame - 1, i], trace.angular_velocity[frame - 1, i]
        v.append(trace.velocity[frame - 1, i] + (w * np.array([-r[1], r[0]]) if trace.dim == 2 else 0))
    return float((v[0] - v[1]) @ n)



def detect(trace, events):
    out = []
    for frame, p in events["collision start"]:
        a, b = sorted((trace.body_index(p["object_a"]), trace.body_index(p["object_b"])))
        if frame == 0:
            continue
        # cheap bound first: centre speeds plus rim speeds cap the closing speed
        rim = sum(np.abs(trace.angular_velocity[frame - 1, i]).sum() * trace.bodies[i].bounding_radius for i in (a, b))
        dv = trace.velocity[frame - 1, a] - trace.velocity[frame - 1, b]
        if math.sqrt(dv @ dv) + rim >= HIGH_SPEED:
            speed = closing_speed(trace, frame, a, b)
            if speed >= HIGH_SPEED:
                out.append((frame, {"object_a": trace.names[a], "object_b": trace.names[b], "speed": round(speed, 1)}))
    return out
