import numpy as np

PATTERN = "post collision induced motion"
DESCRIPTION = (
    "A body that was not part of a collision starts moving because of it: object was at rest (under "
    "1 px/s for 0.1 s), touched one of the two colliding bodies (object_a, object_b; a dynamic one, not "
    "the ground or a wall) when they collided, and starts moving (2 px/s or more) within 0.5 s. Emitted "
    "at the frame it starts moving."
)
DEPENDS = ["collision start"]
PARAMS = ["object", "object_a", "object_b"]
BODY_PARAMS = ["object", "object_a", "object_b"]
DIRECTED = False
DURATION = "instant"

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s
REST_SECONDS = 0.1  # still this long before the collision
MOVE_SPEED = 2.0  # px/s: it clearly started moving
IMPACT_SPEED = 5.0  # px/s closing speed of the collision: placement settling does not push anything
WINDOW_SECONDS = 0.5  # the push travels through a support or a stack within this time


def detect(trace, events):
    dynamic = trace.dynamic_mask
    k = max(1, round(REST_SECONDS / trace.dt))
    w = max(1, round(WINDOW_SECONDS / trace.dt))
    starts = [(frame, p["object_a"], p["object_b"]) for frame, p in events["collision start"] if frame >= k]
    if not starts:
        return []
    f = np.array([s[0] for s in starts], dtype=int)
    a = np.array([trace.body_index(s[1]) for s in starts], dtype=int)
    b = np.array([trace.body_index(s[2]) for s in starts], dtype=int)
    dv = trace.velocity[f - 1, a] - trace.velocity[f - 1, b]  # [E, D]
    # the collisions that push: closing at IMPACT_SPEED or more
    close = dv[:, 0] * dv[:, 0]
    for d in range(1, dv.shape[1]):
        close = close + dv[:, d] * dv[:, d]
    hit = np.flatnonzero(close >= IMPACT_SPEED ** 2)
    if not hit.size:
        return []
    f, a, b = f[hit], a[hit], b[hit]
    pairs = [starts[e][1:] for e in hit.tolist()]
    touch = trace.touching_matrix()
    # bodies touching a dynamic one of the two when they collide (not the two themselves)
    linked = (touch[f, :, a] & dynamic[a, None]) | (touch[f, :, b] & dynamic[b, None])
    linked[np.arange(len(f)), a] = linked[np.arange(len(f)), b] = False
    speed = trace.speed()  # [T, N]
    names = trace.names
    out, seen = [], set()
    for e, c in zip(*np.nonzero(linked & dynamic)):
        frame = int(f[e])
        if speed[frame - k:frame, c].max() >= REST_SPEED:  # it was not at rest
            continue
        moving = np.flatnonzero(speed[frame:frame + w + 1, c] >= MOVE_SPEED)
        if moving.size and (c, frame + moving[0]) not in seen:
            seen.add((c, frame + moving[0]))
            out.append((frame + int(moving[0]), {"object": names[c], "object_a": pairs[e][0], "object_b": pairs[e][1]}))
    return sorted(out, key=lambda ev: ev[0])
