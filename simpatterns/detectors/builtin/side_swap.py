import numpy as np

PATTERN = "side swap"
DESCRIPTION = (
    "Two dynamic bodies (or a dynamic body and a fixed goal body) swap their left-right order: the x of "
    "their centres crosses, with or without contact. Emitted at the first frame of the new order (centres "
    "more than 3 px apart), with object_a and object_b in body index order and left, the one now on the left."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "left"]
BODY_PARAMS = ["object_a", "object_b", "left"]
DIRECTED = False
DURATION = "instant"

TOLERANCE = 3.0  # px apart on each side of the crossing: an impact can press a body ~2 px into another for a frame
GOAL_ROLES = ("goal_object", "goal_subject")  # fixed obstacles and walls are passed all the time; only a goal matters


def detect(trace, events):
    # dynamic bodies, plus a fixed goal body (PHYRE's purple) that the others can pass
    keep = [i for i, b in enumerate(trace.bodies) if b.dynamic or b.role in GOAL_ROLES]
    pairs = [(i, j) for k, i in enumerate(keep) for j in keep[k + 1:]
             if trace.bodies[i].dynamic or trace.bodies[j].dynamic]
    if not pairs:
        return []
    ii, jj = np.array(pairs).T
    d = (trace.position[:, jj, 0] - trace.position[:, ii, 0]).T.copy()  # [P, T]: > 0 when i is left of j
    ahead, behind = d > TOLERANCE, d < -TOLERANCE  # a clear order; within the tolerance the last clear one holds
    names = trace.names
    out = []
    for k in np.flatnonzero(ahead.any(axis=1) & behind.any(axis=1)):  # only pairs seen in both orders can flip
        frames = np.flatnonzero(ahead[k] | behind[k])
        order = ahead[k, frames]
        flip = np.flatnonzero(order[1:] != order[:-1]) + 1
        i, j = names[ii[k]], names[jj[k]]
        out += [(f, {"object_a": i, "object_b": j, "left": i if now else j})
                for f, now in zip(frames[flip].tolist(), order[flip].tolist())]
    return sorted(out, key=lambda ev: ev[0])
