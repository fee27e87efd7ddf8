import numpy as np

PATTERN = "collision relay"
DESCRIPTION = (
    "A moving body (object_a) hits an intermediate dynamic body (via), closing on it at 5 px/s or more, and via's "
    "next new contact within 1 s is a hit on a third body (object_b), while object_a does not touch object_b "
    "in between: motion passed on through a chain. None of the three is the ground or a wall. Emitted at "
    "the frame via hits object_b."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "via"]
BODY_PARAMS = ["object_a", "object_b", "via"]
DIRECTED = True
DURATION = "instant"

WINDOW_SECONDS = 1.0  # the second hit follows within this time, so the two are causally linked
HIT_SPEED = 5.0  # px/s closing speed along the normal: a real hit, not a resting contact flickering back


def closing_speeds(trace, frame, a, b):
    """How fast the surfaces of a and b approach each other along their contact normal just before `frame`
    (rotation included: the end of a turning lever moves faster than its centre); one per (frame, a, b) of
    the equal-length arrays."""
    rows = trace.contact_row(frame, a, b)
    p = np.take(trace.contact_point, rows, axis=0)
    n = np.take(trace.contact_normal, rows, axis=0) * np.where(a < b, 1, -1)[:, None]  # from a towards b
    v = []
    for i in (a, b):
        r, w = p - trace.position[frame - 1, i], trace.angular_velocity[frame - 1, i]
        v.append(trace.velocity[frame - 1, i] + (w[:, None] * np.stack([-r[:, 1], r[:, 0]], axis=1) if trace.dim == 2 else 0))
    return [float(dv @ nk) for dv, nk in zip(v[0] - v[1], n)]


def detect(trace, events):
    hits = {}  # body -> [(frame, other body)], in frame order: new contacts between non-wall bodies
    for f, p in events["collision start"]:
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if f > 0 and trace.bodies[a].role != "wall" and trace.bodies[b].role != "wall":
            hits.setdefault(a, []).append((f, b))
            hits.setdefault(b, []).append((f, a))
    touch = trace.touching_matrix()
    w = round(WINDOW_SECONDS / trace.dt)
    chains = []  # (first hit frame, first, via, second hit frame, last): via's next new contact is a hit on last
    for first, first_hits in hits.items():
        for f1, via in first_hits:
            if not (trace.bodies[first].dynamic and trace.bodies[via].dynamic):
                continue
            later = [(f2, last) for f2, last in hits[via] if f1 < f2 <= f1 + w and last != first]
            if later and not touch[f1:later[0][0] + 1, first, later[0][1]].any():
                chains.append((f1, first, via) + later[0])
    if not chains:
        return []
    f1, first, via, f2, last = np.array(chains).T
    names = trace.names
    out = {(int(f2[k]), names[first[k]], names[last[k]], names[via[k]])
           for k, speed in enumerate(closing_speeds(trace, f1, first, via)) if speed >= HIT_SPEED}
    return [(f, {"object_a": x, "object_b": y, "via": v}) for f, x, y, v in sorted(out)]
