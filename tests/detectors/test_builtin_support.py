"""Built-in support, sliding and rolling patterns on purpose-built scenes whose outcome is known by
construction."""

from __future__ import annotations

import numpy as np

from simpatterns.simulators.phyre.physics import DT, FRICTION, GRAVITY

G = -GRAVITY


# ------------------------------------------------------------ support relationship
def test_support_relationships_of_a_stack(scene):
    run = scene("stack")
    supports = {(p["object_a"], p["object_b"]): (f, p["frames"]) for f, p in run.events("support relationship")}
    assert set(supports) == {("green box", "blue box"), ("blue box", "ground"), ("gray ball", "ground")}
    T = run.trace.num_frames
    landing = run.contact_starts("blue box", "green box")[0]  # the top box was set 1 px above
    assert supports["green box", "blue box"] == (landing, T - landing)
    assert supports["blue box", "ground"] == (0, T) and supports["gray ball", "ground"] == (0, T)


def test_walls_and_bodies_beside_do_not_support(scene):
    run = scene("corner")  # touching the left wall and the ground
    assert [(p["object_a"], p["object_b"]) for _, p in run.events("support relationship")] == [("green ball", "ground")]
    assert not scene("flyby").events("support relationship")
    assert not scene("push").events("support relationship", object_b="red ball")  # pushed from the side


def test_a_ramp_supports_the_ball_rolling_down_it(scene):
    run = scene("ramp_roll")
    (frame, params), = run.events("support relationship", object_a="green ball", object_b="black ramp")
    (s, e), = run.trace.contact_intervals("black ramp", "green ball")
    assert (frame, params["frames"]) == (s, e - s + 1)


# ------------------------------------------------------------------ stack formed
def test_a_box_placed_on_a_box_forms_a_stack(scene):
    run = scene("stack")
    landing = run.contact_starts("blue box", "green box")[0]
    (frame, params), = run.events("stack formed")
    assert params == {"object_a": "green box", "object_b": "blue box"}
    assert landing <= frame <= landing + 30  # the 1 px drop settles within half a second


def test_no_stack_on_the_ground_or_while_moving(scene):
    assert not scene("drop").events("stack formed")  # a ball on the ground is not a stack
    assert not scene("push").events("stack formed")
    assert not scene("lever").events("stack formed", object_a="blue box")  # bounced off, never rested


# ------------------------------------------------------------------ lose support
def test_ball_rolling_off_a_platform_loses_its_support(scene):
    run = scene("roll_off")
    tr = run.trace
    i = tr.body_index("green ball")
    edge = tr.bodies[tr.body_index("black platform")]
    right = tr.position[0, tr.body_index("black platform"), 0] + edge.size["length"] / 2
    passes_edge = int(np.argmax(tr.position[:, i, 0] > right))  # its centre passes over the edge
    (frame, params), = run.events("lose support")
    assert params == {"object": "green ball", "support": "black platform"}
    assert abs(frame - passes_edge) <= 3
    assert tr.velocity[frame + 10, i, 1] < -5  # and then falls


def test_bounces_and_steady_supports_are_not_lost(scene):
    assert not scene("drop").events("lose support")  # the bouncing ball never rested long before leaving
    assert not scene("stack").events("lose support")
    assert not scene("ramp_roll").events("lose support", support="ground")


# ----------------------------------------------------------------- sliding contact
def test_pushed_box_slides_until_friction_stops_it(scene):
    run = scene("slide_box")
    (frame, params), = run.events("sliding contact")
    v0 = run.trace.velocity[0, run.trace.body_index("gray box"), 0]
    assert params["object_a"] == "gray box" and params["object_b"] == "ground"
    assert frame <= 2 and abs(params["frames"] - v0 / (FRICTION * G) / DT) <= 5


