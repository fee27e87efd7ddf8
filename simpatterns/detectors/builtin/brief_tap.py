PATTERN = "brief tap"
DESCRIPTION = (
    "Two bodies touch for under 0.1 s and are apart for at least 0.1 s before and after (a quick tap or "
    "a bounce, not a flicker of a resting contact; contacts present at frame 0 do not count). Emitted at "
    "the contact start, with object_a and object_b in body index order and the contact length in frames."
)
DEPENDS = ["collision start", "collision end"]
PARAMS = ["object_a", "object_b", "frames"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "interval"

TAP_SECONDS = 0.1  # 6 frames: an impact's contact lasts 2-5 steps, a resting contact far longer
APART_SECONDS = 0.1  # separation on both sides, so chatter inside a longer contact is not a tap


def detect(trace, events):
    tap = TAP_SECONDS / trace.dt
    apart = APART_SECONDS / trace.dt
    timeline = {}
    for kind in ("collision start", "collision end"):
        for frame, p in events[kind]:
            timeline.setdefault((p["object_a"], p["object_b"]), []).append((frame, kind == "collision end"))
    out = []
    for (a, b), marks in timeline.items():
        marks.sort()
        for k, (frame, is_end) in enumerate(marks):
            if is_end or frame == 0 or k + 1 >= len(marks) or not marks[k + 1][1]:
                continue
            end = marks[k + 1][0]
            before_ok = k == 0 or frame - marks[k - 1][0] >= apart
            after_ok = (marks[k + 2][0] if k + 2 < len(marks) else trace.num_frames) - end >= apart
            if end - frame < tap and before_ok and after_ok:
                # a thinned trace can start and end a tap in one stored frame: it still lasts one
                out.append((frame, {"object_a": a, "object_b": b, "frames": max(1, end - frame)}))
    return sorted(out, key=lambda ev: ev[0])
