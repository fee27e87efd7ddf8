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


import numpy as np
import pytest

from simpatterns.simulators.phyre import SkipVariant, get_template, simulate
from simpatterns.simulators.phyre.geometry import SCENE_SIZE
from simpatterns.simulators.phyre.scene import ROLE_GOAL_OBJECT, ROLE_GOAL_SUBJECT

from phyre_reference_check import (  # noqa: E402  (tests/simulators is on sys.path)
    OUTER_HI, OUTER_LO, clip_to_scene, compare_with_reference, first_valid, hausdorff, load_reference, our_parts,
    random_valid_action,
)

TEMPLATE_IDS = [f"{i:05d}" for i in range(1, 13)]


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


def test_roles_follow_positions_even_for_equal_bodies():
    # a body equal, field for field, to an earlier one still gets the role of its own position
    import dataclasses

    from simpatterns.simulators.phyre.scene import ROLE_CONFOUNDER, Scene

    scene = get_template("00000").variant_scene(0)
    g, s = scene.goal
    twin = dataclasses.replace(scene.bodies[g])  # equal to the goal object, a new position
    bodies = list(scene.bodies) + [twin]
    moved = Scene(bodies, (len(bodies) - 1, s), scene.template, scene.variant, dict(scene.params), scene.description)
    roles = [b.role for b in moved.trace_bodies()]
    assert roles[-1] == ROLE_GOAL_OBJECT and roles[g] == ROLE_CONFOUNDER and roles[s] == ROLE_GOAL_SUBJECT
