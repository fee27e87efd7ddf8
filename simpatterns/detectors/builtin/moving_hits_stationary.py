PATTERN = "moving hits stationary"
DESCRIPTION = (
    "A moving body (object_a, at least 5 px/s) collides with a dynamic body at rest (object_b, under "
    "1 px/s for the 0.1 s before) and object_b is set moving (at least 2 px/s within 5 frames). Fixed "
    "bodies such as the ground cannot be object_b. Emitted at the collision start frame."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "instant"

MOVING_SPEED = 5.0  # px/s for the hitter: faster than settling drift
REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s
REST_SECONDS = 0.1  # object_b was still this long before the hit, not merely at a turning point
RESPONSE_SPEED = 2.0  # px/s object_b must reach: it felt the hit
RESPONSE_FRAMES = 5  # frames after the contact to reach it


def detect(trace, events):
    k = max(1, round(REST_SECONDS / trace.dt))
    speed, dynamic, names = trace.speed(), trace.dynamic_mask, trace.names  # speed [T, N]
    out = []
    for frame, p in events["collision start"]:
        if frame < k:
            continue
        pair = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        for i, j in (pair, pair[::-1]):
            if (dynamic[j] and speed[frame - 1, i] >= MOVING_SPEED
                    and speed[frame - k:frame, j].max() < REST_SPEED
                    and speed[frame:frame + RESPONSE_FRAMES, j].max() >= RESPONSE_SPEED):
                out.append((frame, {"object_a": names[i], "object_b": names[j]}))
    return out
