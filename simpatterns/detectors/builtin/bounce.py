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


def contact_rows(trace, frame, a, b):
    """Row index of each (frame, a, b) contact, a < b (vectorised lookup)."""
    N = trace.num_bodies
    key = (trace.contact_frame.astype(np.int64) * N + trace.contact_a) * N + trace.contact_b
    order = np.argsort(key, kind="stable") if (np.diff(key) < 0).any() else np.arange(key.size)
    return order[np.searchsorted(key[order], (frame * N + a) * N + b)]


def detect(trace, events):
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["collision start"] if f > 0]  # contacts present at frame 0 were placed, not hit
    if not starts:
        return []
    f, a, b = np.array(starts).T  # raw collision events name their bodies in index order: a < b
    n = trace.contact_normal[contact_rows(trace, f, a, b)]  # [E, D], pointing from a into b
    after = np.minimum(f[:, None] + np.arange(REBOUND_FRAMES), trace.num_frames - 1)  # [E, R]
    out = []
    for i, j, into in ((a, b, n), (b, a, -n)):  # body i bounces off body j; `into` points from i into j
        approach = (trace.velocity[f - 1, i] * into).sum(axis=1)
        rebound = -(trace.velocity[after, i[:, None]] * into[:, None]).sum(axis=2).min(axis=1)
        hit = (approach >= MIN_APPROACH) & (rebound >= MIN_REBOUND) & trace.dynamic_mask[i]
        out += [(int(t), {"object": trace.names[x], "surface": trace.names[y]})
                for t, x, y in zip(f[hit], i[hit], j[hit])]
    return sorted(out, key=lambda ev: ev[0])
