"""Built-in contact and impact patterns on purpose-built scenes whose outcome is known by construction."""

from __future__ import annotations

import math

import numpy as np

from simpatterns.simulators.phyre.physics import DT, GRAVITY, RESTITUTION

G = -GRAVITY  # 58.8 px/s^2


def fall_frames(height: float) -> float:
    """Steps for a body released at rest to fall ``height`` px. Chipmunk moves a body with the
    velocity it had before the step's gravity, so after k steps it has fallen g dt^2 k (k - 1) / 2."""
    return (1 + math.sqrt(1 + 8 * height / (G * DT * DT))) / 2


def first_impact_frame(run, name: str) -> float:
    """Frame a body dropped from rest in frame 0 reaches the ground (its lowest point hits y = 0)."""
    i = run.trace.body_index(name)
    return fall_frames(run.trace.position[0, i, 1] - run.trace.bodies[i].size["radius"])


# --------------------------------------------------------------- raw events
def test_raw_events_mirror_the_simulator(scene):
    run = scene("drop")
    for label, kind in (("collision start", "CollisionStart"), ("collision end", "CollisionEnd")):
        raw = [(e.frame, e.params) for e in run.trace.events if e.kind == kind]
        assert run.events(label) == raw
    assert run.frames("collision start", object_a="ground", object_b="green ball") == run.contact_starts(
        "ground", "green ball")
    assert run.events("task complete") == [(run.trace.num_frames - 1, {"success": False})]


def test_task_complete_reports_success_when_the_goal_pair_stays_in_contact(scene):
    run = scene("stack")  # the goal pair is the stacked boxes: they touch for 3 s
    (frame, params), = run.events("task complete")
    assert params == {"success": True} and frame == run.trace.meta["solved_frame"]


# ----------------------------------------------------------------- bounce
def test_dropped_ball_bounces_at_its_impacts_then_rests(scene):
    run = scene("drop")
    bounces = run.frames("bounce", object="green ball")
    assert len(bounces) >= 2
    # first impact from free fall; the second after a flight of 2 v / g with v the measured rebound speed
    assert abs(bounces[0] - first_impact_frame(run, "green ball")) <= 2
    i = run.trace.body_index("green ball")
    rebound = run.trace.velocity[bounces[0] + 1: bounces[0] + 5, i, 1].max()
    assert abs(bounces[1] - (bounces[0] + 2 * rebound / G / DT)) <= 3
    assert all(p == {"object": "green ball", "surface": "ground"} for _, p in run.events("bounce"))
    # ... and then it rests: a global rest starts after the last bounce and lasts to the end
    (rest, params), = run.events("global rest")
    assert rest > bounces[-1] and rest + params["frames"] == run.trace.num_frames
    assert np.abs(run.trace.velocity[rest:, i]).max() < 1.0


def test_no_bounce_without_a_rebound(scene):
    assert not scene("drop").events("bounce", object="gray ball")  # resting from the start
    assert not scene("slide_box").events("bounce")  # slides to a stop
    assert not scene("ramp_roll").events("bounce")  # set on the ramp touching it
    assert not scene("corner").events("bounce")


# --------------------------------------------------------------- brief tap
def test_an_impact_is_a_brief_tap_and_a_resting_contact_is_not(scene):
    run = scene("drop")
    taps = run.events("brief tap", object_b="green ball")
    assert taps and taps[0][0] == run.contact_starts("ground", "green ball")[0]
    assert 1 <= taps[0][1]["frames"] < 6
    assert not run.events("brief tap", object_b="gray ball")
    assert not scene("slide_box").events("brief tap")
    assert not scene("stack").events("brief tap")


def test_two_balls_colliding_in_flight_tap_once(scene):
    run = scene("flyby_hit")
    taps = run.events("brief tap", object_a="green ball", object_b="blue ball")
    assert [f for f, _ in taps] == run.contact_starts("green ball", "blue ball")[:1]


