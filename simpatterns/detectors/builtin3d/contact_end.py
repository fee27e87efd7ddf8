PATTERN = "contact end"
DESCRIPTION = (
    "Two touching bodies separate: the simulator's CollisionEnd event, at the first frame they no longer "
    "touch. object_a and object_b are in body index order. Emitted once per separation."
)
DEPENDS = []
PARAMS = ["object_a", "object_b"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "instant"


def detect(trace, events):
    return [
        (e.frame, {"object_a": e.params["object_a"], "object_b": e.params["object_b"]})
        for e in trace.events
        if e.kind == "CollisionEnd"
    ]
