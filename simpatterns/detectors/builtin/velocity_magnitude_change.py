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
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "instant"

RATE = 3.0  # px/s per frame (180 px/s^2 = 3 g at 60 Hz): gravity or friction alone never change speed this fast
MIN_CHANGE = 5.0  # px/s: smaller changes are settling chatter in resting contacts
MERGE_GAP = 2  # frames: one impact can spread its impulse over a few steps
SMALL, LARGE = 1 / 3, 2 / 3  # relative change bounds of the bins


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    T = trace.num_frames
    speed = np.take(trace.speed(), dyn, axis=1).T.copy()  # [M, T]: one row per dynamic body
    jump = np.zeros((dyn.size, T + 1), dtype=bool)  # jump[k, 1 + t]: speed jumps from frame t to t + 1
    jump[:, 1:T] = np.abs(speed[:, 1:] - speed[:, :-1]) > RATE  # the first and last columns stay False
    edge = np.flatnonzero(jump.ravel()[1:] != jump.ravel()[:-1])  # alternately the start and the stop of a run
    row = edge[::2] // (T + 1)
    start, stop = edge[::2] - row * (T + 1), edge[1::2] - row * (T + 1)
    # runs of one body at most MERGE_GAP frames apart are one change (an impulse spread over a few steps)
    keep = np.ones(row.size, dtype=bool)
    keep[1:] = (row[1:] != row[:-1]) | (start[1:] - stop[:-1] > MERGE_GAP)
    last = np.ones(row.size, dtype=bool)
    last[:-1] = keep[1:]
    row, start, stop = row[keep], start[keep], stop[last]
    out = []
    for k, s, before, after in zip(row.tolist(), start.tolist(), speed[row, start].tolist(), speed[row, stop].tolist()):
        change = abs(after - before)
        if change < MIN_CHANGE:
            continue
        rel = change / max(before, after)
        magnitude = "small" if rel < SMALL else "medium" if rel < LARGE else "large"
        out.append((s + 1, {"object": trace.names[dyn[k]], "magnitude": magnitude,
                            "speed_before": round(before, 1), "speed_after": round(after, 1)}))
    return out
