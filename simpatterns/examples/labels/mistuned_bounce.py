"""A bounce detector with deliberately bad thresholds: the seed of the example labels file.

`simpatterns discover --offline` tunes MIN_APPROACH / MIN_REBOUND / WINDOW (and the
comparisons) by mutation; an LLM run can rewrite the logic too.
"""
import numpy as np

PATTERN = "bounce"
DESCRIPTION = "A body hits a surface and its velocity along the contact normal flips sign."
DEPENDS = ["collision start"]
PARAMS = ["object", "surface"]

MIN_APPROACH = 60.0  # px/s towards the surface before the hit (too strict)
MIN_REBOUND = 30.0  # px/s away from it after the hit (too strict)
WINDOW = 2  # frames after the hit in which the rebound must show


def detect(trace, events):
    out = []
    for frame, p in events["collision start"]:
        if frame == 0 or frame + 1 >= trace.num_frames:
            continue
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        rows = np.nonzero((trace.contact_frame == frame) & (trace.contact_a == min(a, b))
                          & (trace.contact_b == max(a, b)))[0]
        if len(rows) == 0:
            continue
        normal = trace.contact_normal[rows[0]]  # from the lower index towards the higher
        for i, j, into in ((min(a, b), max(a, b), normal), (max(a, b), min(a, b), -normal)):
            if not trace.bodies[i].dynamic:
                continue
            approach = trace.velocity[frame - 1, i] @ into
            after = trace.velocity[frame:frame + WINDOW, i] @ into
            if approach > MIN_APPROACH and -after.min() > MIN_REBOUND:
                out.append((int(frame), {"object": trace.names[i], "surface": trace.names[j]}))
    return out
