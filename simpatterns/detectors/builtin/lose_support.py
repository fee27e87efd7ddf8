import numpy as np

PATTERN = "lose support"
DESCRIPTION = (
    "A body that rested on a support for at least 0.25 s loses it and is then supported by nothing for "
    "at least 3 frames (it falls, is pushed off an edge, or its support moves away; handing over to "
    "another support does not count). Emitted at the first frame without support, with object and the "
    "support it lost."
)
DEPENDS = ["support relationship"]
PARAMS = ["object", "support"]
BODY_PARAMS = ["object", "support"]
DIRECTED = False
DURATION = "instant"

MIN_SUPPORT_SECONDS = 0.25  # shorter support is a bounce or a graze, not support that can be lost
UNSUPPORTED_FRAMES = 3  # longer than the 2-frame flicker a resting contact can show


def detect(trace, events):
    T = trace.num_frames
    supported = {}
    for frame, p in events["support relationship"]:
        supported.setdefault(p["object_a"], np.zeros(T, dtype=bool))[frame:frame + p["frames"]] = True
    min_frames = max(1, round(MIN_SUPPORT_SECONDS / trace.dt))
    out = []
    for frame, p in events["support relationship"]:
        end = frame + p["frames"]
        if p["frames"] < min_frames or end + UNSUPPORTED_FRAMES > T:
            continue
        if not supported[p["object_a"]][end:end + UNSUPPORTED_FRAMES].any():
            out.append((end, {"object": p["object_a"], "support": p["object_b"]}))
    return out
