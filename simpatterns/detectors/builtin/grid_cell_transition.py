import numpy as np

PATTERN = "grid cell transition"
DESCRIPTION = (
    "The scene is divided into a 10 x 10 grid. Cells are [column, row] counted from 0 at the bottom-left: "
    "the column grows east (x+), the row grows north (y+). Emitted at each frame a dynamic body's centre "
    "enters a neighbouring cell, with from_cell and to_cell."
)
DEPENDS = []
PARAMS = ["object", "from_cell", "to_cell"]

GRID = 10  # cells per side, as in the paper
HYSTERESIS = 0.5  # px a centre must be inside a new cell: bodies resting on a cell edge jitter by ~0.01 px


def detect(trace, events):
    pos = trace.position[:, :, :2]
    if trace.meta.get("world_size"):
        lo, size = np.zeros(2), np.asarray(trace.meta["world_size"], dtype=float)[:2]
    else:  # no declared world: grid over the extent the bodies cover
        lo, size = pos.min(axis=(0, 1)), np.ptp(pos, axis=(0, 1)) + 1e-9
    u = (pos - lo) / (size / GRID)  # position in cell units, [T, N, 2]
    cell = np.clip(np.floor(u), 0, GRID - 1).astype(int)
    frac = u - np.floor(u)
    h = HYSTERESIS * GRID / size
    sure = (frac >= h) & (frac <= 1 - h)
    sure[0] = True
    # keep each axis's last cell seen well inside a cell (forward fill over frames)
    idx = np.maximum.accumulate(np.where(sure, np.arange(len(u))[:, None, None], 0), axis=0)
    cell = np.take_along_axis(cell, idx, axis=0)
    moved = (cell[1:] != cell[:-1]).any(axis=2) & trace.dynamic_mask  # [T-1, N]
    names = trace.names
    return [
        (int(t) + 1, {"object": names[i], "from_cell": cell[t, i].tolist(), "to_cell": cell[t + 1, i].tolist()})
        for t, i in zip(*np.nonzero(moved))
    ]
