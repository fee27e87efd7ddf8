"""MJCF models and the bodies a `Trace` describes them with.

`load_model` takes a model file, an MJCF string or an ``MjModel``.
`describe_bodies` turns the model into the trace's bodies, in words: every
body other than the world becomes one trace body, and every geom attached
to the world body (a floor, a table top) becomes a static body of its own, so
"the ball rests on the table" names the table and not "world". Names come
from the model (``_`` and ``-`` read as spaces: ``red_ball`` -> "red ball");
unnamed bodies are called by colour and shape ("red ball", "blue box 2").
Colour words come from the geom's (or its material's, or its flex's) RGBA.
"""

from __future__ import annotations

import colorsys
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simpatterns.trace import Body

# geom type -> shape word
_SHAPES = {
    int(mujoco.mjtGeom.mjGEOM_PLANE): "plane",
    int(mujoco.mjtGeom.mjGEOM_HFIELD): "terrain",
    int(mujoco.mjtGeom.mjGEOM_SPHERE): "ball",
    int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
    int(mujoco.mjtGeom.mjGEOM_ELLIPSOID): "ellipsoid",
    int(mujoco.mjtGeom.mjGEOM_CYLINDER): "cylinder",
    int(mujoco.mjtGeom.mjGEOM_BOX): "box",
    int(mujoco.mjtGeom.mjGEOM_MESH): "mesh",
    int(mujoco.mjtGeom.mjGEOM_SDF): "shape",
}
ROLE_WORLD = "world"  # a geom of the world body (floor, table, wall)
ROLE_BEAD = "rope bead"  # a vertex of a 1D flex (rope, cable)


def load_model(source: Any) -> mujoco.MjModel:
    """An ``MjModel`` from a path to an MJCF (or .mjb) file, MJCF text, or a model.

    Raises ValueError naming the file (or "<MJCF string>") and MuJoCo's reason."""
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, (str, os.PathLike)) and not (isinstance(source, str) and source.lstrip().startswith("<")):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"{path}: no such MJCF file")
        try:
            if path.suffix == ".mjb":
                return mujoco.MjModel.from_binary_path(str(path))
            return mujoco.MjModel.from_xml_path(str(path))
        except ValueError as exc:
            raise ValueError(f"{path}: MuJoCo cannot load the model ({exc})") from exc
    if isinstance(source, str):
        try:
            return mujoco.MjModel.from_xml_string(source)
        except ValueError as exc:
            raise ValueError(f"<MJCF string>: MuJoCo cannot load the model ({exc})") from exc
    raise TypeError(f"a model is an MJCF path, MJCF text or an MjModel, got {type(source).__name__}")


def color_word(rgba: Any) -> str:
    """The colour word a person would use for an RGB(A) value in [0, 1]."""
    r, g, b = (float(v) for v in list(rgba)[:3])
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    if v < 0.18:
        return "black"
    if s < 0.2:
        return "white" if v > 0.85 else "gray"
    deg = h * 360.0
    if deg < 15 or deg >= 340:
        return "red" if v > 0.45 or s < 0.6 else "brown"
    if deg < 45:
        return "orange" if v > 0.6 else "brown"
    if deg < 70:
        return "yellow"
    if deg < 160:
        return "green"
    if deg < 195:
        return "cyan"
    if deg < 255:
        return "blue"
    if deg < 290:
        return "purple"
    return "pink"


def human_name(name: str) -> str:
    """``red_ball`` -> ``red ball``: the words a program or an LLM uses."""
    return " ".join(name.replace("_", " ").replace("-", " ").split())


@dataclass(frozen=True)
class BodyMap:
    """How MuJoCo's bodies, geoms and flex vertices map to trace body indices.

    ``bodies[i]`` describes trace body ``i``. Trace bodies ``0 .. W-1`` are the
    world body's geoms (``world_geoms``), then one per MuJoCo body ``1 ..
    nbody-1`` in model order (``mj_bodies``). ``of_geom[g]`` and
    ``of_mjbody[b]`` give the trace index (-1 for the world body itself).
    """

    bodies: list[Body]
    world_geoms: np.ndarray  # [W] geom ids
    mj_bodies: np.ndarray  # [nbody - 1] MuJoCo body ids 1..nbody-1
    of_geom: np.ndarray  # [ngeom]
    of_mjbody: np.ndarray  # [nbody]
    flex_vert_body: np.ndarray  # [nflexvert] trace index of each flex vertex's body (-1: none)

    @property
    def num_world(self) -> int:
        return int(self.world_geoms.size)


def _geom_rgba(m: mujoco.MjModel, g: int) -> np.ndarray:
    mat = int(m.geom_matid[g])
    return m.mat_rgba[mat] if mat >= 0 else m.geom_rgba[g]


def _part(m: mujoco.MjModel, g: int, origin: np.ndarray) -> dict[str, Any]:
    """The geom's shape in the body frame, centred on the body's recorded position."""
    kind = _SHAPES.get(int(m.geom_type[g]), "shape")
    size = m.geom_size[g]
    center = (m.geom_pos[g] - origin).round(9).tolist()
    part: dict[str, Any] = {"kind": kind, "center": center, "quat": m.geom_quat[g].round(9).tolist()}
    if kind == "ball":
        part["radius"] = float(size[0])
    elif kind == "box":
        part["half_size"] = size[:3].tolist()
        part["radius"] = float(np.linalg.norm(size[:3]))
    elif kind in ("capsule", "cylinder"):
        part["half_length"] = float(size[1])
        part["radius_cross"] = float(size[0])
        part["radius"] = float(size[1] + size[0]) if kind == "capsule" else float(math.hypot(size[0], size[1]))
    elif kind == "ellipsoid":
        part["half_size"] = size[:3].tolist()
        part["radius"] = float(size[:3].max())
    else:  # planes are unbounded (size = rendering extent), meshes use MuJoCo's bounding sphere
        part["radius"] = float(m.geom_rbound[g])
    return part


