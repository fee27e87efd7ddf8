import numpy as np

PATTERN = "grid cell transition"
DESCRIPTION = (
    "The scene is divided into a 10 x 10 grid. Cells are [column, row] counted from 0 at the bottom-left: "
    "the column grows east (x+), the row grows north (y+). Emitted at each frame a dynamic body's centre "
    "enters a neighbouring cell, with from_cell and to_cell."
)
DEPENDS = []
PARAMS = ["object", "from_cell", "to_cell"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "instant"

GRID = 10  # cells per side, as in the paper
HYSTERESIS = 0.5  # px a centre must be inside a new cell: bodies resting on a cell edge jitter by ~0.01 px


def detect(trace, events):
    dyn = np.flatnonzero(trace.dynamic_mask)
    if not dyn.size:
        return []
    T, M = trace.num_frames, dyn.size
    pos = np.take(trace.position[..., :2], dyn, axis=1)  # [T, M, 2]
    if trace.meta.get("world_size"):
        lo, size = np.zeros(2), np.asarray(trace.meta["world_size"], dtype=float)[:2]
    else:  # no declared world: grid over the extent the bodies cover
        lo, size = pos.min(axis=(0, 1)), np.ptp(pos, axis=(0, 1)) + 1e-9
    # one row per body and axis (x and y of body 0, x and y of body 1, ...), frames along the row
    u = np.ascontiguousarray(pos.reshape(T, 2 * M).T)
    u = (u - np.tile(lo, M)[:, None]) * np.tile(GRID / size, M)[:, None]  # [2M, T], position in cell units
    cell = np.floor(u)
    h = np.tile(HYSTERESIS * GRID / size, M)[:, None]
    frac = u - cell
    sure = (frac >= h) & (frac <= 1 - h)  # well inside its cell along that axis
    sure[:, 0] = True
    # a row's cell at frame t is the one seen at its last sure frame <= t (carried over frames near a boundary)
    at = np.flatnonzero(sure)  # row * T + frame, in order
    seen = np.clip(cell.ravel()[at], 0, GRID - 1).astype(int)
    new = seen[1:] != seen[:-1]
    new[np.cumsum(sure.sum(axis=1))[:-1] - 1] = False  # the first entry of the next row is no transition
    change = at[1:][new]
    key = np.sort(change % T * M + change // T // 2)  # (frame, body) of each transition, by frame then body
    key = key[np.concatenate(([True], key[1:] != key[:-1]))[:key.size]]  # once each (np.unique costs 10x)
    frame, body = key // M, key % M
    rows = (2 * body[:, None] + np.arange(2)) * T  # [E, 2]: start of each axis row of the body
    before = seen[np.searchsorted(at, rows + frame[:, None] - 1, side="right") - 1]
    after = seen[np.searchsorted(at, rows + frame[:, None], side="right") - 1]
    names = [trace.names[i] for i in dyn]
    return [(f, {"object": names[m], "from_cell": a, "to_cell": b})
            for f, m, a, b in zip(frame.tolist(), body.tolist(), before.tolist(), after.tolist())]
