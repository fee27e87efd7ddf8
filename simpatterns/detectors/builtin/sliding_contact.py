import numpy as np

PATTERN = "sliding contact"
DESCRIPTION = (
    "object_a slides along object_b, which stays still: they touch, their surfaces slip past each other at "
    "the contact (more than 2 px/s along the surface; a rolling ball does not slip) and object_a moves "
    "mostly along the surface, for at least 0.1 s and 2 px. Emitted once at the first frame of each "
    "sliding interval, with its length in frames."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]

SLIP_SPEED = 2.0  # px/s of surface slip; a ball rolling on a ramp slips under 0.1 px/s
STILL_SPEED = 1.0  # px/s: object_b counts as stationary below this
MIN_SECONDS = 0.1  # shorter slips are the instant of an impact
MIN_TRAVEL = 2.0  # px object_a must move relative to object_b
MERGE_GAP = 2  # frames of contact flicker that do not end a slide


def pair_runs(key, frame, num_frames, gap=0):
    """Runs of consecutive frames for each key of sparse (key, frame) rows: arrays (key, start, stop),
    stop exclusive, ordered by key then start; runs at most `gap` frames apart merge."""
    if key.size == 0:
        return key, key, key
    keys = np.flatnonzero(np.bincount(key))
    slot = np.zeros(keys[-1] + 1, dtype=np.int64)
    slot[keys] = np.arange(keys.size)
    mask = np.zeros((keys.size, num_frames + 2), dtype=np.int8)
    mask[slot[key], frame + 1] = 1
    edge = np.diff(mask, axis=1)
    k, start = np.nonzero(edge == 1)
    stop = np.nonzero(edge == -1)[1]
    if gap and k.size > 1:
        keep = np.concatenate(([True], (k[1:] != k[:-1]) | (start[1:] - stop[:-1] > gap)))
        k, start, stop = k[keep], start[keep], stop[np.concatenate((keep[1:], [True]))]
    return keys[k], start, stop


def detect(trace, events):
    if trace.dim != 2:
        return []
    T, N = trace.num_frames, trace.num_bodies
    dyn = np.flatnonzero(trace.dynamic_mask)
    vd = np.take(trace.velocity, dyn, axis=1)
    moving = np.zeros((T, N), dtype=bool)  # fixed bodies never move
    moving[:, dyn] = vd[..., 0] ** 2 + vd[..., 1] ** 2 >= STILL_SPEED ** 2
    f = trace.contact_frame.astype(np.int64)
    a, b = trace.contact_a.astype(np.int64), trace.contact_b.astype(np.int64)
    a_moves, b_moves = moving.ravel()[f * N + a], moving.ravel()[f * N + b]
    rows = np.flatnonzero(a_moves != b_moves)  # one body moves, the other stays still
    f, slider, surface = f[rows], np.where(a_moves, a, b)[rows], np.where(a_moves, b, a)[rows]
    p, n = trace.contact_point[rows], trace.contact_normal[rows]

    def surface_velocity(i):  # velocity of body i's material at the contact point
        r, w = p - trace.position[f, i], trace.angular_velocity[f, i]
        return trace.velocity[f, i] + np.stack([-w * r[:, 1], w * r[:, 0]], axis=1)

    rel = surface_velocity(slider) - surface_velocity(surface)
    slip = np.abs(rel[:, 1] * n[:, 0] - rel[:, 0] * n[:, 1])
    sliding = (slip > SLIP_SPEED) & (slip > np.abs((rel * n).sum(axis=1)))
    key, start, stop = pair_runs(slider[sliding] * N + surface[sliding], f[sliding], T, MERGE_GAP)
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for k, s, e in zip(key.tolist(), start, stop):
        i, j = divmod(k, N)
        step = np.diff(trace.position[s:e, i] - trace.position[s:e, j], axis=0)
        if e - s >= min_frames and np.sqrt(step[:, 0] ** 2 + step[:, 1] ** 2).sum() >= MIN_TRAVEL:
            out.append((int(s), {"object_a": trace.names[i], "object_b": trace.names[j], "frames": int(e - s)}))
    return sorted(out, key=lambda ev: ev[0])
