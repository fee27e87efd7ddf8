import numpy as np

PATTERN = "opposing motion"
DESCRIPTION = (
    "Lever effect: two bodies move in opposite directions at the same time (velocities more than 120 "
    "degrees apart, both at least 10 px/s, for 3 frames or more) while both touch, or touched within the "
    "last 0.1 s, a third dynamic body that is turning (the lever) and not each other. object_a is the "
    "driver (the faster of the two just before), object_b the body it sets moving the opposite way. "
    "Emitted once at the start of each such episode."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "lever"]

MOVING_SPEED = 10.0  # px/s for both bodies: clearly moving, not settling
OPPOSE_COS = -0.5  # cosine between the velocities: more than 120 degrees apart
LEVER_SPIN = 0.3  # rad/s: the lever turns (one end down, the other up)
TOUCH_SECONDS = 0.1  # a launched body leaves the lever at once, so recent contact counts
MIN_FRAMES = 3  # the opposition lasts a few steps, not one solver jolt


def detect(trace, events):
    dyn = trace.dynamic_mask & np.array([b.role != "wall" for b in trace.bodies])
    spin = np.abs(trace.angular_velocity)
    if spin.ndim == 3:
        spin = np.linalg.norm(spin, axis=2)
    touch, speed, v = trace.touching_matrix(), trace.speed(), trace.velocity
    w = max(1, round(TOUCH_SECONDS / trace.dt))
    out = []
    for c in np.flatnonzero(dyn & (spin > LEVER_SPIN).any(axis=0)):
        # recent[t, j]: body j touched the lever c at some frame in [t - w, t]
        cum = np.concatenate([np.zeros((1, trace.num_bodies), int), np.cumsum(touch[:, c], axis=0)])
        recent = cum[1:] - cum[np.maximum(np.arange(trace.num_frames) - w, 0)] > 0
        users = np.flatnonzero(recent.any(axis=0) & dyn)
        for k, a in enumerate(users):
            for b in users[k + 1:]:
                if a == c or b == c:
                    continue
                cos = (v[:, a] * v[:, b]).sum(axis=1) / np.maximum(speed[:, a] * speed[:, b], 1e-9)
                cond = (recent[:, a] & recent[:, b] & (spin[:, c] > LEVER_SPIN) & ~touch[:, a, b]
                        & (speed[:, a] >= MOVING_SPEED) & (speed[:, b] >= MOVING_SPEED) & (cos < OPPOSE_COS))
                d = np.diff(np.concatenate(([0], cond.astype(np.int8), [0])))
                for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
                    if e - s < MIN_FRAMES:
                        continue
                    before = max(s - w, 0)
                    drv, drn = (a, b) if speed[before, a] >= speed[before, b] else (b, a)
                    out.append((int(s), {"object_a": trace.names[drv], "object_b": trace.names[drn],
                                         "lever": trace.names[c]}))
    return sorted(out, key=lambda ev: ev[0])
