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
    padded = np.concatenate(([False], mask, [False]))
    edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately a start and a stop
    start, stop = edge[::2], edge[1::2]
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    speed = trace.speed()  # [T, N]
    out = []
    for i in np.flatnonzero(trace.dynamic_mask):
        s_i = speed[:, i]
        jump = np.abs(s_i[1:] - s_i[:-1]) > RATE  # jump[t]: from frame t to t + 1
        if not jump.any():
            continue
        start, stop = runs(jump, MERGE_GAP)
        for s, before, after in zip(start.tolist(), s_i[start].tolist(), s_i[stop].tolist()):
            change = abs(after - before)
            if change < MIN_CHANGE:
                continue
            rel = change / max(before, after)
            magnitude = "small" if rel < SMALL else "medium" if rel < LARGE else "large"
            out.append((s + 1, {"object": trace.names[i], "magnitude": magnitude,
                                "speed_before": round(before, 1), "speed_after": round(after, 1)}))
    return out
