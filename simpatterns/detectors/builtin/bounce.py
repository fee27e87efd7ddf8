import numpy as np

PATTERN = "bounce"
DESCRIPTION = (
    "A body hits another and rebounds: at a collision start its velocity along the contact normal points "
    "into the surface (at least 5 px/s) and within 4 frames it points away (at least 1 px/s). Emitted at "
    "the collision start frame, with object (the body that bounced) and surface (what it bounced off). "
    "Both bodies of a collision can bounce."
)
DEPENDS = ["collision start"]
PARAMS = ["object", "surface"]

MIN_APPROACH = 5.0  # px/s into the surface: slower arrivals are settling (a drop of 0.2 px), not bounces
MIN_REBOUND = 1.0  # px/s away from it: resting contacts jitter below 0.1 px/s
REBOUND_FRAMES = 4  # the solver separates an impact over a few steps


def detect(trace, events):
    N = trace.num_bodies
    row_key = (trace.contact_frame.astype(np.int64) * N + trace.contact_a) * N + trace.contact_b
    order = np.argsort(row_key)
    out = []
    for frame, p in events["collision start"]:
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if frame == 0:  # contacts present at the start were placed, not hit
            continue
        a, b = min(a, b), max(a, b)
        row = order[np.searchsorted(row_key, (frame * N + a) * N + b, sorter=order)]
        n = trace.contact_normal[row]  # points from a into b
        after = trace.velocity[frame:frame + REBOUND_FRAMES]
        for i, j, into in ((a, b, n), (b, a, -n)):
            if not trace.bodies[i].dynamic:
                continue
            approach = trace.velocity[frame - 1, i] @ into
            rebound = -(after[:, i] @ into).min()
            if approach >= MIN_APPROACH and rebound >= MIN_REBOUND:
                out.append((frame, {"object": trace.names[i], "surface": trace.names[j]}))
    return out
