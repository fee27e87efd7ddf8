"""The PHYRE world: determinism, physics sanity on every template, success rule, invalid actions."""

from __future__ import annotations

import math

import numpy as np
import pymunk
import pytest

from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate
from simpatterns.simulators.phyre import geometry as geo
from simpatterns.simulators.phyre.physics import DENSITY, GRAVITY, SOLVE_STEPS, action_to_index, quantize_action
from simpatterns.trace import COLLISION_END, COLLISION_START, TASK_COMPLETE, Trace

STEPS = 300  # enough for bodies to fall, collide and settle in most scenes


def first_scene(tid: str):
    t = get_template(tid)
    if t.num_variants:
        return t.variant_scene(0)
    return t.scene(next(iter(t.valid_param_sets())))


def random_valid_action(scene, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        a = rng.random(3)
        if check_action(scene, a) is None:
            return a
    raise AssertionError("no valid action found")


@pytest.fixture(scope="module")
def template_traces() -> dict[str, Trace]:
    out = {}
    for tid in TEMPLATES:
        scene = first_scene(tid)
        rollout = simulate(scene, random_valid_action(scene, int(tid)), max_steps=STEPS, stop_on_success=False)
        assert rollout.trace is not None
        out[tid] = rollout.trace
    return out


def test_determinism_bit_identical():
    scene = first_scene("00000")
    a = random_valid_action(scene, 3)
    t1, t2 = simulate(scene, a).trace, simulate(scene, a).trace
    assert t1.equals(t2)
    assert t1.position.tobytes() == t2.position.tobytes()
    assert t1.contact_impulse.tobytes() == t2.contact_impulse.tobytes()


@pytest.mark.parametrize("tid", list(TEMPLATES))
def test_bodies_stay_inside_walls(template_traces, tid):
    tr = template_traces[tid]
    dyn = tr.dynamic_mask
    pos = tr.position[:, dyn]
    radius = np.array([b.bounding_radius for b in tr.bodies])[dyn]
    # centres never leave the scene box (a body may touch the walls, not pass them)
    assert (pos > -1.0).all() and (pos < 257.0).all(), f"{tid}: body centre left the scene"
    assert np.isfinite(tr.position).all() and np.isfinite(tr.velocity).all()
    assert (radius > 0).all()


def _mass_and_inertia(body) -> tuple[float, float]:
    mass = inertia = 0.0
    for part in body.parts:
        if part["kind"] == "circle":
            m = DENSITY * math.pi * part["radius"] ** 2
            inertia += pymunk.moment_for_circle(m, 0, part["radius"], tuple(part["center"]))
        else:
            area, _, _ = geo.polygon_area_centroid(part["vertices"])
            m = DENSITY * area
            inertia += pymunk.moment_for_poly(m, [tuple(v) for v in part["vertices"]])
        mass += m
    return mass, inertia


@pytest.mark.parametrize("tid", list(TEMPLATES))
def test_energy_of_untouched_scene_does_not_grow(tid):
    tr = simulate(first_scene(tid), None, max_steps=240).trace
    kinetic = np.zeros(tr.num_frames)
    potential = np.zeros(tr.num_frames)
    for i, body in enumerate(tr.bodies):
        if not body.dynamic:
            continue
        m, inertia = _mass_and_inertia(body)
        v2 = (tr.velocity[:, i] ** 2).sum(axis=1)
        kinetic += 0.5 * m * v2 + 0.5 * inertia * tr.angular_velocity[:, i] ** 2
        potential += -m * GRAVITY * tr.position[:, i, 1]
    energy = kinetic + potential
    # Semi-implicit Euler carries an O(dt) energy offset proportional to the motion, so the
    # tolerance scales with the kinetic energy; a scene at rest gets almost none.
    tol = 0.02 * kinetic.max() + 1e-6 * abs(energy[0])
    assert energy[-1] <= energy[0] + tol, f"{tid}: energy grew from {energy[0]:.6g} to {energy[-1]:.6g}"
    half = tr.num_frames // 2
    assert energy[half:].max() <= energy[half] + tol, f"{tid}: energy grew in the second half"


def _pair_distances(tr: Trace, frame: int, inflate: float) -> dict[tuple[int, int], float]:
    """Deepest contact distance between bodies' shapes inflated by ``inflate`` px
    (negative = overlapping), for every pair whose inflated shapes meet."""
    space = pymunk.Space()
    owner: dict[pymunk.Shape, int] = {}
    for i, body in enumerate(tr.bodies):
        b = pymunk.Body(body_type=pymunk.Body.STATIC)
        b.position = tuple(tr.position[frame, i])
        b.angle = float(tr.angle[frame, i])
        shapes = []
        for part in body.parts:
            if part["kind"] == "circle":
                shapes.append(pymunk.Circle(b, part["radius"] + inflate, tuple(part["center"])))
            else:
                shapes.append(pymunk.Poly(b, [tuple(v) for v in part["vertices"]], radius=inflate))
        space.add(b, *shapes)
        owner.update({s: i for s in shapes})
    out: dict[tuple[int, int], float] = {}
    for shape, i in owner.items():
        for info in space.shape_query(shape):
            j = owner[info.shape]
            if j == i or not info.contact_point_set.points:
                continue
            d = min(p.distance for p in info.contact_point_set.points)
            key = (min(i, j), max(i, j))
            out[key] = min(out.get(key, math.inf), d)
    return out


@pytest.mark.parametrize("tid", list(TEMPLATES))
def test_contacts_recorded_iff_touching(template_traces, tid):
    tr = template_traces[tid]
    touch = tr.touching_matrix()
    dyn = tr.dynamic_mask
    tol = 0.5  # px: pymunk keeps resting contacts within its collision slop
    for frame in range(1, tr.num_frames, 15):
        dist = _pair_distances(tr, frame, inflate=tol)
        for i in range(tr.num_bodies):
            for j in range(i + 1, tr.num_bodies):
                if not (dyn[i] or dyn[j]):
                    continue
                d = dist.get((i, j), math.inf)  # of the inflated shapes
                if touch[frame, i, j]:
                    assert d < 0, f"{tid} frame {frame}: {tr.names[i]}/{tr.names[j]} recorded but not within {tol} px"
                else:
                    # overlapping by more than the tolerance without a contact row would be a miss
                    assert not d < -3 * tol, f"{tid} frame {frame}: {tr.names[i]}/{tr.names[j]} overlap, no contact"


@pytest.mark.parametrize("tid", list(TEMPLATES))
def test_collision_start_end_pair_up(template_traces, tid):
    tr = template_traces[tid]
    open_pairs: dict[tuple[str, str], int] = {}
    for e in tr.events:
        if e.kind == TASK_COMPLETE:
            continue
        key = (e.params["object_a"], e.params["object_b"])
        if e.kind == COLLISION_START:
            assert key not in open_pairs, f"{tid}: {key} started twice without an end"
            open_pairs[key] = e.frame
        else:
            assert e.kind == COLLISION_END
            assert key in open_pairs and open_pairs.pop(key) < e.frame
    touch = tr.touching_matrix()
    for (a, b) in open_pairs:  # still touching at the last frame
        assert touch[-1, tr.body_index(a), tr.body_index(b)]
    assert sum(e.kind == TASK_COMPLETE for e in tr.events) == 1


def _success_from_contacts(tr: Trace) -> tuple[bool, int | None]:
    g1, g2 = (tr.body_index(n) for n in tr.meta["goal"])
    touching = tr.pair_touching(g1, g2)
    run = 0
    for f in range(1, tr.num_frames):  # steps are frames 1..T-1
        run = run + 1 if touching[f] else 0
        if run >= SOLVE_STEPS:
            return True, f
    return False, None


def test_success_rule_matches_contact_rows():
    checked_success = 0
    for tid in ("00000", "00001", "00002", "00005", "00012"):
        if tid not in TEMPLATES:
            continue
        t = get_template(tid)
        for v in range(min(3, t.num_variants)):
            scene = t.variant_scene(v)
            for action in (t.solution(v), random_valid_action(scene, v)):
                tr = simulate(scene, action, stop_on_success=False).trace
                ok, frame = _success_from_contacts(tr)
                assert ok == tr.success
                assert frame == tr.meta["solved_frame"]
                checked_success += ok
    assert checked_success > 0


def test_early_stop_on_success_keeps_outcome():
    t = get_template("00000")
    scene, sol = t.variant_scene(0), t.solution(0)
    full = simulate(scene, sol, stop_on_success=False).trace
    short = simulate(scene, sol).trace
    assert short.success and full.success
    assert short.num_frames == short.meta["solved_frame"] + 1 < full.num_frames
    assert np.array_equal(short.position, full.position[: short.num_frames])


@pytest.mark.parametrize(
    "action, reason",
    [
        ((0.5, 0.5, 1.5), "r = 1.5 is outside [0, 1]"),
        ((-0.1, 0.5, 0.5), "x = -0.1 is outside [0, 1]"),
        ((math.nan, 0.5, 0.5), "x = nan is not finite"),
        ((0.5, math.inf, 0.5), "y = inf is not finite"),
        ((0.5, 0.5), "3 values"),
        (("a", 0.5, 0.5), "three numbers"),
        ((0.01, 0.5, 0.5), "extends outside the scene"),
        ((0.5, 0.99, 0.5), "extends outside the scene"),
    ],
)
def test_invalid_actions_return_reason(action, reason):
    scene = first_scene("00000")
    rollout = simulate(scene, action)
    assert rollout.trace is None and not rollout.valid and not rollout.success
    assert reason in rollout.invalid_reason


def test_overlapping_ball_is_invalid_and_names_the_body():
    scene = first_scene("00000")
    green = scene.bodies[scene.goal[0]]
    x, y = green.center_x / 255.0, green.center_y / 255.0
    rollout = simulate(scene, (x, y, 0.1))
    assert rollout.trace is None
    assert "overlaps green ball" in rollout.invalid_reason


def test_stride_thins_and_says_so():
    scene = first_scene("00000")
    a = random_valid_action(scene, 9)
    full = simulate(scene, a, stop_on_success=False).trace
    thin = simulate(scene, a, stop_on_success=False, stride=10).trace
    assert thin.meta["stride"] == 10 and thin.dt == pytest.approx(full.dt * 10)
    assert np.array_equal(thin.position, full.position[::10])
    assert thin.success == full.success
    assert set(thin.contact_frame.tolist()) <= set(range(thin.num_frames))


def test_quantised_action_grid_round_trips():
    bins = 8
    for index in (0, 1, 7, 8, 63, 64, 511):
        a = quantize_action(index, bins)
        assert ((a > 0) & (a < 1)).all()
        assert action_to_index(a, bins) == index
    with pytest.raises(ValueError):
        quantize_action(bins**3, bins)


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 1e6


def test_rollouts_do_not_leak_memory():
    # pymunk's batch buffers are C memory (invisible to tracemalloc); a leak there was
    # about 1 MB per 1000-step rollout
    scene = first_scene("00000")
    a = random_valid_action(scene, 5)
    simulate(scene, a, stop_on_success=False)
    before = _rss_mb()
    for _ in range(60):
        simulate(scene, a, stop_on_success=False)
    assert _rss_mb() - before < 25


def test_merged_contacts_do_not_depend_on_the_order_chipmunk_reports_arbiters():
    # chipmunk lists arbiters in an order that follows memory addresses (it differs between
    # processes); a jar's parts give several rows per (frame, pair), which are summed
    from simpatterns.simulators.phyre.physics import merge_contacts

    def merge(rows):  # rows of (frame, a, b, px, py, nx, ny, impulse) -> merge_contacts' key and columns
        key = (rows[:, 0].astype(np.int64) * 3 + rows[:, 1].astype(np.int64)) * 3 + rows[:, 2].astype(np.int64)
        return merge_contacts(key, [rows[:, j].copy() for j in range(3, 8)], 3)

    rng = np.random.default_rng(0)
    frames = np.repeat(np.arange(1, 41), 6)
    pairs = np.tile([[0, 1], [0, 1], [0, 1], [1, 2], [1, 2], [0, 2]], (40, 1))  # groups of 3, 2 and 1
    values = rng.normal(size=(frames.size, 5)) * [100, 100, 1, 1, 1e3]
    values[1::6, 0] = values[::6, 0]  # a tie in point x within a group of 3: ordered by the other columns
    rows = np.column_stack([frames, pairs, values])
    merged = merge(rows)
    assert merged["contact_frame"].size == 3 * 40 and np.all(np.diff(merged["contact_frame"]) >= 0)
    for seed in range(5):
        shuffled = rows[np.random.default_rng(seed).permutation(rows.shape[0])]
        shuffled = shuffled[np.argsort(shuffled[:, 0], kind="stable")]  # steps come in order, arbiters do not
        again = merge(shuffled)
        for name, arr in merged.items():
            assert arr.dtype == again[name].dtype and arr.tobytes() == again[name].tobytes(), name
    # the caller's columns are left as they were
    for key in ([7, 7, 7, 4], [4, 7, 7, 7]):  # unsorted, and sorted with a group of 3 to order
        key = np.array(key, dtype=np.int64)
        columns = [np.array([3.0, 1.0, 2.0, 0.0])] + [rng.normal(size=4) for _ in range(4)]
        before = key.copy(), [c.copy() for c in columns]
        merge_contacts(key, columns, 3)
        assert key.tobytes() == before[0].tobytes()
        assert all(c.tobytes() == b.tobytes() for c, b in zip(columns, before[1]))
    # three rows of one pair: the impulse is their sum, the point their mean, the normal their unit sum
    k = np.flatnonzero((merged["contact_frame"] == 1) & (merged["contact_a"] == 0) & (merged["contact_b"] == 1))[0]
    g = rows[:3]
    assert np.isclose(merged["contact_impulse"][k], g[:, 7].sum())
    assert np.allclose(merged["contact_point"][k], g[:, 3:5].mean(axis=0))
    assert np.allclose(merged["contact_normal"][k], g[:, 5:7].sum(axis=0) / np.linalg.norm(g[:, 5:7].sum(axis=0)))
