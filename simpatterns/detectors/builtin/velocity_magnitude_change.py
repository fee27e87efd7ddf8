import numpy as np

PATTERN = "velocity magnitude change"
DESCRIPTION = (
    "A dynamic body's speed changes abruptly (an impact or a push, not the steady pull of gravity or "
    "friction). Emitted once per change, at the first frame with the new speed, with speed_before and "
    "speed_after (px/s) and magnitude: 'small', 'medium' or 'large' when the change is under 1/3, under "
    "2/3, or at least 2/3 of the larger of the two speeds."
)
DEPENDS = []
PARAMS = ["object", "magnitude", "speed_before", "speed_after"]

RATE = 3.0  # px/s per frame (180 px/s^2 = 3 g at 60 Hz): gravity or friction alone never change speed this fast
MIN_CHANGE = 5.0  # px/s: smaller changes are settling chatter in resting contacts
MERGE_GAP = 2  # frames: one impact can spread its impulse over a few steps
SMALL, LARGE = 1 / 3, 2 / 3  # relative change bounds of the bins


def runs(mask, gap=0):
    """(start, stop) of the True runs of a 1-D mask, stop exclusive; runs at most `gap` frames apart merge."""
    d = np.diff(np.concatenate(([0], np.asarray(mask, dtype=np.int8), [0])))
    start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    v = np.take(trace.velocity, dyn, axis=1)
    speed = np.sqrt((v ** 2).sum(axis=2))  # [T, M]
    jump = np.abs(np.diff(speed, axis=0)) > RATE  # jump[t]: from frame t to t + 1
    out = []
    for k in np.flatnonzero(jump.any(axis=0)):
        for s, e in zip(*runs(jump[:, k], MERGE_GAP)):
            before, after = speed[s, k], speed[e, k]
            change = abs(after - before)
            if change < MIN_CHANGE:
                continue
            rel = change / max(before, after)
            magnitude = "small" if rel < SMALL else "medium" if rel < LARGE else "large"
            out.append((int(s) + 1, {
                "object": trace.names[dyn[k]], "magnitude": magnitude,
                "speed_before": round(float(before), 1), "speed_after": round(float(after), 1),
            }))
    return out
