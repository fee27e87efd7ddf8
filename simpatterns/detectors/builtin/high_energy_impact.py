import numpy as np

PATTERN = "high energy impact"
DESCRIPTION = (
    "Two bodies collide hard: at the collision start they approach each other along the contact normal "
    "at 100 px/s or more (a free fall of 85 px, a third of a PHYRE scene, reaches that). Emitted at the "
    "collision start frame, with object_a and object_b in body index order and the approach speed (px/s)."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "speed"]

HIGH_SPEED = 100.0  # px/s along the normal; settling contacts are < 5 px/s, rolling taps ~10-50 px/s


def detect(trace, events):
    N = trace.num_bodies
    row_key = (trace.contact_frame.astype(np.int64) * N + trace.contact_a) * N + trace.contact_b
    order = np.argsort(row_key)
    out = []
    for frame, p in events["collision start"]:
        if frame == 0:
            continue
        a, b = sorted((trace.body_index(p["object_a"]), trace.body_index(p["object_b"])))
        row = order[np.searchsorted(row_key, (frame * N + a) * N + b, sorter=order)]
        speed = (trace.velocity[frame - 1, a] - trace.velocity[frame - 1, b]) @ trace.contact_normal[row]
        if speed >= HIGH_SPEED:
            out.append((frame, {"object_a": trace.names[a], "object_b": trace.names[b], "speed": round(float(speed), 1)}))
    return out
