import numpy as np

PATTERN = "bounce"
DESCRIPTION = (
    "A body hits another and rebounds: when they start touching, its velocity along the contact normal "
    "points into the other body at 0.3 m/s or more, and within 0.05 s it points away at 0.05 m/s or more. "
    "Emitted at the contact start, with object (the body that bounced) and surface (what it bounced off). "
    "Both bodies of a contact can bounce."
)
DEPENDS = ["contact start"]
PARAMS = ["object", "surface"]
BODY_PARAMS = ["object", "surface"]
DIRECTED = False
DURATION = "instant"

MIN_APPROACH = 0.3  # m/s into the surface: slower arrivals are settling, not impacts
MIN_REBOUND = 0.05  # m/s away from it: resting contacts jitter far below this
REBOUND_SECONDS = 0.05  # the solver separates an impact over a few milliseconds


def detect(trace, events):
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["contact start"] if f > 0]  # contacts present at frame 0 were placed, not hit
    if not starts:
        return []
    f, a, b = np.array(starts).T  # contact events name their bodies in index order: a < b
    n = np.take(trace.contact_normal, trace.contact_row(f, a, b), axis=0)  # [E, 3] from a into b
    f, i, j, into = np.concatenate([f, f]), np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([n, -n])
    T, N = trace.num_frames, trace.num_bodies
    vel = trace.velocity.reshape(T * N, -1)
    approach = (np.take(vel, (f - 1) * N + i, axis=0) * into).sum(axis=1)
    frames = max(1, int(round(REBOUND_SECONDS / trace.dt)))
    after = np.minimum(f[:, None] + np.arange(frames + 1), T - 1)
    rebound = -(np.take(vel, after * N + i[:, None], axis=0) * into[:, None]).sum(axis=2).min(axis=1)
    hit = np.flatnonzero((approach >= MIN_APPROACH) & (rebound >= MIN_REBOUND) & trace.dynamic_mask[i])
    names = trace.names
    out = [(t, {"object": names[x], "surface": names[y]})
           for t, x, y in zip(f[hit].tolist(), i[hit].tolist(), j[hit].tolist())]
    return sorted(out, key=lambda ev: ev[0])
