"""Built-in motion patterns (free flight, rest, grid cells, relative order, levers, toppling) on
purpose-built scenes whose outcome is known by construction."""

from __future__ import annotations

import math

import numpy as np

from simpatterns.simulators.phyre.physics import DT, GRAVITY

G = -GRAVITY
CELL = 256 / 10  # PHYRE scenes are 256 px; the grid is 10 x 10


def fall_frames(height: float) -> float:
    """Steps for a body released at rest to fall ``height`` px. Chipmunk moves a body with the
    velocity it had before the step's gravity, so after k steps it has fallen g dt^2 k (k - 1) / 2."""
    return (1 + math.sqrt(1 + 8 * height / (G * DT * DT))) / 2


# ------------------------------------------------------------------ airborne
def test_dropped_ball_is_airborne_until_impact_and_between_bounces(scene):
    run = scene("drop")
    i = run.trace.body_index("green ball")
    impact = fall_frames(run.trace.position[0, i, 1] - 12.5)
    flights = run.events("airborne", object="green ball")
    assert flights[0][0] == 0 and abs(flights[0][1]["frames"] - impact) <= 2
    bounces = run.frames("bounce", object="green ball")
    # after the first bounce it flies again until the second
    assert bounces[0] < flights[1][0] <= bounces[0] + 6
    assert abs(flights[1][0] + flights[1][1]["frames"] - bounces[1]) <= 1


def test_resting_bodies_are_not_airborne(scene):
    assert not scene("drop").events("airborne", object="gray ball")
    assert not scene("stack").events("airborne", object="blue box")
    assert not scene("slide_box").events("airborne")
    ramp = scene("ramp_roll")  # set on the ramp touching it: airborne only once it rolls off the end
    leaves = ramp.trace.contact_intervals("black ramp", "green ball")[-1][1] + 1
    assert ramp.frames("airborne", object="green ball") == [leaves]


# --------------------------------------------------------------- global rest
def test_global_rest_only_once_everything_stopped(scene):
    run = scene("slide_box")  # friction stops the box after v / (mu g) s
    (frame, params), = run.events("global rest")
    stop = run.trace.velocity[0, run.trace.body_index("gray box"), 0] / (0.5 * G) / DT
    assert abs(frame - stop) <= 5 and frame + params["frames"] == run.trace.num_frames


def test_no_global_rest_while_something_moves(scene):
    assert not scene("slide_ball").events("global rest")  # a rolling ball never stops on flat ground
    assert not scene("flyby").events("global rest")
    assert not scene("lever").events("global rest")


