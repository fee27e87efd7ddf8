"""Templates 00001-00012 against PHYRE's own layouts.

``tests/data/phyre_reference/<id>.json`` holds what PHYRE 0.2.2's task
creator builds for a few parameter sets of each template (written by
``scripts/phyre_reference.py``; PHYRE itself is not needed here). Our
scenes must reproduce those bodies: same kinds, colours, dynamics, goal pair
and geometry within half a pixel. Where PHYRE puts geometry beyond the
walls, ours may differ only there: bars are cut at the walls' outer faces
(compared inside the scene square) and static bodies that reach nowhere into
the scene, or lie within another static body, may be left out.

To regenerate a reference (needs PHYRE): feed its parameter list back in,
``python -c 'import json,sys; print(json.dumps([r["params"] for r in
json.load(open(sys.argv[1]))["results"]]))' 00001.json > p.json`` then
``/tmp/phyre39/bin/python scripts/phyre_reference.py 00001 p.json > 00001.json``.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from simpatterns.simulators.phyre import SkipVariant, check_action, get_template, simulate
from simpatterns.simulators.phyre.geometry import SCENE_SIZE, WALL_THICKNESS
from simpatterns.simulators.phyre.scene import ROLE_GOAL_OBJECT, ROLE_GOAL_SUBJECT, BodySpec, Scene

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data" / "phyre_reference"
TEMPLATE_IDS = [f"{i:05d}" for i in range(1, 13)]
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


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_at_least_100_valid_param_sets(template_id):
    assert len(first_valid(get_template(template_id), 100)) == 100


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_layouts_match_phyre_reference(template_id):
    template = get_template(template_id)
    ref = load_reference(template_id)
    assert ref["template"] == template_id
    assert sum(not r["skipped"] for r in ref["results"]) >= 3
    for result in ref["results"]:
        params = result["params"]
        if result["skipped"]:
            with pytest.raises(SkipVariant):
                template.scene(params)
            continue
        problems = compare_with_reference(template.scene(params), result)
        assert not problems, f"{template_id} {params}: " + "; ".join(problems)


def test_comparison_detects_a_misplaced_body():
    """The reference comparison itself must fail on a layout that differs."""
    ref = next(r for r in load_reference("00002")["results"] if not r["skipped"])
    scene = get_template("00002").scene(ref["params"])
    assert compare_with_reference(scene, ref) == []
    scene.bodies[4].x += 1.0  # the obstacle bar, one pixel to the right
    assert compare_with_reference(scene, ref)


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_goal_colours_roles_names_and_extent(template_id):
    template = get_template(template_id)
    for params in first_valid(template, 12)[::3]:
        scene = template.scene(params)
        green, subject = (scene.bodies[i] for i in scene.goal)
        assert green.dynamic and green.color == "green"
        assert subject.color == ("blue" if subject.dynamic else "purple")
        for spec in scene.bodies:
            if spec is not green and spec is not subject:
                assert spec.color == ("gray" if spec.dynamic else "black"), spec.name
        roles = {b.name: b.role for b in scene.trace_bodies()}
        assert roles[green.name] == ROLE_GOAL_OBJECT and roles[subject.name] == ROLE_GOAL_SUBJECT
        names = [b.name for b in scene.bodies]
        assert len(set(names)) == len(names), names
        assert scene.goal_text().startswith(f"make the {green.name} touch the {subject.name}")
        for spec in scene.bodies:
            if spec.kind == "wall":
                continue
            # every body reaches into the scene; dynamic ones lie wholly inside it;
            # static ones may sink into a wall (PHYRE does) but keep their centre inside the walls
            assert not spec.outside_play_area, spec.name
            if spec.dynamic:
                assert 0 <= spec.left and spec.right <= SCENE_SIZE, spec.name
                assert 0 <= spec.bottom and spec.top <= SCENE_SIZE, spec.name
            else:
                assert OUTER_LO <= spec.center_x <= OUTER_HI, spec.name
                assert OUTER_LO <= spec.center_y <= OUTER_HI, spec.name
                if spec.kind == "bar":
                    assert OUTER_LO - 1e-6 <= spec.left and spec.right <= OUTER_HI + 1e-6, spec.name
                    assert OUTER_LO - 1e-6 <= spec.bottom and spec.top <= OUTER_HI + 1e-6, spec.name


def random_valid_action(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    for _ in range(1000):
        action = rng.uniform(0, 1, size=3)
        if check_action(scene, action) is None:
            return action
    raise AssertionError(f"no valid action found for {scene.template} {scene.params}")


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_random_action_keeps_bodies_inside_walls(template_id):
    template = get_template(template_id)
    rng = np.random.default_rng(int(template_id))
    params = first_valid(template, 30)[int(rng.integers(30))]
    scene = template.scene(params)
    rollout = simulate(scene, random_valid_action(scene, rng), max_steps=400, stride=4)
    assert rollout.valid
    trace = rollout.trace
    dyn = trace.dynamic_mask
    pos = trace.position[:, dyn, :]
    assert np.isfinite(pos).all()
    assert pos.min() >= 0 and pos.max() <= SCENE_SIZE, (template_id, params)


# ------------------------------------------------ builder aids the ports use
def test_trim_to_walls_cuts_only_beyond_the_walls():
    from simpatterns.simulators.phyre import SceneBuilder

    B = SceneBuilder()
    inside = B.add("bar", scale=0.5, dynamic=False, left=10, bottom=50)
    before = (inside.x, inside.y, inside.size["length"])
    inside.trim_to_walls()
    assert (inside.x, inside.y, inside.size["length"]) == before

    ramp = B.add("bar", scale=2.0, dynamic=False, angle=10, left=0, bottom=-2)
    full = our_parts(ramp)[0][1]
    left_end = ramp.left
    ramp.trim_to_walls()
    assert ramp.size["length"] < 0.6 * 2.0 * SCENE_SIZE
    assert ramp.right == pytest.approx(OUTER_HI)
    assert ramp.left == pytest.approx(left_end)
    assert hausdorff(clip_to_scene(our_parts(ramp)[0][1]), clip_to_scene(full)) < 1e-6

    with pytest.raises(ValueError, match="static bars"):
        B.add("bar", scale=0.3, dynamic=True, left=10, bottom=10).trim_to_walls()
    with pytest.raises(ValueError, match="outside the walls"):
        B.add("bar", scale=0.3, dynamic=False, left=300, bottom=10, angle=30).trim_to_walls()


def test_discard_removes_that_very_body():
    from simpatterns.simulators.phyre import SceneBuilder

    B = SceneBuilder()
    first = B.add("bar", scale=0.3, dynamic=False, left=10, bottom=10)
    twin = B.add("bar", scale=0.3, dynamic=False, left=10, bottom=10)  # equal as data, not the same body
    B.discard(twin)
    assert any(b is first for b in B.bodies) and not any(b is twin for b in B.bodies)
    with pytest.raises(ValueError):
        B.discard(twin)
    with pytest.raises(ValueError):
        B.discard(B.bottom_wall)
