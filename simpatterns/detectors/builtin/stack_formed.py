import numpy as np

PATTERN = "stack formed"
DESCRIPTION = (
    "object_a comes to rest on top of object_b, another dynamic body (not the ground, a wall or a fixed "
    "obstacle), and both stay at rest (speed under 1 px/s) while in contact for at least 0.5 s. Emitted "
    "once per support interval, at the first frame of that rest."
)
DEPENDS = ["support relationship"]
PARAMS = ["object_a", "object_b"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "instant"

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s
REST_SPIN = 0.1  # rad/s: a rocking body is not yet stacked
MIN_SECONDS = 0.5  # a stack must hold this long, so a body passing over another is not a stack


def detect(trace, events):
    n = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for frame, p in events["support relationship"]:
        if p["frames"] < n:
            continue
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if not trace.bodies[b].dynamic or trace.bodies[b].role == "wall":
            continue
        span = slice(frame, frame + p["frames"])
        v, w = trace.velocity[span][:, [a, b]], trace.angular_velocity[span][:, [a, b]]
        spin = w ** 2 if w.ndim == 2 else (w ** 2).sum(axis=2)
        rest = ((v[..., 0] ** 2 + v[..., 1] ** 2 < REST_SPEED ** 2) & (spin < REST_SPIN ** 2)).all(axis=1)
        # first frame that starts n consecutive rest frames
        full = np.flatnonzero(np.convolve(rest.astype(np.int8), np.ones(n, dtype=np.int8), "valid") == n)
        if full.size:
            out.append((frame + int(full[0]), {"object_a": p["object_a"], "object_b": p["object_b"]}))
    return out
