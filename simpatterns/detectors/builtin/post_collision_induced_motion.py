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

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s
REST_SECONDS = 0.1  # still this long before the collision
MOVE_SPEED = 2.0  # px/s: it clearly started moving
IMPACT_SPEED = 5.0  # px/s closing speed of the collision: placement settling does not push anything
WINDOW_SECONDS = 0.5  # the push travels through a support or a stack within this time


def speed(trace, i, frames):
    v = trace.velocity[frames, i]
    return np.sqrt((v ** 2).sum(axis=-1))


def detect(trace, events):
    touch, dynamic = trace.touching_matrix(), trace.dynamic_mask
    k = max(1, round(REST_SECONDS / trace.dt))
    w = max(1, round(WINDOW_SECONDS / trace.dt))
    out, seen = [], set()
    for frame, p in events["collision start"]:
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        dv = trace.velocity[frame - 1, a] - trace.velocity[frame - 1, b]
        if frame < k or dv @ dv < IMPACT_SPEED ** 2:
            continue
        linked = (touch[frame, :, a] & dynamic[a]) | (touch[frame, :, b] & dynamic[b])
        linked[[a, b]] = False
        for c in np.flatnonzero(linked & dynamic):
            if speed(trace, c, slice(frame - k, frame)).max() >= REST_SPEED:
                continue
            moving = np.flatnonzero(speed(trace, c, slice(frame, frame + w + 1)) >= MOVE_SPEED)
            if moving.size and (c, frame + moving[0]) not in seen:
                seen.add((c, frame + moving[0]))
                out.append((int(frame + moving[0]), {"object": trace.names[c], "object_a": p["object_a"],
                                                     "object_b": p["object_b"]}))
    return sorted(out, key=lambda ev: ev[0])