def _size_words(kind: str, part: dict[str, Any]) -> dict[str, float]:
    if kind == "ball":
        return {"radius": part["radius"]}
    if kind == "box":
        w, d, h = (2 * v for v in part["half_size"])
        return {"width": w, "depth": d, "height": h}
    if kind in ("capsule", "cylinder"):
        return {"radius": part["radius_cross"], "length": 2 * part["half_length"]}
    if kind == "ellipsoid":
        return {"width": 2 * part["half_size"][0], "depth": 2 * part["half_size"][1], "height": 2 * part["half_size"][2]}
    return {}


def describe_bodies(m: mujoco.MjModel, names: dict[int, str] | None = None, position: str = "xipos") -> BodyMap:
    """The trace bodies of model ``m`` (see the module docstring). ``names`` overrides
    the name of MuJoCo bodies by id; ``position`` is the recorded point the parts are
    centred on: ``"xipos"`` the centre of mass, ``"xpos"`` the body frame's origin."""
    names = names or {}
    origin = m.body_ipos if position == "xipos" else np.zeros_like(m.body_ipos)
    geom_body = m.geom_bodyid
    world_geoms = np.flatnonzero(geom_body == 0)
    mj_bodies = np.arange(1, m.nbody)
    flex_body_of_vert = np.full(m.nflexvert, -1, dtype=np.int64)
    bead_of_body: dict[int, tuple[int, int]] = {}  # body -> (flex, vertex)
    for f in range(m.nflex):
        adr, num = int(m.flex_vertadr[f]), int(m.flex_vertnum[f])
        for v in range(num):
            b = int(m.flex_vertbodyid[adr + v])
            if b > 0:
                bead_of_body[b] = (f, v)
    specs: list[tuple[str, str, str, bool, str, dict, tuple]] = []  # (given name, colour, shape, dynamic, role, size, parts)
    for g in world_geoms:
        part = _part(m, int(g), m.geom_pos[g])
        part["center"] = [0.0, 0.0, 0.0]
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g)) or ""
        specs.append((name, color_word(_geom_rgba(m, int(g))), part["kind"], False, ROLE_WORLD,
                      _size_words(part["kind"], part), (part,)))
    for b in mj_bodies:
        b = int(b)
        geoms = np.flatnonzero(geom_body == b)
        visible = [int(g) for g in geoms if m.geom_rgba[g][3] > 0] or [int(g) for g in geoms]
        parts = tuple(_part(m, int(g), origin[b]) for g in geoms)
        dynamic = bool(m.body_weldid[b] != 0 or m.body_mocapid[b] >= 0)
        if b in bead_of_body:
            f = bead_of_body[b][0]
            radius = float(m.flex_radius[f])
            colour, shape, role = color_word(m.flex_rgba[f]), "bead", ROLE_BEAD
            size = {"radius": radius}
            parts = ({"kind": "ball", "center": [0.0, 0.0, 0.0], "quat": [1.0, 0.0, 0.0, 0.0], "radius": radius},)
        elif visible:
            colour = color_word(_geom_rgba(m, visible[0]))
            shape = parts[0]["kind"] if len(parts) == 1 else "compound"
            size = _size_words(shape, parts[0]) if len(parts) == 1 else {}
            role = "other"
        else:
            colour, shape, size, role = "gray", "link", {}, "other"
        name = names.get(b) or mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or ""
        specs.append((name, colour, shape, dynamic, role, size, parts))
    bodies = _unique_bodies(specs)
    of_mjbody = np.full(m.nbody, -1, dtype=np.int64)
    of_mjbody[mj_bodies] = np.arange(mj_bodies.size) + world_geoms.size
    of_geom = of_mjbody[geom_body].copy()
    of_geom[world_geoms] = np.arange(world_geoms.size)
    if m.nflexvert:
        flex_body_of_vert = np.where(m.flex_vertbodyid > 0, of_mjbody[m.flex_vertbodyid], -1)
    return BodyMap(bodies, world_geoms, mj_bodies, of_geom, of_mjbody, flex_body_of_vert)


def _unique_bodies(specs: list[tuple]) -> list[Body]:
    """Bodies with unique names: model names in words, else "colour shape", numbered on repeats."""
    base = [human_name(n) if n else f"{c} {s}" for n, c, s, *_ in specs]
    counts: dict[str, int] = {}
    for n in base:
        counts[n.lower()] = counts.get(n.lower(), 0) + 1
    seen: dict[str, int] = {}
    taken = {n.lower() for n in base if counts[n.lower()] == 1}
    out = []
    for n, (_, colour, shape, dynamic, role, size, parts) in zip(base, specs):
        name = n
        if counts[n.lower()] > 1:
            k = seen.get(n.lower(), 0) + 1
            while f"{n} {k}".lower() in taken:
                k += 1
            seen[n.lower()] = k
            name = f"{n} {k}"
            taken.add(name.lower())
        out.append(Body(name=name, color=colour, shape=shape, dynamic=dynamic, role=role,
                        size={k: float(v) for k, v in size.items()}, parts=tuple(parts)))
    return out