# ---------------------------------------------------------- near collision
def test_balls_thrown_past_each_other_nearly_collide(scene):
    run = scene("flyby")  # surfaces pass 3 px apart when the two are level in x
    tr = run.trace
    a, b = tr.body_index("green ball"), tr.body_index("blue ball")
    level = (tr.position[0, b, 0] - tr.position[0, a, 0]) / (tr.velocity[0, a, 0] - tr.velocity[0, b, 0]) / DT
    (frame, params), = run.events("near collision")
    assert abs(frame - level) <= 2
    assert params["object_a"] == "green ball" and params["object_b"] == "blue ball"
    assert abs(params["gap"] - 3.0) < 0.5
    assert not run.events("collision start", object_a="green ball")


def test_ball_falling_past_a_box_corner_nearly_collides(scene):
    run = scene("fall_past_box")  # 3 px beside a 10 px box: decided by the box's outline, not a bounding circle
    tr = run.trace
    ball, box = tr.body_index("green ball"), tr.body_index("gray box")
    level = fall_frames(tr.position[0, ball, 1] - (tr.position[0, box, 1] + 5))  # centre level with the box top
    (frame, params), = run.events("near collision", object_b="green ball")
    assert params["object_a"] == "gray box" and abs(params["gap"] - 3.0) < 0.5
    assert abs(frame - level) <= 3
    assert not tr.pair_touching(ball, box).any()


def test_a_collision_or_a_resting_neighbour_is_not_a_near_collision(scene):
    assert not scene("flyby_hit").events("near collision")  # they touch
    assert not scene("relay").events("near collision")  # hits, not near misses
    assert not scene("stack").events("near collision")  # side by side at rest
    assert not scene("drop").events("near collision")  # a bounce is contact with the ground


# ------------------------------------------------------- high energy impact
def test_high_energy_impact_needs_a_fast_approach(scene):
    run = scene("drop")  # 150 px of free fall: sqrt(2 g h) = 133 px/s at the ground
    (frame, params), = run.events("high energy impact")
    assert abs(frame - first_impact_frame(run, "green ball")) <= 2
    assert params["object_a"] == "ground" and params["object_b"] == "green ball"
    assert abs(params["speed"] - math.sqrt(2 * G * 150)) < 5
    assert not scene("low_drop").events("high energy impact")  # 20 px: 49 px/s
    assert not scene("slide_box").events("high energy impact")


def test_flyby_collision_is_high_energy(scene):
    run = scene("flyby_hit")  # closing at 300 px/s, the normal part well over 100 px/s
    assert run.frames("high energy impact", object_a="green ball", object_b="blue ball") == run.contact_starts(
        "green ball", "blue ball")[:1]


# -------------------------------------------------- moving hits stationary
def test_a_rolling_ball_hits_a_resting_one(scene):
    run = scene("relay")
    hits = run.events("moving hits stationary")
    for mover, resting in (("red ball", "gray ball"), ("gray ball", "green ball")):
        assert (run.contact_starts(mover, resting)[0], {"object_a": mover, "object_b": resting}) in hits


def test_moving_hits_stationary_negatives(scene):
    assert not scene("flyby_hit").events("moving hits stationary")  # both were moving
    assert not scene("drop").events("moving hits stationary")  # the ground cannot be set moving
    assert not scene("stack").events("moving hits stationary")  # the top box was dropped 1 px: not moving at 5 px/s


# --------------------------------------------------- velocity magnitude change
def bin_of(before: float, after: float) -> str:
    rel = abs(after - before) / max(before, after)
    return "small" if rel < 1 / 3 else "medium" if rel < 2 / 3 else "large"


