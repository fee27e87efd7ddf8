import numpy as np

PATTERN = "high energy impact"
DESCRIPTION = (
    "Two bodies collide hard: at the collision start their surfaces approach each other along the contact "
    "normal at 100 px/s or more (a free fall of 85 px, a third of a PHYRE scene, reaches that). Emitted at "
    "the collision start frame, with object_a and object_b in body index order and the approach speed (px/s)."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "speed"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "instant"

HIGH_SPEED = 100.0  # px/s along the normal; settling contacts are < 5 px/s, rolling taps ~10-50 px/s


def detect(trace, events):
    starts = [(f, trace.body_index(p["object_a"]), trace.body_index(p["object_b"]))
              for f, p in events["collision start"] if f > 0]
    if not starts or trace.dim != 2:
        return []
    f, a, b = np.array(starts).T  # raw collision events name their bodies in index order: a < b
    rows = trace.contact_row(f, a, b)
    (px, py), (nx, ny) = np.take(trace.contact_point, rows, axis=0).T, np.take(trace.contact_normal, rows, axis=0).T
    N = trace.num_bodies
    pos, vel = trace.position.reshape(-1, 2), trace.velocity.reshape(-1, 2)  # row t * N + i: body i at frame t
    spin = trace.angular_velocity.ravel()

    def surface_velocity(i):  # x, y velocity of body i's material at the contact point, the frame before
        at = (f - 1) * N + i  # (rotation included: a lever's end outruns its centre)
        (x, y), (vx, vy), w = np.take(pos, at, axis=0).T, np.take(vel, at, axis=0).T, spin[at]
        return vx + -w * (py - y), vy + w * (px - x)

    (ax, ay), (bx, by) = surface_velocity(a), surface_velocity(b)
    speed = (ax - bx) * nx + (ay - by) * ny  # the normal points from a into b
    hard = np.flatnonzero(speed >= HIGH_SPEED)
    names = trace.names
    return [(t, {"object_a": names[i], "object_b": names[j], "speed": round(v, 1)})
            for t, i, j, v in zip(f[hard].tolist(), a[hard].tolist(), b[hard].tolist(), speed[hard].tolist())]
