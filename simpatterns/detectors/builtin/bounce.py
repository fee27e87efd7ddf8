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
BODY_PARAMS = ["object", "surface"]
DIRECTED = False
DURATION = "instant"

MIN_APPROACH = 5.0  # px/s into the surface: slower arrivals are settling (a drop of 0.2 px), not bounces
MIN_REBOUND = 1.0  # px/s away from it: resting contacts jitter below 0.1 px/s
REBOUND_FRAMES = 4  # the solver separates an impact over a few steps


def detect(trace, events):
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["collision start"] if f > 0]  # contacts present at frame 0 were placed, not hit
    if not starts:
        return []
    f, a, b = np.array(starts).T  # raw collision events name their bodies in index order: a < b
    n = np.take(trace.contact_normal, trace.contact_row(f, a, b), axis=0)  # [E, D], pointing from a into b
    # body i bounces off body j, for both bodies of each collision; `into` points from i into j
    f, i, j, into = np.concatenate([f, f]), np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([n, -n])
    T, N = trace.num_frames, trace.num_bodies
    vel = trace.velocity.reshape(T * N, -1)  # row t * N + i: body i at frame t
    approach = (np.take(vel, (f - 1) * N + i, axis=0) * into).sum(axis=1)
    after = np.minimum(f[:, None] + np.arange(REBOUND_FRAMES), T - 1)  # [E, R]
    rebound = -(np.take(vel, after * N + i[:, None], axis=0) * into[:, None]).sum(axis=2).min(axis=1)
    hit = np.flatnonzero((approach >= MIN_APPROACH) & (rebound >= MIN_REBOUND) & trace.dynamic_mask[i])
    names = trace.names
    out = [(t, {"object": names[x], "surface": names[y]})
           for t, x, y in zip(f[hit].tolist(), i[hit].tolist(), j[hit].tolist())]
    return sorted(out, key=lambda ev: ev[0])
