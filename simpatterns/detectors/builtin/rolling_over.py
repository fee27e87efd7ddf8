import numpy as np

PATTERN = "rolling over"
DESCRIPTION = (
    "object_a rolls or tumbles over object_b: it stays in contact on top of object_b (the mean contact "
    "normal pushes it upward) while moving at least 20 px relative to object_b, turning as it goes "
    "(rotation x radius covers at least half that distance, so it is not just sliding), and then leaves "
    "it. Emitted when the contact ends, with the distance travelled (px)."
)
DEPENDS = ["collision start", "collision end"]
PARAMS = ["object_a", "object_b", "distance"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = True
DURATION = "instant"

MIN_DISTANCE = 20.0  # px, most of a 25.6 px grid cell: a substantial traverse
ROLL_FRACTION = 0.5  # rotation x radius / distance: 1 for a ball rolling without slip, ~0 for a slide
MERGE_GAP = 2  # frames apart that still count as one contact (small hops on a rough roll)


def detect(trace, events):
    if trace.dim != 2:  # "up" is +y: planar traces only
        return []
    ends = {}
    for frame, p in events["collision end"]:
        ends.setdefault((p["object_a"], p["object_b"]), []).append(frame)
    contacts, passed = {}, {}  # pair -> [start, end) contact intervals, hops of MERGE_GAP frames or less merged
    for frame, p in events["collision start"]:
        pair = (p["object_a"], p["object_b"])
        later, k = ends.get(pair, []), passed.get(pair, 0)
        while k < len(later) and later[k] <= frame:  # starts come in frame order: each end is passed once
            k += 1
        passed[pair] = k
        end = later[k] if k < len(later) else None
        spans = contacts.setdefault(pair, [])
        if spans and spans[-1][1] is not None and frame - spans[-1][1] <= MERGE_GAP:
            spans[-1][1] = end
        else:
            spans.append([frame, end])
    dt, dynamic, radius = trace.dt, trace.dynamic_mask.tolist(), {}
    out = []
    for (name_a, name_b), spans in contacts.items():
        a, b = trace.body_index(name_a), trace.body_index(name_b)
        for s, e in spans:
            if e is None or e - s < 2:  # still touching at the end, or a mere touch
                continue
            for i, j in ((a, b), (b, a)):
                if not dynamic[i]:
                    continue
                if i not in radius:
                    radius[i] = trace.bodies[i].bounding_radius
                turned = np.abs(trace.angular_velocity[s:e, i]).sum() * dt * radius[i]
                if turned < ROLL_FRACTION * MIN_DISTANCE:  # cannot cover half of any long enough traverse
                    continue
                step = np.diff(trace.position[s:e + 1, i, :2] - trace.position[s:e + 1, j, :2], axis=0)
                dist = np.sqrt(step[:, 0] ** 2 + step[:, 1] ** 2).sum()
                if dist < MIN_DISTANCE or turned < ROLL_FRACTION * dist:
                    continue
                lo, hi = np.searchsorted(trace.contact_frame, [s, e])  # the contact rows of frames s to e - 1
                rows = lo + np.flatnonzero((trace.contact_a[lo:hi] == min(a, b)) & (trace.contact_b[lo:hi] == max(a, b)))
                if not rows.size:  # a thinned trace keeps no row of a contact shorter than its stride
                    continue
                up = trace.contact_normal[rows, 1].mean() * (1 if i > j else -1)  # normals point from a to b
                if up > 0:
                    out.append((e, {"object_a": trace.names[i], "object_b": trace.names[j],
                                    "distance": round(float(dist), 1)}))
    return sorted(out, key=lambda ev: ev[0])
