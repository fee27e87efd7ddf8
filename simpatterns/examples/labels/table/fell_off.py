import numpy as np

PATTERN = "fell off"
DESCRIPTION = (
    "A dynamic body drops off the table: its centre falls below FLOOR_Z metres (under the table top) "
    "after starting above it. Emitted once per body, at the first frame below, with object the body."
)
DEPENDS = []
PARAMS = ["object"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "instant"

FLOOR_Z = 0.2  # m: a start value for the search to tune


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    if dyn.size == 0:
        return []
    z = trace.position[:, dyn, 2]
    below = z < FLOOR_Z
    started_above = ~below[0]
    first = np.argmax(below, axis=0)
    hit = np.flatnonzero(started_above & below.any(axis=0))
    return sorted([(int(first[k]), {"object": trace.names[dyn[k]]}) for k in hit.tolist()], key=lambda ev: ev[0])
