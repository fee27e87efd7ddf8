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
    """Body i's parts in world coordinates at `frames`: [(points [F, V, 2], radius, is_polygon)]."""
    c, s = np.cos(trace.angle[frames, i])[:, None], np.sin(trace.angle[frames, i])[:, None]
    out = []
    for part in trace.bodies[i].parts:
        local = np.array(part["vertices"] if part["kind"] == "poly" else [part["center"]], dtype=float)
        rot = np.stack([c * local[:, 0] - s * local[:, 1], s * local[:, 0] + c * local[:, 1]], axis=2)
        out.append((trace.position[frames, i, None, :2] + rot, part.get("radius", 0.0), part["kind"] == "poly"))
    return out


def point_to_edges(p, poly):
    """[F]: smallest distance from the points p [F, V, 2] to the edges of the polygons poly [F, W, 2]."""
    ax, ay = poly[:, None, :, 0], poly[:, None, :, 1]  # edge starts [F, 1, W]
    dx, dy = np.roll(ax, -1, axis=2) - ax, np.roll(ay, -1, axis=2) - ay
    wx, wy = p[:, :, None, 0] - ax, p[:, :, None, 1] - ay  # [F, V, W]
    t = np.clip((wx * dx + wy * dy) / (dx * dx + dy * dy), 0, 1)
    ex, ey = wx - t * dx, wy - t * dy
    return np.sqrt((ex * ex + ey * ey).min(axis=(1, 2)))


def surface_gap(parts_i, parts_j):
    """[F]: distance between two bodies' surfaces (exact for separated convex parts)."""
    best = np.inf
    for p, rp, p_poly in parts_i:
        for q, rq, q_poly in parts_j:
            if q_poly:
                best = np.minimum(best, point_to_edges(p, q) - rp)
            if p_poly:
                best = np.minimum(best, point_to_edges(q, p) - rq)
            if not (p_poly or q_poly):
                d = p[:, 0] - q[:, 0]
                best = np.minimum(best, np.sqrt(d[:, 0] ** 2 + d[:, 1] ** 2) - rp - rq)
    return best


def detect(trace, events):
    if trace.dim != 2:
        return []
    T, N = trace.num_frames, trace.num_bodies
    # objects that can move, and the fixed goal body; walls and fixed scenery are passed too often to count
    dynamic = trace.dynamic_mask.tolist()
    bodies = [i for i, b in enumerate(trace.bodies) if b.role != "wall" and (b.dynamic or b.role in GOAL_ROLES)]
    pairs = [(i, j) for k, i in enumerate(bodies) for j in bodies[k + 1:] if dynamic[i] or dynamic[j]]
    if not pairs:
        return []
    ii, jj = np.array(pairs).T
    radius = np.array([b.bounding_radius for b in trace.bodies])
    d = np.take(trace.position, jj, axis=1) - np.take(trace.position, ii, axis=1)  # [T, P, 2]
    dv = np.take(trace.velocity, jj, axis=1) - np.take(trace.velocity, ii, axis=1)
    bound = np.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2) - radius[ii] - radius[jj]  # gap of the bounding circles
    w = max(1, round(CLEAR_SECONDS / trace.dt))
    t = np.arange(T)
    touch = trace.touching_matrix().reshape(T, N * N)[:, ii * N + jj]
    cum = np.concatenate([np.zeros((1, len(pairs)), dtype=int), np.cumsum(touch, axis=0)])
    clear = cum[np.minimum(t + w + 1, T)] == cum[np.maximum(t - w, 0)]  # no contact within w frames
    near = (bound < NEAR_GAP) & clear & (dv[..., 0] ** 2 + dv[..., 1] ** 2 >= MIN_REL_SPEED ** 2)
    out = []
    for k in np.flatnonzero(near.any(axis=0)):
        i, j = int(ii[k]), int(jj[k])
        g = bound[:, k].copy()  # bounding circles are exact for balls and a lower bound otherwise
        hits = np.concatenate(([0], np.cumsum(near[:, k])))
        if not (round_body(trace, i) and round_body(trace, j)):
            # exact gaps within w frames of a candidate; elsewhere the pair counts as not near
            span = hits[np.minimum(t + w + 1, T)] > hits[np.maximum(t - w, 0)]
            f = np.flatnonzero(span & (g < NEAR_GAP))
            g = np.maximum(g, NEAR_GAP)
            g[f] = surface_gap(outline(trace, i, f), outline(trace, j, f))
        edge = np.diff(np.concatenate(([0], (g < NEAR_GAP).astype(np.int8), [0])))
        start, stop = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
        has_candidate = hits[stop] > hits[start]
        for s, e in zip(start[has_candidate], stop[has_candidate]):  # each dip, at its closest frame
            m = s + int(np.argmin(g[s:e]))
            lo, hi = max(m - w, 0), min(m + w + 1, T)
            if near[m, k] and g[m] > 0 and g[lo:m + 1].max() >= g[m] + NEAR_GAP and g[m:hi].max() >= g[m] + NEAR_GAP:
                out.append((m, {"object_a": trace.names[i], "object_b": trace.names[j], "gap": round(float(g[m]), 1)}))
    return sorted(out, key=lambda ev: ev[0])
