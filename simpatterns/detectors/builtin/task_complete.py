PATTERN = "task complete"
DESCRIPTION = (
    "The simulator's TaskComplete event: emitted once, at the frame the task was solved "
    "(success true) or at the last frame (success false)."
)
DEPENDS = []
PARAMS = ["success"]
BODY_PARAMS = []
DIRECTED = False
DURATION = "instant"


def detect(trace, events):
    return [(e.frame, {"success": bool(e.params["success"])}) for e in trace.events if e.kind == "TaskComplete"]