def test_thrown_ball_slides_then_catches_and_rolls(scene):
    """A disc thrown without spin slides; friction slows it at mu g and spins it up at 2 mu g / r, so it
    rolls once v0 - mu g t = 2 mu g t, at t = v0 / (3 mu g)."""
    run = scene("slide_ball")
    v0 = run.trace.velocity[0, run.trace.body_index("green ball"), 0]
    catch = v0 / (3 * FRICTION * G) / DT
    (frame, params), = run.events("sliding contact")
    assert frame <= 2 and abs(frame + params["frames"] - catch) <= 3
    (roll, p), = run.events("sliding to rolling")
    assert p == {"object": "green ball", "surface": "ground"} and abs(roll - catch) <= 3


def test_a_ball_rolling_down_a_ramp_rolls_and_does_not_slide(scene):
    run = scene("ramp_roll")
    assert not run.events("sliding contact")
    assert not run.events("sliding to rolling")
    # truth by construction: it rolls (speed = spin x radius) the whole way down
    tr = run.trace
    i = tr.body_index("green ball")
    (s, e), = tr.contact_intervals("black ramp", "green ball")
    speed = np.hypot(*tr.velocity[s + 5:e, i].T)
    assert speed.max() > 30 and np.allclose(speed, np.abs(tr.angular_velocity[s + 5:e, i]) * 10.5, atol=1.0)


def test_no_sliding_or_rolling_catch_for_resting_or_boxes(scene):
    assert not scene("stack").events("sliding contact")
    assert not scene("corner").events("sliding contact")
    assert not scene("slide_box").events("sliding to rolling")  # a box stops, it never rolls
    assert not scene("ramp_roll").events("sliding to rolling")


# ------------------------------------------------------------------- rolling over
def test_ball_rolls_over_the_ramp_and_off_its_end(scene):
    run = scene("ramp_roll")
    (s, e), = run.trace.contact_intervals("black ramp", "green ball")
    (frame, params), = run.events("rolling over")
    assert frame == e + 1 and params["object_a"] == "green ball" and params["object_b"] == "black ramp"
    i = run.trace.body_index("green ball")
    travelled = np.linalg.norm(run.trace.position[e, i] - run.trace.position[s, i])
    assert abs(params["distance"] - travelled) < 2


def test_sliding_and_resting_are_not_rolling_over(scene):
    assert not scene("slide_box").events("rolling over")  # slid, never turned
    assert not scene("stack").events("rolling over")
    assert not scene("drop").events("rolling over")  # bounces: contact without travel


# ------------------------------------------------------- wedged between two bodies
def test_ball_dropped_into_a_narrow_gap_is_wedged(scene):
    run = scene("wedge")
    (frame, params), = run.events("wedged between two bodies")
    assert params == {"object": "green ball", "between": ["black box 1", "black box 2"]}
    first = min(run.contact_starts("black box 1", "green ball")[0], run.contact_starts("black box 2", "green ball")[0])
    assert first <= frame <= first + 10


def test_corners_loads_and_free_bodies_are_not_wedged(scene):
    assert not scene("corner").events("wedged between two bodies")  # floor and wall: 90 degrees apart
    assert not scene("stack").events("wedged between two bodies")  # the bottom box carries a load
    assert not scene("drop").events("wedged between two bodies")


# ------------------------------------------------------------------ bonded pair
def test_heavy_ball_pushing_a_box_moves_with_it(scene):
    run = scene("push")
    (frame, params), = run.events("bonded pair")
    assert params["object_a"] == "red ball" and params["object_b"] == "gray box"
    tr = run.trace
    a, b = tr.body_index("red ball"), tr.body_index("gray box")
    span = slice(frame, frame + params["frames"])
    assert tr.pair_touching(a, b)[span].mean() > 0.9
    assert np.linalg.norm(tr.velocity[span, a] - tr.velocity[span, b], axis=1).max() < 2.5
    assert tr.position[frame + params["frames"] - 1, b, 0] - tr.position[frame, b, 0] > 20


def test_bodies_resting_together_or_hitting_are_not_bonded(scene):
    assert not scene("stack").events("bonded pair")  # together, but not travelling
    assert not scene("relay").events("bonded pair")  # brief hits
    assert not scene("flyby_hit").events("bonded pair")
