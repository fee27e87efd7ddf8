import numpy as np

PATTERN = "touch start"
DESCRIPTION = (
    "Two bodies start touching, counted as a person counts touches: contacts of a pair at most 2 frames "
    "apart (33 ms) are one touch, since simulated contacts flicker (on PHYRE rollouts 38% of re-contacts "
    "follow a separation of 1 or 2 frames, during which the surfaces stay within 0.05 px). Emitted at the "
    "first frame of each touch, including touches present at frame 0, with object_a and object_b in body "
    "index order. The raw simulator events are \"collision start\"."
)
DEPENDS = []
PARAMS = ["object_a", "object_b"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "instant"

MERGE_GAP = 2  # frames apart that do not end a touch: the contact solver's flicker, not a separation


def touches(trace):
    """Merged touches of every pair: arrays (a, b, first frame, last frame), ordered by pair then frame."""
    n = trace.num_bodies
    key = trace.contact_a.astype(np.int64) * n + trace.contact_b.astype(np.int64)
    frame = trace.contact_frame.astype(np.int64)
    if key.size == 0:
        return key, key, key, key
    order = np.lexsort((frame, key))
    key, frame = key[order], frame[order]
    new = np.ones(key.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]) | (frame[1:] - frame[:-1] > MERGE_GAP + 1)
    first = np.flatnonzero(new)
    last = np.append(first[1:], key.size) - 1
    return key[first] // n, key[first] % n, frame[first], frame[last]


def detect(trace, events):
    a, b, first, _ = touches(trace)
    names = trace.names
    out = [(f, {"object_a": names[i], "object_b": names[j]})
           for f, i, j in zip(first.tolist(), a.tolist(), b.tolist())]
    return sorted(out, key=lambda ev: ev[0])
