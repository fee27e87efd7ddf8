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

WINDOW_SECONDS = 1.0  # the second hit follows within this time, so the two are causally linked
HIT_SPEED = 5.0  # px/s closing speed along the normal: a real hit, not a resting contact flickering back


def closing_speed(trace, frame, a, b):
    """How fast the surfaces of a and b approach each other along their contact normal just before `frame`
    (rotation included: the end of a turning lever moves faster than its centre)."""
    rows = np.flatnonzero(trace.contact_frame == frame)
    lo, hi = min(a, b), max(a, b)
    row = rows[(trace.contact_a[rows] == lo) & (trace.contact_b[rows] == hi)][0]
    p, n = trace.contact_point[row], trace.contact_normal[row] * (1 if a < b else -1)
    v = []
    for i in (a, b):
        r, w = p - trace.position[frame - 1, i], trace.angular_velocity[frame - 1, i]
        v.append(trace.velocity[frame - 1, i] + (w * np.array([-r[1], r[0]]) if trace.dim == 2 else 0))
    return float((v[0] - v[1]) @ n)



def detect(trace, events):
    hits = {}  # body -> [(frame, other body)], in frame order: new contacts between non-wall bodies
    for f, p in events["collision start"]:
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if f > 0 and trace.bodies[a].role != "wall" and trace.bodies[b].role != "wall":
            hits.setdefault(a, []).append((f, b))
            hits.setdefault(b, []).append((f, a))
    touch = trace.touching_matrix()
    w = round(WINDOW_SECONDS / trace.dt)
    out = set()
    for first, first_hits in hits.items():
        for f1, via in first_hits:
            if not (trace.bodies[first].dynamic and trace.bodies[via].dynamic):
                continue
            later = [(f2, last) for f2, last in hits[via] if f1 < f2 <= f1 + w and last != first]
            if (later and not touch[f1:later[0][0] + 1, first, later[0][1]].any()
                    and closing_speed(trace, f1, first, via) >= HIT_SPEED):
                out.add((later[0][0], trace.names[first], trace.names[later[0][1]], trace.names[via]))
    return [(f, {"object_a": x, "object_b": y, "via": v}) for f, x, y, v in sorted(out)]
