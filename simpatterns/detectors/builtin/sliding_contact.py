import numpy as np

PATTERN = "sliding contact"
DESCRIPTION = (
    "object_a slides along object_b, which stays still: they touch, their surfaces slip past each other at "
    "the contact (more than 2 px/s along the surface; a rolling ball does not slip) and object_a moves "
    "mostly along the surface, for at least 0.1 s. Emitted once at the first frame of each sliding "
    "interval, with its length in frames."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]

SLIP_SPEED = 2.0  # px/s of surface slip; a ball rolling on a ramp slips under 0.1 px/s
STILL_SPEED = 1.0  # px/s: object_b counts as stationary below this
MIN_SECONDS = 0.1  # shorter slips are the instant of an impact
MIN_TRAVEL = 2.0  # px object_a must move relative to object_b
MERGE_GAP = 2  # frames of contact flicker that do not end a slide


def contact_slip(trace):
    """Per contact row: (tangential slip speed, normal relative speed) of the two surfaces at the contact."""
    f, a, b, p, n = trace.contact_frame, trace.contact_a, trace.contact_b, trace.contact_point, trace.contact_normal

    def surface_velocity(i):
        r, w = p - trace.position[f, i], trace.angular_velocity[f, i]
        return trace.velocity[f, i] + np.stack([-w * r[:, 1], w * r[:, 0]], axis=1)

    rel = surface_velocity(a) - surface_velocity(b)
    return np.abs(rel[:, 0] * -n[:, 1] + rel[:, 1] * n[:, 0]), np.abs((rel * n).sum(axis=1))


def detect(trace, events):
    if trace.dim != 2 or trace.num_contacts == 0:
        return []
    T, N = trace.num_frames, trace.num_bodies
    slip, normal = contact_slip(trace)
    f, a, b = trace.contact_frame, trace.contact_a.astype(int), trace.contact_b.astype(int)
    speed = trace.speed()
    still = ~trace.dynamic_mask[None, :] | (speed < STILL_SPEED)  # [T, N]
    sliding = (slip > SLIP_SPEED) & (slip > normal)
    slider = np.where(still[f, b] & ~still[f, a], a, np.where(still[f, a] & ~still[f, b], b, -1))
    rows = sliding & (slider >= 0)
    key = slider[rows] * N + np.where(slider == a, b, a)[rows]
    frames = f[rows]
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for k in np.unique(key):
        i, j = divmod(int(k), N)
        mask = np.zeros(T, dtype=np.int8)
        mask[frames[key == k]] = 1
        d = np.diff(np.concatenate(([0], mask, [0])))
        start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        merge = np.concatenate(([True], start[1:] - stop[:-1] > MERGE_GAP))
        start, stop = start[merge], stop[np.concatenate((merge[1:], [True]))]
        rel = trace.position[:, i] - trace.position[:, j]
        for s, e in zip(start, stop):
            travel = np.linalg.norm(np.diff(rel[s:e], axis=0), axis=1).sum()
            if e - s >= min_frames and travel >= MIN_TRAVEL:
                out.append((int(s), {"object_a": trace.names[i], "object_b": trace.names[j], "frames": int(e - s)}))
    return sorted(out, key=lambda ev: ev[0])
