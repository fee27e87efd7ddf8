import numpy as np

PATTERN = "touch end"
DESCRIPTION = (
    "Two touching bodies separate, as a person sees it: the first frame they no longer touch, once they have "
    "stayed apart for more than 2 frames (shorter gaps are the contact solver's flicker, see \"touch start\"). "
    "A touch still on at the end of the trace, or broken off less than 3 frames before it, has no end. "
    "object_a and object_b are in body index order. The raw simulator events are \"collision end\"."
)
DEPENDS = []
PARAMS = ["object_a", "object_b"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "instant"

MERGE_GAP = 2  # frames apart that do not end a touch (as "touch start")


def detect(trace, events):
    # every pair's touches, contacts at most MERGE_GAP frames apart merged; shared with "touch start"
    a, b, _, last = trace.touch_runs(MERGE_GAP)
    # the separation must be seen to last longer than the flicker within the trace
    seen = np.flatnonzero(last + MERGE_GAP + 1 <= trace.num_frames - 1)
    names = trace.names
    out = [(f + 1, {"object_a": names[i], "object_b": names[j]})
           for f, i, j in zip(last[seen].tolist(), a[seen].tolist(), b[seen].tolist())]
    return sorted(out, key=lambda ev: ev[0])
