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
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "interval"

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
    keys = np.flatnonzero(np.bincount(key))  # the distinct keys, in order: one mask row each
    slot = np.zeros(keys[-1] + 1, dtype=np.int64)
    slot[keys] = np.arange(keys.size)
    width = num_frames + 2  # a free column at either end of each row
    mask = np.zeros(keys.size * width, dtype=bool)
    mask[slot[key] * width + frame + 1] = True
    edge = np.flatnonzero(mask[1:] != mask[:-1])  # alternately the start and the stop of a run
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    if gap and row.size > 1:
        keep = np.concatenate(([True], (row[1:] != row[:-1]) | (start[1:] - stop[:-1] > gap)))
        row, start, stop = row[keep], start[keep], stop[np.concatenate((keep[1:], [True]))]
    return keys[row], start, stop


def detect(trace, events):
    if trace.dim != 2:
        return []
    T, N = trace.num_frames, trace.num_bodies
    pos, vel, spin = trace.position.reshape(T * N, 2), trace.velocity.reshape(T * N, 2), trace.angular_velocity.ravel()
    # which bodies move at each frame, from the speeds every detector of the trace shares; fixed bodies never move
    moving = (trace.speed() >= STILL_SPEED) & trace.dynamic_mask  # [T, N]
    at = trace.contact_frame.astype(np.int64) * N  # flat (frame, body) index of each contact's bodies: at + body
    a, b = trace.contact_a.astype(np.int64), trace.contact_b.astype(np.int64)
    a_moves = np.take(moving, at + a)
    rows = np.flatnonzero(a_moves != np.take(moving, at + b))  # one body moves, the other stays still
    at, a, b, a_moves = at[rows], a[rows], b[rows], a_moves[rows]
    f, slider, surface = at // N, np.where(a_moves, a, b), np.where(a_moves, b, a)
    (px, py), (nx, ny) = np.take(trace.contact_point, rows, axis=0).T, np.take(trace.contact_normal, rows, axis=0).T

    def surface_velocity(i):  # velocity of body i's material at the contact point, x and y
        k = at + i
        (x, y), (vx, vy), w = np.take(pos, k, axis=0).T, np.take(vel, k, axis=0).T, spin[k]
        return vx + -w * (py - y), vy + w * (px - x)

    (sx, sy), (ux, uy) = surface_velocity(slider), surface_velocity(surface)
    rx, ry = sx - ux, sy - uy
    slip = np.abs(ry * nx - rx * ny)
    sliding = (slip > SLIP_SPEED) & (slip > np.abs(rx * nx + ry * ny))
    key, start, stop = pair_runs(slider[sliding] * N + surface[sliding], f[sliding], T, MERGE_GAP)
    min_frames = max(1, round(MIN_SECONDS / trace.dt))
    out = []
    for k, s, e in zip(key.tolist(), start.tolist(), stop.tolist()):
        if e - s < min_frames:
            continue
        i, j = divmod(k, N)
        step = np.diff(trace.position[s:e, i] - trace.position[s:e, j], axis=0)
        if np.sqrt(step[:, 0] ** 2 + step[:, 1] ** 2).sum() >= MIN_TRAVEL:
            out.append((s, {"object_a": trace.names[i], "object_b": trace.names[j], "frames": e - s}))
    return sorted(out, key=lambda ev: ev[0])
