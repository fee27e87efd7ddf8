import numpy as np

PATTERN = "near collision"
DESCRIPTION = (
    "Two bodies pass close without touching: the gap between their surfaces reaches a minimum under 5 px "
    "while they move relative to each other (5 px/s or more), and they do not touch within 0.25 s of that "
    "moment. Emitted at the frame of closest approach, with object_a and object_b in body index order and "
    "the gap (px)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "gap"]

NEAR_GAP = 5.0  # px between surfaces: a fifth of a grid cell, about the radius of PHYRE's smallest balls
MIN_REL_SPEED = 5.0  # px/s: bodies passing each other, not resting side by side
CLEAR_SECONDS = 0.25  # no contact this close in time: an averted collision, not the run-up to one


def outline(trace, i):
    """Body i's parts in world coordinates: [(points [T, V, 2], radius, is_polygon)]."""
    c, s = np.cos(trace.angle[:, i])[:, None], np.sin(trace.angle[:, i])[:, None]
    out = []
    for part in trace.bodies[i].parts:
        local = np.array(part["vertices"] if part["kind"] == "poly" else [part["center"]], dtype=float)
        rot = np.stack([c * local[:, 0] - s * local[:, 1], s * local[:, 0] + c * local[:, 1]], axis=2)
        out.append((trace.position[:, i, None, :2] + rot, part.get("radius", 0.0), part["kind"] == "poly"))
    return out


def point_to_edges(p, poly):
    """[T]: smallest distance from the points p [T, V, 2] to the edges of the polygons poly [T, W, 2]."""
    d = (np.roll(poly, -1, axis=1) - poly)[:, None]
    w = p[:, :, None] - poly[:, None]
    t = np.clip((w * d).sum(-1) / (d * d).sum(-1), 0, 1)
    return np.linalg.norm(w - t[..., None] * d, axis=-1).min(axis=(1, 2))


def surface_gap(parts_i, parts_j):
    """[T]: distance between two bodies' surfaces (exact for separated convex parts)."""
    best = np.inf
    for p, rp, p_poly in parts_i:
        for q, rq, q_poly in parts_j:
            if q_poly:
                best = np.minimum(best, point_to_edges(p, q) - rp)
            if p_poly:
                best = np.minimum(best, point_to_edges(q, p) - rq)
            if not (p_poly or q_poly):
                best = np.minimum(best, np.linalg.norm(p[:, 0] - q[:, 0], axis=1) - rp - rq)
    return best


def detect(trace, events):
    if trace.dim != 2:
        return []
    T, N = trace.num_frames, trace.num_bodies
    # cheap screen on bounding boxes: exact for fixed bodies, a circle of the bounding radius for moving ones
    radius = np.array([b.bounding_radius for b in trace.bodies])
    lo, hi = trace.position - radius[:, None], trace.position + radius[:, None]
    for i in np.flatnonzero(~trace.dynamic_mask):
        pts = np.concatenate([p[0] - r for p, r, _ in outline(trace, i)] + [p[0] + r for p, r, _ in outline(trace, i)])
        lo[:, i], hi[:, i] = pts.min(axis=0), pts.max(axis=0)
    box_gap = np.maximum(lo[:, None] - hi[:, :, None], lo[:, :, None] - hi[:, None]).max(axis=3)
    rel_speed = np.linalg.norm(trace.velocity[:, None] - trace.velocity[:, :, None], axis=3)
    moving = trace.dynamic_mask[:, None] | trace.dynamic_mask[None, :]
    cand = (box_gap < NEAR_GAP) & (rel_speed >= MIN_REL_SPEED) & np.triu(moving, 1)
    touch = trace.touching_matrix()
    w = max(1, round(CLEAR_SECONDS / trace.dt))
    out = []
    for i, j in zip(*np.nonzero(cand.any(axis=0))):
        g = surface_gap(outline(trace, i), outline(trace, j))
        t = np.flatnonzero((g[1:-1] < g[:-2]) & (g[1:-1] <= g[2:]) & (g[1:-1] < NEAR_GAP) & (g[1:-1] > 0)) + 1
        t = t[cand[t, i, j]]
        if t.size == 0:
            continue
        c = np.concatenate(([0], np.cumsum(touch[:, i, j])))
        clear = c[np.minimum(t + w + 1, T)] - c[np.maximum(t - w, 0)] == 0
        out += [(int(f), {"object_a": trace.names[i], "object_b": trace.names[j], "gap": round(float(g[f]), 1)})
                for f in t[clear]]
    return sorted(out, key=lambda ev: ev[0])
