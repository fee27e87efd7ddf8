import numpy as np

PATTERN = "tip over"
DESCRIPTION = (
    "A non-round body standing still is hit and topples: it was at rest (under 1 px/s for 0.1 s) before "
    "a collision with hit_by, and within 1.5 s it turns by at least 30 degrees while its centre drops by "
    "at least 2 px. Emitted at the first frame after the hit at which its centre moves downward."
)
DEPENDS = ["collision start"]
PARAMS = ["object", "hit_by"]
BODY_PARAMS = ["object", "hit_by"]
DIRECTED = False
DURATION = "instant"

REST_SPEED = 1.0  # px/s: resting bodies jitter below 0.1 px/s
REST_SECONDS = 0.1  # it stood still this long before the hit
TIP_ANGLE = np.radians(30)  # turned at least this much: fell over rather than rocked
MIN_DROP = 2.0  # px its centre ends lower: toppling lowers the centre of mass
WINDOW_SECONDS = 1.5  # the fall happens within this time after the hit
DOWN_SPEED = 1.0  # px/s downward: the fall has begun


def detect(trace, events):
    if trace.dim != 2:
        return []
    k = max(1, round(REST_SECONDS / trace.dt))
    w = max(1, round(WINDOW_SECONDS / trace.dt))
    # candidates: dynamic, not round (a ball rolls, it does not tip), not a wall
    can_tip = [b.dynamic and b.role != "wall" and not all(p["kind"] == "circle" for p in b.parts) for b in trace.bodies]
    out, done = [], set()
    for frame, p in events["collision start"]:
        if frame < k:
            continue
        pair = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        for i, j in (pair, pair[::-1]):
            if i in done or not can_tip[i]:
                continue
            v = trace.velocity[frame - k:frame, i]
            if (v[:, 0] ** 2 + v[:, 1] ** 2).max() >= REST_SPEED ** 2:
                continue
            turn = np.abs(trace.angle[frame:frame + w, i] - trace.angle[frame - 1, i])
            drop = trace.position[frame - 1, i, 1] - trace.position[frame:frame + w, i, 1]
            tipped = np.flatnonzero(turn >= TIP_ANGLE)
            if tipped.size and drop[tipped[0]:].max() >= MIN_DROP:
                down = np.flatnonzero(trace.velocity[frame:frame + w, i, 1] <= -DOWN_SPEED)
                done.add(i)
                start = frame + (int(down[0]) if down.size else 0)
                out.append((start, {"object": trace.names[i], "hit_by": trace.names[j]}))
    return sorted(out, key=lambda ev: ev[0])
