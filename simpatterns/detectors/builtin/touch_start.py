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


def detect(trace, events):
    # every pair's touches, contacts at most MERGE_GAP frames apart merged; shared with "touch end"
    a, b, first, _ = trace.touch_runs(MERGE_GAP)
    names = trace.names
    out = [(f, {"object_a": names[i], "object_b": names[j]})
           for f, i, j in zip(first.tolist(), a.tolist(), b.tolist())]
    return sorted(out, key=lambda ev: ev[0])
