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
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["collision start"] if f > 0]  # contacts present at frame 0 were placed, not hit
    if not starts:
        return []
    f, a, b = np.array(starts).T
    v = trace.velocity[f - 1]  # [E, N, D] just before each contact
    fast = (v[np.arange(len(f)), a] ** 2).sum(1) + (v[np.arange(len(f)), b] ** 2).sum(1) >= MIN_APPROACH ** 2
    out = []
    for frame, i0, j0 in zip(f[fast].tolist(), a[fast].tolist(), b[fast].tolist()):
        a_, b_ = min(i0, j0), max(i0, j0)
        rows = np.flatnonzero(trace.contact_frame == frame)
        n = trace.contact_normal[rows[(trace.contact_a[rows] == a_) & (trace.contact_b[rows] == b_)][0]]
        for i, j, into in ((a_, b_, n), (b_, a_, -n)):  # into: the normal pointing from i into j
            if trace.bodies[i].dynamic and trace.velocity[frame - 1, i] @ into >= MIN_APPROACH:
                if -(trace.velocity[frame:frame + REBOUND_FRAMES, i] @ into).min() >= MIN_REBOUND:
                    out.append((frame, {"object": trace.names[i], "surface": trace.names[j]}))
    return out
