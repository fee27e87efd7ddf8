import numpy as np

PATTERN = "near collision"
DESCRIPTION = (
    "Two objects (two dynamic bodies, or a dynamic body and a fixed goal body; not walls or fixed scenery) "
    "pass close without touching: the gap between their surfaces dips under 5 px while they move relative "
    "to each other (5 px/s or more), having been at least 5 px wider within 0.25 s before and after, and "
    "they do not touch within 0.25 s of the closest moment. Emitted at the frame of closest approach, with "
    "object_a and object_b in body index order and the gap (px)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "gap"]
BODY_PARAMS = ["object_a", "object_b"]
DIRECTED = False
DURATION = "instant"

NEAR_GAP = 5.0  # px between surfaces: a fifth of a grid cell, about the radius of PHYRE's smallest balls
MIN_REL_SPEED = 5.0  # px/s: bodies passing each other, not resting side by side
GOAL_ROLES = ("goal_object", "goal_subject")  # a fixed goal body (PHYRE's purple) is an object of interest
CLEAR_SECONDS = 0.25  # no contact this close in time: an averted collision, not the run-up to one;
# and within that time the gap closes and reopens by NEAR_GAP: a pass, not bodies moving side by side


def round_body(trace, i):
    """A single circle centred on the body's origin: its bounding circle is its outline."""
    parts = trace.bodies[i].parts
    return len(parts) == 1 and parts[0]["kind"] == "circle" and not any(parts[0]["center"])


def outline(trace, i, frames):
    """Body i at `frames` in world coordinates: circle centres (x, y [F, C], radii [C]) and polygon
    corners (x, y [F, V], the index of each corner's successor around its polygon)."""
    centres, radii, corners, succ = [], [], [], []
    for part in trace.bodies[i].parts:
        if part["kind"] == "circle":
            centres.append(part["center"])
            radii.append(part["radius"])
        else:  # all polygons in one array; succ closes each one on itself
            n, k = len(corners), len(part["vertices"])
            corners += part["vertices"]
            succ += list(range(n + 1, n + k)) + [n]
    at = trace.position[frames, i]
    x, y = at[:, 0, None], at[:, 1, None]  # [F, 1]
    if corners or any(map(any, centres)):
        angle = trace.angle[frames, i, None]
        c, s = np.cos(angle), np.sin(angle)

    def place(local):  # body-frame points -> world x, y [F, K]
        if not any(map(any, local)):  # points on the body's origin stay there as it turns
            return np.repeat(x, len(local), axis=1), np.repeat(y, len(local), axis=1)
        lx, ly = np.array(local, dtype=float).T
        return x + (c * lx - s * ly), y + (s * lx + c * ly)

    return place(centres), np.array(radii), place(corners), np.array(succ, dtype=int)


def point_to_edges(px, py, corners, succ):
    """[F, V]: distance from each point (px, py) [F, V] to the nearest edge of the polygons (corners
    [F, W] to their successors)."""
    qx, qy = corners
    dx, dy = (qx[:, succ] - qx)[:, None], (qy[:, succ] - qy)[:, None]  # edges [F, 1, W]
    wx, wy = px[:, :, None] - qx[:, None], py[:, :, None] - qy[:, None]  # [F, V, W]
    t = np.minimum(np.maximum((wx * dx + wy * dy) / (dx * dx + dy * dy), 0.0), 1.0)  # np.clip, without its overhead
    ex, ey = wx - t * dx, wy - t * dy
    return np.sqrt((ex * ex + ey * ey).min(axis=2))


def surface_gap(body_i, body_j):
    """[F]: distance between two bodies' surfaces (exact for separated convex parts)."""
    gaps = []
    for (centres, radii, corners, _), (_, _, q_corners, q_succ) in ((body_i, body_j), (body_j, body_i)):
        if q_succ.size:  # circles and corners of one body against the other's polygon edges
            if radii.size:
                gaps.append(point_to_edges(*centres, q_corners, q_succ) - radii)
            if corners[0].size:
                gaps.append(point_to_edges(*corners, q_corners, q_succ))
    (pcx, pcy), rp = body_i[:2]
    (qcx, qcy), rq = body_j[:2]
    if rp.size and rq.size:  # circle to circle
        dx, dy = pcx[:, :, None] - qcx[:, None], pcy[:, :, None] - qcy[:, None]
        gaps.append((np.sqrt(dx ** 2 + dy ** 2) - rp[:, None] - rq).reshape(len(dx), -1))
    if not gaps:
        return np.inf
    return np.concatenate(gaps, axis=1).min(axis=1) if len(gaps) > 1 else gaps[0].min(axis=1)


def detect(trace, events):
    if trace.dim != 2:
        return []
    T = trace.num_frames
    # objects that can move, and the fixed goal body; walls and fixed scenery are passed too often to count
    dynamic = trace.dynamic_mask.tolist()
    bodies = [i for i, b in enumerate(trace.bodies) if b.role != "wall" and (b.dynamic or b.role in GOAL_ROLES)]
    pairs = [(i, j) for k, i in enumerate(bodies) for j in bodies[k + 1:] if dynamic[i] or dynamic[j]]
    if not pairs:
        return []
    ii, jj = np.array(pairs).T
    radius = np.zeros(trace.num_bodies)
    radius[bodies] = [trace.bodies[i].bounding_radius for i in bodies]
    pos = trace.position
    dx, dy = (pos[:, jj, 0] - pos[:, ii, 0]).T, (pos[:, jj, 1] - pos[:, ii, 1]).T  # [P, T], pair by pair
    square = dx ** 2 + dy ** 2
    # the bounding-circle gap is a lower bound of the true gap: pairs whose circles never come near are
    # done. Squared distances pick them without a square root per frame (a hair wide, so rounding never
    # drops a pair; one kept in excess finds no near frame below)
    reach = (radius[ii] + radius[jj] + NEAR_GAP) * (1 + 1e-9)
    keep = np.flatnonzero((square < (reach * reach)[:, None]).any(axis=1))
    if not keep.size:
        return []
    ii, jj = ii[keep], jj[keep]
    bound = np.sqrt(square[keep]) - radius[ii, None] - radius[jj, None]  # gap of the bounding circles
    vel = trace.velocity
    dvx, dvy = (vel[:, jj, 0] - vel[:, ii, 0]).T, (vel[:, jj, 1] - vel[:, ii, 1]).T
    w = max(1, round(CLEAR_SECONDS / trace.dt))
    t = np.arange(T)
    after, before = np.minimum(t + w + 1, T), np.maximum(t - w, 0)  # ends of the window of w frames around t
    cum = np.zeros((keep.size, T + 1), dtype=int)  # contacts of each pair before each frame
    np.cumsum(trace.touching_matrix()[:, ii, jj].T, axis=1, out=cum[:, 1:])
    clear = cum[:, after] == cum[:, before]  # no contact within w frames
    near = (bound < NEAR_GAP) & clear & (dvx ** 2 + dvy ** 2 >= MIN_REL_SPEED ** 2)
    out = []
    for k in np.flatnonzero(near.any(axis=1)):
        i, j = int(ii[k]), int(jj[k])
        g = bound[k]  # bounding circles are exact for balls and a lower bound otherwise
        hits = np.zeros(T + 1, dtype=int)
        np.cumsum(near[k], out=hits[1:])
        if not (round_body(trace, i) and round_body(trace, j)):
            # exact gaps within w frames of a candidate; elsewhere the pair counts as not near
            f = np.flatnonzero((hits[after] > hits[before]) & (g < NEAR_GAP))
            g = np.maximum(g, NEAR_GAP)
            g[f] = surface_gap(outline(trace, i, f), outline(trace, j, f))
        padded = np.concatenate(([False], g < NEAR_GAP, [False]))
        edge = np.flatnonzero(padded[1:] != padded[:-1])  # alternately the start and the stop of a dip
        start, stop = edge[::2], edge[1::2]
        has_candidate = hits[stop] > hits[start]
        for s, e in zip(start[has_candidate], stop[has_candidate]):  # each dip, at its closest frame
            m = s + int(np.argmin(g[s:e]))
            lo, hi = max(m - w, 0), min(m + w + 1, T)
            if near[k, m] and g[m] > 0 and g[lo:m + 1].max() >= g[m] + NEAR_GAP and g[m:hi].max() >= g[m] + NEAR_GAP:
                out.append((m, {"object_a": trace.names[i], "object_b": trace.names[j], "gap": round(float(g[m]), 1)}))
    return sorted(out, key=lambda ev: ev[0])
