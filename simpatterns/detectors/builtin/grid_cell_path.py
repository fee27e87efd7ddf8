import math

PATTERN = "grid cell path"
DESCRIPTION = (
    "A body crosses several grid cells in one movement (transitions less than 1 s apart). Emitted once per "
    "movement, at its last transition, with path (every [column, row] cell visited, in order) and directions "
    "(the coarse compass directions of the movement in order, e.g. ['east', 'south-east']; x+ is east, y+ is "
    "north): the path is cut into legs of 3 cells and each leg's direction is rounded to 8 compass points."
)
DEPENDS = ["grid cell transition"]
PARAMS = ["object", "path", "directions"]
BODY_PARAMS = ["object"]
DIRECTED = False
DURATION = "instant"

GAP_SECONDS = 1.0  # a pause longer than this ends a movement (a body at 25 px/s crosses a cell in 1 s)
MIN_TRANSITIONS = 2  # a single step is a "grid cell transition", not a path
LEG = 3  # cells per leg: a staircase of cell steps (east, north, east, ...) reads as one direction
# 8 compass points counter-clockwise from east, x+ east and y+ north as in the paper
COMPASS = ["east", "north-east", "north", "north-west", "west", "south-west", "south", "south-east"]


def detect(trace, events):
    gap = GAP_SECONDS / trace.dt
    movements = {}  # body -> its movements, each a list of transitions (frame, params)
    for frame, p in events["grid cell transition"]:
        moves = movements.setdefault(p["object"], [])
        if moves and frame - moves[-1][-1][0] <= gap:
            moves[-1].append((frame, p))
        else:
            moves.append([(frame, p)])
    out = []
    for name, moves in movements.items():
        for seg in moves:
            if len(seg) < MIN_TRANSITIONS:
                continue
            path = [seg[0][1]["from_cell"]] + [p["to_cell"] for _, p in seg]
            ends = list(range(LEG, len(path), LEG)) + ([len(path) - 1] if (len(path) - 1) % LEG else [])
            legs = []
            for a, b in zip([0] + ends[:-1], ends):
                if path[b] == path[a]:  # out and back within one leg: keep its single steps
                    legs += [(path[k + 1][0] - path[k][0], path[k + 1][1] - path[k][1]) for k in range(a, b)]
                else:
                    legs.append((path[b][0] - path[a][0], path[b][1] - path[a][1]))
            directions = []
            for dx, dy in legs:
                word = COMPASS[round(math.atan2(dy, dx) / (math.pi / 4)) % 8]
                if not directions or directions[-1] != word:
                    directions.append(word)
            out.append((seg[-1][0], {"object": name, "path": path, "directions": directions}))
    return out