def head_on_prediction(run) -> dict[str, str]:
    """Expected bins from a 1-D collision with restitution 0.2 and masses ~ radius^2 (equal density),
    both balls falling alike (same vertical speed before and after)."""
    tr = run.trace
    a, b = tr.body_index("red ball"), tr.body_index("gray ball")
    ma, mb = (tr.bodies[k].size["radius"] ** 2 for k in (a, b))
    u = tr.velocity[0, a, 0]
    frame = run.contact_starts("red ball", "gray ball")[0]
    vy = G * DT * frame  # both have fallen for `frame` steps
    va = (ma - RESTITUTION * mb) / (ma + mb) * u
    vb = (1 + RESTITUTION) * ma / (ma + mb) * u
    return {
        "red ball": bin_of(math.hypot(u, vy), math.hypot(va, vy)),
        "gray ball": bin_of(vy, math.hypot(vb, vy)),
    }


def test_velocity_change_bins_match_collision_physics(scene):
    for name in ("head_on_big", "head_on_equal"):
        run = scene(name)
        hit = run.contact_starts("red ball", "gray ball")[0]
        expected = head_on_prediction(run)
        for body, magnitude in expected.items():
            changes = [p for f, p in run.events("velocity magnitude change", object=body) if abs(f - hit) <= 2]
            assert [p["magnitude"] for p in changes] == [magnitude], (name, body, changes)
    # the three bins all occur across the two scenes
    assert set(head_on_prediction(scene("head_on_big")).values()) | set(
        head_on_prediction(scene("head_on_equal")).values()) == {"small", "medium", "large"}


def test_gravity_and_friction_alone_change_no_speed(scene):
    drop = scene("drop")
    first = drop.contact_starts("ground", "green ball")[0]
    assert [f for f in drop.frames("velocity magnitude change") if f < first] == []  # accelerating free fall
    assert not scene("slide_box").events("velocity magnitude change")  # decelerating by friction
    ramp = scene("ramp_roll")
    leaves = ramp.trace.contact_intervals("black ramp", "green ball")[-1][1]
    assert [f for f in ramp.frames("velocity magnitude change") if f <= leaves] == []  # rolling down the ramp


def test_impact_speed_change_is_large(scene):
    run = scene("drop")
    (frame, params), = [e for e in run.events("velocity magnitude change") if e[0] <= run.frames("bounce")[0] + 2]
    assert params["magnitude"] == "large"
    assert params["speed_before"] > 120 and params["speed_after"] < 40  # restitution 0.2


# ---------------------------------------------------------- collision relay
def test_collision_relay_through_a_resting_ball(scene):
    run = scene("relay")
    second = run.contact_starts("gray ball", "green ball")[0]
    assert (second, {"object_a": "red ball", "object_b": "green ball", "via": "gray ball"}) in run.events(
        "collision relay")
    assert not run.trace.pair_touching("red ball", "green ball")[:second + 1].any()


def test_no_relay_when_the_second_hit_comes_too_late(scene):
    run = scene("no_relay")
    first, second = run.contact_starts("red ball", "gray ball")[0], run.contact_starts("gray ball", "green ball")
    assert not second or second[0] - first > 1.0 / DT  # by construction: 150 px at ~50 px/s
    assert not run.events("collision relay")
    assert not scene("drop").events("collision relay")


# ------------------------------------------------ post collision induced motion
def test_hitting_the_bottom_box_sets_the_top_box_moving(scene):
    run = scene("stack_hit")
    hit = run.contact_starts("red ball", "gray box")[0]
    induced = run.events("post collision induced motion")
    assert [p["object"] for _, p in induced] == ["blue box"]
    frame, params = induced[0]
    assert hit <= frame <= hit + 30 and {params["object_a"], params["object_b"]} == {"red ball", "gray box"}
    assert not run.trace.pair_touching("red ball", "blue box")[hit - 1: frame + 1].any()  # never hit directly


def test_no_induced_motion_for_the_hit_body_or_unrelated_bodies(scene):
    run = scene("stack_hit")
    assert not run.events("post collision induced motion", object="gray box")  # it was hit itself
    assert not run.events("post collision induced motion", object="green box")  # not touching the pair
    assert not scene("relay").events("post collision induced motion")
    assert not scene("drop").events("post collision induced motion")
