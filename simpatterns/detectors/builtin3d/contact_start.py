PATTERN = "contact start"
DESCRIPTION = (
    "Two bodies start touching: the simulator's CollisionStart event, including contacts already present "
    "at frame 0. object_a and object_b are in body index order. Emitted once per contact start."
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
        if e.kind == "CollisionStart"
    ]