# ------------------------------------------------------- grid cell transitions
def test_falling_ball_crosses_each_grid_row_when_kinematics_say(scene):
    run = scene("drop")
    i = run.trace.body_index("green ball")
    x0, y0 = run.trace.position[0, i]
    column = int(x0 // CELL)
    moves = run.events("grid cell transition", object="green ball")
    rows = [int(y0 // CELL) - k for k in range(len(moves) + 1)]
    assert [p["from_cell"] for _, p in moves] == [[column, r] for r in rows[:-1]]
    assert [p["to_cell"] for _, p in moves] == [[column, r] for r in rows[1:]]
    assert rows[-1] == 0  # it ends in the bottom row: the rebound (~5 px) crosses no boundary
    for (frame, _), row in zip(moves, rows[1:]):
        boundary = (row + 1) * CELL  # crossed going down, 0.5 px of hysteresis
        assert abs(frame - fall_frames(y0 - boundary + 0.5)) <= 1


def test_resting_and_fixed_bodies_make_no_transitions(scene):
    assert not scene("drop").events("grid cell transition", object="gray ball")
    assert not scene("stack").events("grid cell transition")
    assert not any(p["object"] == "black ramp" for _, p in scene("ramp_roll").events("grid cell transition"))


# ------------------------------------------------------------- grid cell path
def test_falling_ball_path_goes_south(scene):
    run = scene("drop")
    (frame, params), = run.events("grid cell path", object="green ball")
    moves = run.events("grid cell transition", object="green ball")
    assert frame == moves[-1][0]
    assert params["path"] == [moves[0][1]["from_cell"]] + [p["to_cell"] for _, p in moves]
    assert params["directions"] == ["south"]


def test_thrown_ball_path_starts_east_and_steps_between_neighbours(scene):
    run = scene("flyby")
    paths = run.events("grid cell path", object="green ball")  # thrown east at 150 px/s
    assert paths and paths[0][1]["directions"][0] == "east"
    path = np.array(paths[0][1]["path"])
    assert (np.abs(np.diff(path, axis=0)).max(axis=1) == 1).all()
    assert run.events("grid cell path", object="blue ball")[0][1]["directions"][0] == "west"


def test_single_transitions_make_no_path(scene):
    assert not scene("stack").events("grid cell path")
    assert not scene("corner").events("grid cell path")


# ------------------------------------------------------ side swap, vertical flip
def test_balls_passing_each_other_swap_sides_but_not_heights(scene):
    run = scene("flyby")
    tr = run.trace
    a, b = tr.body_index("green ball"), tr.body_index("blue ball")
    level = (tr.position[0, b, 0] - tr.position[0, a, 0]) / (tr.velocity[0, a, 0] - tr.velocity[0, b, 0]) / DT
    (frame, params), = run.events("side swap")
    assert abs(frame - level) <= 2
    assert params == {"object_a": "green ball", "object_b": "blue ball", "left": "blue ball"}
    assert not run.events("vertical order flip")


def test_falling_ball_passes_the_height_of_a_resting_one(scene):
    run = scene("drop_past")
    tr = run.trace
    a, b = tr.body_index("green ball"), tr.body_index("blue ball")
    level = fall_frames(tr.position[0, a, 1] - tr.position[0, b, 1])
    (frame, params), = run.events("vertical order flip")
    assert abs(frame - level) <= 2
    assert params["above"] == "blue ball" and {params["object_a"], params["object_b"]} == {"green ball", "blue ball"}
    assert not run.events("side swap")


def test_no_order_flips_between_bodies_that_keep_their_places(scene):
    assert not scene("stack").events("vertical order flip")
    assert not scene("stack").events("side swap")
    assert not scene("drop").events("side swap")


# --------------------------------------------------------- opposing motion (lever)
def test_lever_launches_the_ball_as_the_box_lands(scene):
    run = scene("lever")
    impact = run.contact_starts("gray bar", "blue box")[0]
    (frame, params), = run.events("opposing motion")
    assert abs(frame - impact) <= 3
    assert params == {"object_a": "blue box", "object_b": "green ball", "lever": "gray bar"}
    # truth by construction: the ball really goes up while the box goes down
    tr = run.trace
    assert tr.velocity[frame + 3, tr.body_index("green ball"), 1] > 20
    assert tr.velocity[frame + 3, tr.body_index("blue box"), 1] < -20


def test_no_lever_without_a_fulcrum_or_without_a_lever(scene):
    assert not scene("flat_lever").events("opposing motion")
    assert not scene("flyby").events("opposing motion")  # opposite motion, but nothing links them
    assert not scene("flyby_hit").events("opposing motion")
    assert not scene("relay").events("opposing motion")


# ---------------------------------------------------------------- tip over
def test_thin_upright_box_tips_over_when_hit(scene):
    run = scene("tall_box_hit")
    hit = run.contact_starts("gray box", "green ball")[0]
    (frame, params), = run.events("tip over")
    assert params == {"object": "gray box", "hit_by": "green ball"}
    assert hit <= frame <= hit + 90
    tr = run.trace
    i = tr.body_index("gray box")
    assert abs(tr.angle[-1, i]) > math.radians(60) and tr.position[-1, i, 1] < tr.position[0, i, 1] - 10


def test_no_tip_over_for_a_low_box_a_ball_or_an_unhit_body(scene):
    assert not scene("low_box_hit").events("tip over")
    assert not scene("drop").events("tip over")
    assert not scene("stack").events("tip over")
    assert not scene("relay").events("tip over")
