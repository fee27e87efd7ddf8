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
BODY_PARAMS = ["object_a", "object_b", "lever"]
DIRECTED = True
DURATION = "instant"

MOVING_SPEED = 10.0  # px/s for both bodies: clearly moving, not settling
OPPOSE_COS = -0.5  # cosine between the velocities: more than 120 degrees apart
LEVER_SPIN = 0.3  # rad/s: the lever turns (one end down, the other up)
TOUCH_SECONDS = 0.1  # a launched body leaves the lever at once, so recent contact counts
MIN_FRAMES = 3  # the opposition lasts a few steps, not one solver jolt


def detect(trace, events):
    dyn = trace.dynamic_mask & np.array([b.role != "wall" for b in trace.bodies])
    N = trace.num_bodies
    met = np.bincount(trace.contact_a.astype(int) * N + trace.contact_b, minlength=N * N).reshape(N, N) > 0
    met = (met | met.T) & dyn[None, :]  # met[c, j]: dynamic j touched c at some frame
    touch = trace.touching_matrix()
    out = []
    # a lever is a dynamic body touched by two other dynamic bodies; most traces have none
    for c in np.flatnonzero(dyn & (met.sum(axis=1) >= 2)):
        spin = np.abs(trace.angular_velocity[:, c])
        if spin.ndim == 2:  # 3-D traces: spin vectors
            spin = np.sqrt((spin ** 2).sum(axis=1))
        turning = spin > LEVER_SPIN
        if not turning.any():
            continue
        w = max(1, round(TOUCH_SECONDS / trace.dt))
        users = np.flatnonzero(met[c])
        # recent[t, k]: users[k] touched the lever at some frame in [t - w, t]
        cum = np.concatenate([np.zeros((1, users.size), int), np.cumsum(touch[:, c, users], axis=0)])
        recent = cum[1:] - cum[np.maximum(np.arange(trace.num_frames) - w, 0)] > 0
        v = np.take(trace.velocity, users, axis=1)
        speed = np.take(trace.speed(), users, axis=1)
        for k in range(users.size):
            for m in range(k + 1, users.size):
                a, b = users[k], users[m]
                cos = (v[:, k] * v[:, m]).sum(axis=1) / np.maximum(speed[:, k] * speed[:, m], 1e-9)
                cond = (recent[:, k] & recent[:, m] & turning & ~touch[:, a, b] & (cos < OPPOSE_COS)
                        & (speed[:, k] >= MOVING_SPEED) & (speed[:, m] >= MOVING_SPEED))
                padded = np.concatenate(([False], cond, [False]))
                edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately a start and a stop
                for s, e in zip(edge[::2], edge[1::2]):
                    if e - s < MIN_FRAMES:
                        continue
                    before = max(s - w, 0)  # the driver was the faster one just before
                    drv, drn = (a, b) if speed[before, k] >= speed[before, m] else (b, a)
                    out.append((int(s), {"object_a": trace.names[drv], "object_b": trace.names[drn],
                                         "lever": trace.names[c]}))
    return sorted(out, key=lambda ev: ev[0])
