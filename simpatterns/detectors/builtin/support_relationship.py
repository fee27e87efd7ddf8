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

UP_COS = 0.5  # normal within 60 degrees of vertical: a 20 degree ramp supports, a side wall does not
MERGE_GAP = 2  # frames: resting contacts flicker for a step or two without the support ending


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
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    N = trace.num_bodies
    up = trace.contact_normal[:, 1]  # the normal points from contact_a to contact_b
    on_b, on_a = up >= UP_COS, up <= -UP_COS  # contact_b rests on contact_a, or the other way round
    upper = np.where(on_b, trace.contact_b, trace.contact_a).astype(np.int64)
    lower = np.where(on_b, trace.contact_a, trace.contact_b).astype(np.int64)
    rows = (on_a | on_b) & trace.dynamic_mask[upper]
    key, start, stop = pair_runs(upper[rows] * N + lower[rows], trace.contact_frame[rows], trace.num_frames, MERGE_GAP)
    names = trace.names
    out = [(int(s), {"object_a": names[k // N], "object_b": names[k % N], "frames": int(e - s)})
           for k, s, e in zip(key.tolist(), start, stop)]
    return sorted(out, key=lambda ev: ev[0])
