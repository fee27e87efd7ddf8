"""Comparing our template scenes with PHYRE's own layouts (stored references).

Shared by test_templates_a.py (00001-00012) and test_templates_b.py (00013-00024).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np

from simpatterns.simulators.phyre import check_action
from simpatterns.simulators.phyre.geometry import SCENE_SIZE, WALL_THICKNESS
from simpatterns.simulators.phyre.scene import BodySpec, Scene

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data" / "phyre_reference"
TOL = 0.5  # px
OUTER_LO, OUTER_HI = -WALL_THICKNESS, SCENE_SIZE + WALL_THICKNESS


# ---------------------------------------------------------------- geometry
def our_parts(spec: BodySpec) -> list[tuple[str, np.ndarray, float]]:
    """World geometry of a body: ("circle", centre, r) or ("poly", vertices, 0)."""
    c, s = math.cos(spec.angle), math.sin(spec.angle)
    rot = np.array([[c, -s], [s, c]])
    origin = np.array([spec.x, spec.y])
    out = []
    for part in spec.parts:
        if part["kind"] == "circle":
            out.append(("circle", rot @ np.asarray(part["center"]) + origin, part["radius"]))
        else:
            out.append(("poly", np.asarray(part["vertices"], dtype=float) @ rot.T + origin, 0.0))
    return out


def phyre_parts(body: dict) -> list[tuple[str, np.ndarray, float]]:
    polys = iter(body["world_polygons"])
    out = []
    for shape in body["shapes"]:
        if shape["kind"] == "circle":
            out.append(("circle", np.asarray(body["position"], dtype=float), shape["radius"]))
        else:
            out.append(("poly", np.asarray(next(polys), dtype=float), 0.0))
    return out


def clip_to_scene(vertices: np.ndarray) -> np.ndarray:
    """A convex polygon cut to the scene square (Sutherland-Hodgman)."""
    pts = [tuple(v) for v in vertices]
    for axis, bound, keep_below in ((0, 0.0, False), (0, SCENE_SIZE, True), (1, 0.0, False), (1, SCENE_SIZE, True)):
        inside = (lambda p: p[axis] <= bound) if keep_below else (lambda p: p[axis] >= bound)
        out = []
        for i, cur in enumerate(pts):
            prev = pts[i - 1]
            if inside(cur) != inside(prev):
                t = (bound - prev[axis]) / (cur[axis] - prev[axis])
                out.append(tuple(prev[k] + t * (cur[k] - prev[k]) for k in range(2)))
            if inside(cur):
                out.append(cur)
        pts = out
        if not pts:
            return np.zeros((0, 2))
    return np.asarray(pts)


def hausdorff(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0 or len(b) == 0:
        return 0.0 if len(a) == len(b) else math.inf
    d = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    return float(max(d.min(axis=1).max(), d.min(axis=0).max()))


def within_outer_box(parts) -> bool:
    pts = np.concatenate([p if k == "poly" else np.array([p - r, p + r]) for k, p, r in parts])
    return bool(pts.min() >= OUTER_LO - 1e-6 and pts.max() <= OUTER_HI + 1e-6)


def geometry_mismatch(ours: BodySpec, ref: dict) -> float:
    """Largest distance between corresponding geometry (inf if incomparable)."""
    a, b = our_parts(ours), phyre_parts(ref)
    if len(a) != len(b) or any(x[0] != y[0] for x, y in zip(a, b)):
        return math.inf
    clip = not within_outer_box(b)  # PHYRE's body runs past the walls: compare inside the scene only
    worst = 0.0
    for (kind, pa, ra), (_, pb, rb) in zip(a, b):
        if kind == "circle":
            worst = max(worst, float(np.linalg.norm(pa - pb)), abs(ra - rb))
        elif clip:
            worst = max(worst, hausdorff(clip_to_scene(pa), clip_to_scene(pb)))
        else:
            worst = max(worst, hausdorff(pa, pb))
    return worst


def point_in_convex(p: np.ndarray, poly: np.ndarray, tol: float = 1e-6) -> bool:
    edges = np.roll(poly, -1, axis=0) - poly
    rel = p - poly
    cross = edges[:, 0] * rel[:, 1] - edges[:, 1] * rel[:, 0]
    return bool(np.all(cross >= -tol) or np.all(cross <= tol))


def omittable(ref: dict, others: list[dict]) -> bool:
    """A PHYRE body we may leave out: static and reaching nowhere into the
    scene, or with its part in the scene lying within another static body."""
    if ref["dynamic"]:
        return False
    box = ref["bbox"]
    if box["right"] <= 0 or box["left"] >= SCENE_SIZE or box["top"] <= 0 or box["bottom"] >= SCENE_SIZE:
        return True
    mine = [clip_to_scene(p) for k, p, _ in phyre_parts(ref) if k == "poly"]
    for other in others:
        if other is ref or other["dynamic"]:
            continue
        hosts = [p for k, p, _ in phyre_parts(other) if k == "poly"]
        if mine and all(any(all(point_in_convex(v, h) for v in poly) for h in hosts) for poly in mine):
            return True
    return False


def kind_of(ref: dict) -> str:
    return "wall" if ref["object_type"].endswith("-wall") else ref["object_type"]


def compare_with_reference(scene: Scene, ref: dict) -> list[str]:
    """Problems found comparing our scene to PHYRE's record (empty = match)."""
    problems: list[str] = []
    mapping: dict[int, int] = {}
    j = 0
    for i, body in enumerate(ref["bodies"]):
        ours = scene.bodies[j] if j < len(scene.bodies) else None
        if (
            ours is not None
            and ours.kind == kind_of(body)
            and ours.color == body["color"]
            and ours.dynamic == body["dynamic"]
            and geometry_mismatch(ours, body) <= TOL
        ):
            mapping[i] = j
            j += 1
        elif omittable(body, ref["bodies"]):
            continue
        else:
            found = "nothing" if ours is None else f"{ours.name} (mismatch {geometry_mismatch(ours, body):.3f} px)"
            problems.append(f"PHYRE body {i} ({body['color']} {body['object_type']}) vs ours: {found}")
            return problems
    if j != len(scene.bodies):
        problems.append(f"our bodies {[b.name for b in scene.bodies[j:]]} have no PHYRE counterpart")
    goal = tuple(mapping.get(g, -1) for g in ref["goal"])
    if goal != scene.goal:
        problems.append(f"goal {scene.goal} != PHYRE's {ref['goal']} (mapped {goal})")
    return problems


def load_reference(template_id: str) -> dict:
    return json.loads((REFERENCE_DIR / f"{template_id}.json").read_text())


def first_valid(template, count: int) -> list[dict]:
    return list(itertools.islice(template.valid_param_sets(), count))


def random_valid_action(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    for _ in range(1000):
        action = rng.uniform(0, 1, size=3)
        if check_action(scene, action) is None:
            return action
    raise AssertionError(f"no valid action found for {scene.template} {scene.params}")
