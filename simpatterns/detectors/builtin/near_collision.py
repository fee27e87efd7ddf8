import math

import numpy as np

PATTERN = "near collision"
DESCRIPTION = (
    "Two objects (not the ground or walls; at least one dynamic) pass close without touching: the gap "
    "between their surfaces dips under 5 px while they move relative to each other (5 px/s or more), having "
    "been at least 5 px wider within 0.25 s before and after, and they do not touch within 0.25 s of the "
    "closest moment. Emitted at the frame of closest approach, with object_a and object_b in body index "
    "order and the gap (px)."
)
DEPENDS = []
PARAMS = ["object_a", "object_b", "gap"]

NEAR_GAP = 5.0  # px between surfaces: a fifth of a grid cell, about the radius of PHYRE's smallest balls
MIN_REL_SPEED = 5.0  # px/s: bodies passing each other, not resting side by side
CLEAR_SECONDS = 0.25  # no contact this close in time: an averted collision, not the run-up to one;
# and within that time the gap closes and reopens by NEAR_GAP: a pass, not bodies moving side by side


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
    d = (np.concatenate([poly[:, 1:], poly[:, :1]], axis=1) - poly)[:, None]
    w = p[:, :, None] - poly[:, None]
    t = np.clip((w * d).sum(-1) / (d * d).sum(-1), 0, 1)
    return np.linalg.norm(w - t[..., None] * d, axis=-1).min(axis=(1, 2))


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
                best = np.minimum(best, np.linalg.norm(p[:, 0] - q[:, 0], axis=1) - rp - rq)
    return best


def fixed_box(trace, j):
    """World bounding box (x0, y0, x1, y1) of fixed body j (plain Python: a few vertices)."""
    (x, y), ang = trace.position[0, j, :2], trace.angle[0, j]
    c, s = math.cos(ang), math.sin(ang)
    xs, ys = [], []
    for part in trace.bodies[j].parts:
        r = part.get("radius", 0.0)
        for px, py in part["vertices"] if part["kind"] == "poly" else [part["center"]]:
            xs += [x + c * px - s * py - r, x + c * px - s * py + r]
            ys += [y + s * px + c * py - r, y + s * px + c * py + r]
    return min(xs), min(ys), max(xs), max(ys)


def detect(trace, events):
    if trace.dim != 2:
        return []
    T = trace.num_frames
    walls = np.array([b.role == "wall" for b in trace.bodies])  # near misses with the scene's walls do not count
    dyn = np.flatnonzero(trace.dynamic_mask & ~walls)
    fixed = np.flatnonzero(~trace.dynamic_mask & ~walls)
    boxes = np.array([fixed_box(trace, j) for j in fixed]).reshape(-1, 4)
    radius = np.array([b.bounding_radius for b in trace.bodies])
    pos, vel, touch = trace.position[..., :2], trace.velocity[..., :2], trace.touching_matrix()
    w = max(1, round(CLEAR_SECONDS / trace.dt))
    t = np.arange(T)
    pairs = []  # (i, j, candidate frames): a cheap screen on bounding circles and boxes
    for i in dyn:
        # clear[t, j]: i and j do not touch within w frames of t
        cum = np.concatenate([np.zeros((1, trace.num_bodies), dtype=int), np.cumsum(touch[:, i], axis=0)])
        clear = cum[np.minimum(t + w + 1, T)] == cum[np.maximum(t - w, 0)]
        frames = np.flatnonzero(np.hypot(vel[:, i, 0], vel[:, i, 1]) >= MIN_REL_SPEED)
        if frames.size and fixed.size:  # bounding circle of i against the boxes of the fixed bodies
            c = pos[frames, i, None]
            out_x = np.maximum(np.maximum(boxes[:, 0] - c[..., 0], c[..., 0] - boxes[:, 2]), 0)
            out_y = np.maximum(np.maximum(boxes[:, 1] - c[..., 1], c[..., 1] - boxes[:, 3]), 0)
            near = (np.hypot(out_x, out_y) - radius[i] < NEAR_GAP) & clear[frames][:, fixed]
            pairs += [(i, fixed[k], frames[near[:, k]]) for k in np.flatnonzero(near.any(axis=0))]
        for j in dyn[dyn > i]:
            d, dv = pos[:, j] - pos[:, i], vel[:, j] - vel[:, i]
            near = ((np.hypot(d[:, 0], d[:, 1]) - radius[i] - radius[j] < NEAR_GAP) & clear[:, j]
                    & (np.hypot(dv[:, 0], dv[:, 1]) >= MIN_REL_SPEED))
            if near.any():
                pairs.append((i, j, np.flatnonzero(near)))
    shapes = {}  # body -> outline at every frame (dynamic) or at frame 0 only (fixed: it never moves)

    def shape_at(i, frames):
        if i not in shapes:
            shapes[i] = outline(trace, i, slice(None) if trace.bodies[i].dynamic else [0])
        return [(p[frames] if p.shape[0] > 1 else p, r, poly) for p, r, poly in shapes[i]]

    out = []
    for i, j, cand in pairs:
        # exact gaps within w frames of the candidates; the gap counts as wide elsewhere
        span = np.zeros(T + 1, dtype=int)
        np.add.at(span, np.maximum(cand - w, 0), 1)
        np.add.at(span, np.minimum(cand + w + 1, T), -1)
        frames = np.flatnonzero(np.cumsum(span[:T]) > 0)
        g = np.full(T, np.inf)
        g[frames] = surface_gap(shape_at(i, frames), shape_at(j, frames))
        ok = np.zeros(T, dtype=bool)
        ok[cand] = True
        edge = np.diff(np.concatenate(([0], (g < NEAR_GAP).astype(np.int8), [0])))
        for s, e in zip(np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)):  # each dip, at its closest frame
            k = s + int(np.argmin(g[s:e]))
            lo, hi = max(k - w, 0), min(k + w + 1, T)
            if ok[k] and g[k] > 0 and g[lo:k + 1].max() >= g[k] + NEAR_GAP and g[k:hi].max() >= g[k] + NEAR_GAP:
                a, b = sorted((int(i), int(j)))
                out.append((k, {"object_a": trace.names[a], "object_b": trace.names[b], "gap": round(float(g[k]), 1)}))
    return sorted(out, key=lambda ev: ev[0])
