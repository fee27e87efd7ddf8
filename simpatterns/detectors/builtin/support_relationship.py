import numpy as np

PATTERN = "support relationship"
DESCRIPTION = (
    "object_a rests on object_b: they touch and object_b pushes object_a upward (the contact normal is "
    "within 60 degrees of straight up, so object_a is above the contact). object_b may be any body, the "
    "ground included. Emitted once at the first frame of each support interval, with its length in frames "
    "(counted up to the end of the trace if the support lasts that long)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "frames"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "interval"

UP_COS = 0.5  # normal within 60 degrees of vertical: a 20 degree ramp supports, a side wall does not
MERGE_GAP = 2  # frames: resting contacts flicker for a step or two without the support ending


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
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    N = trace.num_bodies
    up = trace.contact_normal[:, 1]  # the normal points from contact_a to contact_b
    on_b, on_a = up >= UP_COS, up <= -UP_COS  # contact_b rests on contact_a, or the other way round
    upper = np.where(on_b, trace.contact_b, trace.contact_a).astype(np.int64)
    lower = np.where(on_b, trace.contact_a, trace.contact_b).astype(np.int64)
    rows = np.flatnonzero((on_a | on_b) & trace.dynamic_mask[upper])  # only a body that can move is supported
    key, start, stop = pair_runs(upper[rows] * N + lower[rows], trace.contact_frame[rows], trace.num_frames, MERGE_GAP)
    names = trace.names
    out = [(s, {"object_a": names[k // N], "object_b": names[k % N], "frames": e - s})
           for k, s, e in zip(key.tolist(), start.tolist(), stop.tolist())]
    return sorted(out, key=lambda ev: ev[0])
