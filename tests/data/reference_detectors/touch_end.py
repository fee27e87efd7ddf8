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
    n = trace.num_bodies
    key = trace.contact_a.astype(np.int64) * n + trace.contact_b.astype(np.int64)
    frame = trace.contact_frame.astype(np.int64)
    if key.size == 0:
        return []
    order = np.lexsort((frame, key))
    key, frame = key[order], frame[order]
    end = np.ones(key.size, dtype=bool)  # the last contact of each touch
    end[:-1] = (key[1:] != key[:-1]) | (frame[1:] - frame[:-1] > MERGE_GAP + 1)
    # the separation must be seen to last longer than the flicker within the trace
    seen = end & (frame + MERGE_GAP + 1 <= trace.num_frames - 1)
    names = trace.names
    out = [(f + 1, {"object_a": names[k // n], "object_b": names[k % n]})
           for f, k in zip(frame[seen].tolist(), key[seen].tolist())]
    return sorted(out, key=lambda ev: ev[0])
