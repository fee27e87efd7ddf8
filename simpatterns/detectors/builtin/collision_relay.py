PATTERN = "collision relay"
DESCRIPTION = (
    "A moving body (object_a) hits an intermediate body (via) which, within 1 s, hits a third body "
    "(object_b), while object_a does not touch object_b in between: motion passed on through a chain. "
    "None of the three is the ground or a wall, and via is dynamic. Emitted at the frame via hits object_b."
)
DEPENDS = ["collision start"]
PARAMS = ["object_a", "object_b", "via"]

WINDOW_SECONDS = 1.0  # the second hit follows within this time, so the two are causally linked
MOVING_SPEED = 5.0  # px/s for the first hitter: a real hit, not placement settling


def detect(trace, events):
    hits = {}  # body -> [(frame, other body)], frame order
    for f, p in events["collision start"]:
        a, b = trace.body_index(p["object_a"]), trace.body_index(p["object_b"])
        if f > 0 and trace.bodies[a].role != "wall" and trace.bodies[b].role != "wall":
            hits.setdefault(a, []).append((f, b))
            hits.setdefault(b, []).append((f, a))
    touch, speed = trace.touching_matrix(), trace.speed()
    w = round(WINDOW_SECONDS / trace.dt)
    out = set()
    for first, first_hits in hits.items():
        for f1, via in first_hits:
            if not trace.bodies[via].dynamic or speed[f1 - 1, first] < MOVING_SPEED:
                continue
            for f2, last in hits[via]:
                if f1 < f2 <= f1 + w and last != first and not touch[f1:f2 + 1, first, last].any():
                    out.add((f2, trace.names[first], trace.names[last], trace.names[via]))
    return [(f, {"object_a": x, "object_b": y, "via": v}) for f, x, y, v in sorted(out)]
