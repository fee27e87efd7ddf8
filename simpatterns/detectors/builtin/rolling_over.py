import numpy as np

PATTERN = "rolling over"
DESCRIPTION = (
    "object_a rolls or tumbles over object_b: it stays in contact on top of object_b (the mean contact "
    "normal pushes it upward) while moving at least 20 px relative to object_b, turning as it goes "
    "(rotation x radius covers at least half that distance, so it is not just sliding), and then leaves "
    "it. Emitted when the contact ends, with the distance travelled (px)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "distance"]

MIN_DISTANCE = 20.0  # px, most of a 25.6 px grid cell: a substantial traverse
ROLL_FRACTION = 0.5  # rotation x radius / distance: 1 for a ball rolling without slip, ~0 for a slide
MERGE_GAP = 2  # frames of contact flicker (small hops on a rough roll) that do not end the contact


def runs(mask, gap=0):
    """(start, stop) of the True runs of a 1-D mask, stop exclusive; runs at most `gap` frames apart merge."""
    d = np.diff(np.concatenate(([0], np.asarray(mask, dtype=np.int8), [0])))
    start, stop = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    if gap and start.size > 1:
        keep = np.concatenate(([True], start[1:] - stop[:-1] > gap))
        start, stop = start[keep], stop[np.concatenate((keep[1:], [True]))]
    return start, stop


def detect(trace, events):
    T, N = trace.num_frames, trace.num_bodies
    key = trace.contact_a.astype(int) * N + trace.contact_b.astype(int)
    spin = np.abs(trace.angular_velocity) * trace.dt  # radians turned per frame
    if spin.ndim == 3:
        spin = np.linalg.norm(spin, axis=2)
    out = []
    for k in np.unique(key):
        a, b = divmod(int(k), N)
        rows = np.flatnonzero(key == k)
        touching, up = np.zeros(T, dtype=bool), np.zeros(T)
        touching[trace.contact_frame[rows]] = True
        up[trace.contact_frame[rows]] = trace.contact_normal[rows, 1]  # > 0: b is above a
        start, stop = runs(touching, MERGE_GAP)
        for i, j, sign in ((a, b, -1), (b, a, 1)):
            if not trace.bodies[i].dynamic:
                continue
            rel = trace.position[:, i] - trace.position[:, j]
            radius = trace.bodies[i].bounding_radius
            for s, e in zip(start, stop):
                if e >= T:  # still touching at the end: it has not rolled over yet
                    continue
                dist = np.linalg.norm(np.diff(rel[s:e + 1], axis=0), axis=1).sum()
                on_top = sign * up[s:e].mean() > 0
                if on_top and dist >= MIN_DISTANCE and spin[s:e, i].sum() * radius >= ROLL_FRACTION * dist:
                    out.append((int(e), {"object_a": trace.names[i], "object_b": trace.names[j],
                                         "distance": round(float(dist), 1)}))
    return sorted(out, key=lambda ev: ev[0])
