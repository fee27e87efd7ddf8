import numpy as np

PATTERN = "high energy impact"
DESCRIPTION = (
    "Two bodies collide hard: at the collision start their surfaces approach each other along the contact "
    "normal at 100 px/s or more (a free fall of 85 px, a third of a PHYRE scene, reaches that). Emitted at "
    "the collision start frame, with object_a and object_b in body index order and the approach speed (px/s)."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "speed"]

HIGH_SPEED = 100.0  # px/s along the normal; settling contacts are < 5 px/s, rolling taps ~10-50 px/s


def contact_rows(trace, frame, a, b):
    """Row index of each (frame, a, b) contact, a < b (vectorised lookup)."""
    N = trace.num_bodies
    key = (trace.contact_frame.astype(np.int64) * N + trace.contact_a) * N + trace.contact_b
    order = np.argsort(key, kind="stable") if (np.diff(key) < 0).any() else np.arange(key.size)
    return order[np.searchsorted(key[order], (frame * N + a) * N + b)]


def surface_velocity(trace, frame, i, point):
    """[E, 2]: velocity of body i's material at `point` (rotation included: a lever's end outruns its centre)."""
    r, w = point - trace.position[frame, i, :2], trace.angular_velocity[frame, i]
    return trace.velocity[frame, i, :2] + np.stack([-w * r[:, 1], w * r[:, 0]], axis=1)


def detect(trace, events):
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["collision start"] if f > 0]
    if not starts or trace.dim != 2:
        return []
    f, a, b = np.array(starts).T  # raw collision events name their bodies in index order: a < b
    rows = contact_rows(trace, f, a, b)
    p, n = trace.contact_point[rows], trace.contact_normal[rows]  # the normal points from a into b
    speed = ((surface_velocity(trace, f - 1, a, p) - surface_velocity(trace, f - 1, b, p)) * n).sum(axis=1)
    hard = np.flatnonzero(speed >= HIGH_SPEED)
    names = trace.names
    return [(int(f[k]), {"object_a": names[a[k]], "object_b": names[b[k]], "speed": round(float(speed[k]), 1)})
            for k in hard]
