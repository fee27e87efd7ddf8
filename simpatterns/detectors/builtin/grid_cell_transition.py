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
    dyn = np.flatnonzero(trace.dynamic_mask)
    pos = np.take(trace.position[..., :2], dyn, axis=1)  # [T, M, 2]
    if trace.meta.get("world_size"):
        lo, size = np.zeros(2), np.asarray(trace.meta["world_size"], dtype=float)[:2]
    else:  # no declared world: grid over the extent the bodies cover
        lo, size = pos.min(axis=(0, 1)), np.ptp(pos, axis=(0, 1)) + 1e-9
    u = (pos - lo) * (GRID / size)  # position in cell units
    cell = np.floor(u)
    h = HYSTERESIS * GRID / size
    sure = (u - cell >= h) & (u - cell <= 1 - h)  # well inside its cell along that axis
    sure[0] = True
    # per axis, carry the last cell seen well inside a cell forward over the frames near a boundary
    last = np.maximum.accumulate(np.where(sure, np.arange(len(u))[:, None, None], 0), axis=0)
    cell = np.clip(np.take_along_axis(cell, last, axis=0), 0, GRID - 1).astype(int)
    t, m = np.nonzero((cell[1:] != cell[:-1]).any(axis=2))
    names = [trace.names[i] for i in dyn]
    return [(int(f) + 1, {"object": names[k], "from_cell": cell[f, k].tolist(), "to_cell": cell[f + 1, k].tolist()})
            for f, k in zip(t, m)]
