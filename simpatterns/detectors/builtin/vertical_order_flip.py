import numpy as np

PATTERN = "vertical order flip"
DESCRIPTION = (
    "Two dynamic bodies (or a dynamic body and a fixed goal body) swap their vertical order: the y of "
    "their centres crosses, with or without contact. Emitted at the first frame of the new order (centres "
    "more than 3 px apart), with object_a and object_b in body index order and above, the one now above."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "above"]

TOLERANCE = 3.0  # px apart on each side of the crossing: an impact can press a body ~2 px into another for a frame
GOAL_ROLES = ("goal_object", "goal_subject")  # fixed obstacles and walls are passed all the time; only a goal matters


def detect(trace, events):
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    # dynamic bodies, plus a fixed goal body (PHYRE's purple) that the others can pass
    keep = [i for i, b in enumerate(trace.bodies) if b.dynamic or b.role in GOAL_ROLES]
    pairs = [(i, j) for k, i in enumerate(keep) for j in keep[k + 1:]
             if trace.bodies[i].dynamic or trace.bodies[j].dynamic]
    if not pairs:
        return []
    ii, jj = np.array(pairs).T
    d = trace.position[:, ii, 1] - trace.position[:, jj, 1]  # [T, P]: > 0 when i is above j
    sign = np.where(d > TOLERANCE, 1, np.where(d < -TOLERANCE, -1, 0))
    # carry the last clear order over frames where the centres are within the tolerance
    last = np.maximum.accumulate(np.where(sign != 0, np.arange(len(d))[:, None], 0), axis=0)
    order = np.take_along_axis(sign, last, axis=0)
    names = trace.names
    return [
        (int(t) + 1, {"object_a": names[ii[k]], "object_b": names[jj[k]],
                      "above": names[ii[k]] if order[t + 1, k] > 0 else names[jj[k]]})
        for t, k in zip(*np.nonzero(order[1:] * order[:-1] < 0))
    ]
