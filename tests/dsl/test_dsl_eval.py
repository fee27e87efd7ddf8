"""Semantics of every predicate: success, and the documented score rules,
on hand-made annotations (101 frames, so frame f is at t = f / 100) and
small traces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dsl_builders import annotation, collide, make_trace, separate
from simpatterns.annotation import PatternEvent
from simpatterns.detectors import PatternLibrary
from simpatterns.dsl import DSLError, DSLEvaluationError, RewardProgram, compile_program
from simpatterns.trace import Body, Trace

inv = lambda x: 1 / (1 + math.log(1 + x))  # noqa: E731  the documented inverse-log shaping


def run(text, ann, trace=None):
    return compile_program(text).evaluate(ann, trace)


def ok(text, ann, trace=None):
    r = run(text, ann, trace)
    assert (r.score == 1.0) == r.success
    return r.success


# ------------------------------------------------------------------ EVENT, params
def test_event_params_exact_case_wildcard_alternatives_and_symmetry():
    ann = annotation([collide(10, "ground", "green ball")])
    assert ok('EVENT("collision start", {"object_a": "green ball", "object_b": "ground"})', ann)  # swapped order
    assert ok('EVENT("Collision_Start", {"object_a": "Green_Ball"})', ann)  # case, underscores, one side
    assert ok('EVENT("collision start", {"object_a": "object X", "object_b": "green ball"})', ann)
    assert ok('EVENT("collision start", {"object_b": ["blue ball", "ground"]})', ann)
    assert not ok('EVENT("collision start", {"object_a": "green ball", "object_b": "blue ball"})', ann)
    assert not ok('EVENT("collision start", {"object_b": ["blue ball", "red ball"]})', ann)
    assert not ok('EVENT("bounce")', ann)


def test_wildcard_needs_the_key_present():
    ann = annotation([PatternEvent("bounce", 5, {"object": "red ball"})])
    assert ok('EVENT("bounce", {"object": "*"})', ann)
    assert not ok('EVENT("bounce", {"surface": "*"})', ann)


def test_directed_patterns_do_not_swap():
    lib = PatternLibrary.builtin()  # "support relationship" declares DIRECTED = True
    ann = annotation([PatternEvent("support relationship", 5, {"object_a": "red ball", "object_b": "ground"})])
    run_lib = lambda text: compile_program(text, library=lib).evaluate(ann).success  # noqa: E731
    assert run_lib('EVENT("support relationship", {"object_a": "red ball", "object_b": "ground"})')
    assert not run_lib('EVENT("support relationship", {"object_a": "ground", "object_b": "red ball"})')
    assert not run_lib('EVENT("support relationship", {"object_a": "ground"})')
    assert RewardProgram.from_text('EVENT("support relationship", {"object_a": "ground"})', lib)(ann) < 1.0
    # and can be declared symmetric (or other labels directed) when compiling
    prog = compile_program('EVENT("support relationship", {"object_a": "ground"})', directed=(), library=lib)
    assert prog.evaluate(ann).success
    # without a library nothing is known to be directed: the contract's default, either order
    assert ok('EVENT("support relationship", {"object_a": "ground"})', ann)


def test_list_valued_params_compare_as_sequences():
    ann = annotation([PatternEvent("grid cell path", 50, {"object": "green ball", "path": [[5, 10], [10, 10]]})])
    assert ok('EVENT("grid cell path", {"path": [(5, 10), (10, 10)]})', ann)
    assert not ok('EVENT("grid cell path", {"path": [(5, 10)]})', ann)
    assert not ok('EVENT("grid cell path", {"path": [(10, 10), (5, 10)]})', ann)


def test_numbers_match_numerically():
    ann = annotation([PatternEvent("airborne", 3, {"object": "red ball", "frames": 12})])
    assert ok('EVENT("airborne", {"frames": 12.0})', ann)
    assert not ok('EVENT("airborne", {"frames": 13})', ann)


def test_windows_are_fractions_with_both_ends_included():
    ann = annotation([collide(20, "red ball", "green ball"), collide(21, "red ball", "blue ball")])
    assert ok('EVENT("collision start", {"object_b": "green ball"}, window=(0, 0.2))', ann)  # frame 20 = 0.2
    assert not ok('EVENT("collision start", {"object_b": "blue ball"}, window=(0, 0.2))', ann)  # frame 21
    assert ok('EVENT("collision start", {"object_b": "blue ball"}, window=(0.21, 0.21))', ann)


def test_event_outside_its_window_scores_by_the_time_to_it():
    ann = annotation([collide(21, "red ball", "blue ball"), collide(90, "red ball", "blue ball")])
    scale = 0.05 * 100  # 5% of the 101-frame episode
    near = run('EVENT("collision start", {"object_b": "blue ball"}, window=(0, 0.2))', ann)  # 1 frame late
    assert not near.success and near.score == pytest.approx(0.5 * inv(1 / scale))
    far = run('EVENT("collision start", {"object_b": "blue ball"}, window=(0.5, 0.6))', ann)  # 29 frames early
    assert far.score == pytest.approx(0.5 * inv(29 / scale)) and far.score < near.score
    assert run('EVENT("collision start", {"object_b": "green ball"}, window=(0, 0.2))', ann).score == 0.0


# ------------------------------------------------------------------ NOT / NEVER
def test_not_event_and_never_score_by_inverse_log_of_violations():
    ann = annotation([collide(f, "red ball", "green ball") for f in (5, 50, 90)])
    r = run('NEVER("collision start", {"object_a": "red ball", "object_b": "green ball"})', ann)
    assert not r.success and r.score == pytest.approx(inv(3))
    r2 = run('NOT(EVENT("collision start", {"object_a": "red ball", "object_b": "green ball"}))', ann)
    assert r2.score == pytest.approx(inv(3))
    r3 = run('NEVER("collision start", {"object_a": "red ball"}, window=(0, 0.2))', ann)
    assert not r3.success and r3.score == pytest.approx(inv(1))
    assert ok('NEVER("collision start", {"object_a": "red ball"}, window=(0.1, 0.4))', ann)


def test_not_not_is_identity_and_not_flips_success():
    ann = annotation([collide(5, "a", "b")])
    for text in ('EVENT("collision start")', 'EVENT("bounce")', 'COUNT("collision start") == 2'):
        a, b = run(text, ann), run(f"NOT(NOT({text}))", ann)
        assert (a.success, a.score) == (b.success, b.score)
        assert run(f"NOT({text})", ann).success != a.success


# ------------------------------------------------------------------ COUNT
@pytest.mark.parametrize(
    "cmp, success, deviation",
    [("== 3", True, 0), ("== 1", False, 2), ("== 5", False, 2), ("!= 3", False, 1), ("!= 2", True, 0),
     ("< 3", False, 1), ("< 1", False, 3), ("<= 1", False, 2), ("> 3", False, 1), (">= 4", False, 1),
     (">= 3", True, 0), ("> 0", True, 0)],
)
def test_count_comparisons_score_by_deviation(cmp, success, deviation):
    ann = annotation([PatternEvent("bounce", f, {"object": "red ball"}) for f in (10, 20, 30)])
    r = run(f'COUNT("bounce", {{"object": "red ball"}}) {cmp}', ann)
    assert r.success is success
    assert r.score == (1.0 if success else pytest.approx(inv(deviation)))


def test_count_against_count_and_windows_and_not_flips_the_operator():
    ann = annotation([collide(10, "red ball", "green ball"), collide(60, "red ball", "green ball"),
                      collide(30, "red ball", "blue ball")])
    eq = 'COUNT("collision start", {"object_b": "green ball"}) == COUNT("collision start", {"object_b": "blue ball"})'
    r = run(eq, ann)
    assert not r.success and r.score == pytest.approx(inv(1))
    assert ok('COUNT("collision start", {"object_b": "green ball"}, window=(0, 0.5)) == '
              'COUNT("collision start", {"object_b": "blue ball"})', ann)
    assert ok('2 == COUNT("collision start", {"object_b": "green ball"})', ann)
    # NOT(c >= 3) is c < 3: holds with c = 2
    assert ok('NOT(COUNT("collision start", {"object_b": "green ball"}) >= 3)', ann)
    r = run('NOT(COUNT("collision start", {"object_b": "green ball"}) >= 1)', ann)  # c < 1 fails by 2
    assert not r.success and r.score == pytest.approx(inv(2))


# ------------------------------------------------------------------ AFTER / BEFORE
def test_after_and_before_with_order_partial_credit():
    launch = lambda f: PatternEvent("opposing motion", f, {"object_a": "green ball", "object_b": "gray bar"})  # noqa
    ann = annotation([collide(5, "green ball", "ground"), launch(20), collide(50, "green ball", "left wall")])
    after = ('AFTER("opposing motion", "collision start", first_params={"object_a": "green ball"}, '
             'second_params={"object_a": "green ball"})')
    before = after.replace("AFTER", "BEFORE")
    assert ok(after, ann)  # a collision (frame 50) follows the launch (frame 20)
    r = run(before, ann)  # but the first collision (frame 5) precedes it
    assert not r.success and r.score == pytest.approx(2 / 3)
    wrong_order = annotation([collide(5, "green ball", "ground"), launch(20)])
    r = run(after, wrong_order)
    assert not r.success and r.score == pytest.approx(2 / 3)
    only_first = annotation([launch(20)])
    assert run(after, only_first).score == pytest.approx(1 / 3)
    assert run(after, annotation([])).score == 0.0
    # same frame is not "after"
    assert not ok(after, annotation([launch(20), collide(20, "green ball", "ground")]))
    # the window applies to both
    assert not ok(after[:-1] + ", window=(0, 0.4))", ann)


def test_before_agrees_with_after_on_single_occurrences():
    for fa, fb in ((10, 40), (40, 10)):
        ann = annotation([collide(fa, "a", "b"), PatternEvent("bounce", fb, {"object": "a"})])
        a = run('AFTER("collision start", "bounce")', ann).success
        b = run('BEFORE("collision start", "bounce")', ann).success
        assert a == b == (fa < fb)


# ------------------------------------------------------------------ FIRST / LAST
def test_first_and_last_with_among():
    ann = annotation([collide(10, "red ball", "ground"), collide(30, "red ball", "green ball"),
                      collide(70, "red ball", "blue ball")])
    first_green = 'FIRST("collision start", {"object_a": "red ball", "object_b": "green ball"}, among={"object_a": "red ball"})'
    r = run(first_green, ann)
    assert not r.success and r.score == 0.5  # the red ball hit the ground first
    assert ok(first_green.replace("green ball", "ground"), ann)
    assert ok(first_green.replace("FIRST", "LAST").replace("green ball", "blue ball"), ann)
    # without among: the first occurrence of the matching event lies in the window
    assert ok('FIRST("collision start", {"object_b": "green ball"}, window=(0.25, 0.35))', ann)
    assert not ok('FIRST("collision start", {"object_b": "green ball"}, window=(0.5, 1))', ann)
    assert run('FIRST("bounce")', ann).score == 0.0


# ------------------------------------------------------------------ ALWAYS
def test_always_reads_the_declared_intervals():
    # airborne (DURATION = "interval" in the built-in library) from frame 10 for 20 frames: frames 10..29
    lib = PatternLibrary.builtin()
    ann = annotation([PatternEvent("airborne", 10, {"object": "red ball", "frames": 20})])
    run_lib = lambda text: compile_program(text, library=lib).evaluate(ann)  # noqa: E731
    assert run_lib('ALWAYS("airborne", {"object": "red ball"}, window=(0.1, 0.29))').success
    r = run_lib('ALWAYS("airborne", {"object": "red ball"}, window=(0.2, 0.39))')  # frames 20..39: 10 of 20
    assert not r.success and r.score == pytest.approx(0.5)
    # without declarations the event is an instant, whatever its params say (no guessing from "frames")
    assert not ok('ALWAYS("airborne", {"object": "red ball"}, window=(0.1, 0.29))', ann)


# ------------------------------------------------------------------ TOUCHING
def test_touching_from_collision_events_without_trace():
    ann = annotation([collide(10, "green ball", "blue ball"), separate(30, "blue ball", "green ball"),
                      collide(80, "blue ball", "green ball")])
    assert ok('TOUCHING("green ball", "blue ball", t=0.2)', ann)
    assert not ok('TOUCHING("green ball", "blue ball", t=0.3)', ann)  # the end frame is apart
    assert ok('TOUCHING("green ball", "blue ball")', ann)  # still touching at the end
    r = run('TOUCHING("green ball", "blue ball", t=0.5)', ann)
    assert r.score == 0.5  # touched at another time
    assert run('TOUCHING("green ball", "red ball")', ann).score == 0.0
    assert ok('TOUCHING("green ball", "*", t=0.15)', ann)
    # as a state under ALWAYS / NEVER: frames 10..29 and 80..100
    r = run('ALWAYS(TOUCHING("green ball", "blue ball"), window=(0, 0.39))', ann)  # 20 of 40 frames
    assert r.score == pytest.approx(0.5)
    r = run('NEVER(TOUCHING("green ball", "blue ball"), window=(0.25, 0.34))', ann)  # frames 25..29 touch
    assert not r.success and r.score == pytest.approx(inv(5))


def test_touching_from_trace_contacts_and_partial_credit_by_distance():
    T = 101
    contacts = [(f, "green ball", "blue ball") for f in range(40, 101)]
    tr = make_trace({"green ball": (0.0, 0.0), "blue ball": (10.0, 0.0), "red ball": (40.0, 0.0)},
                    num_frames=T, contacts=contacts, radius=5.0)
    ann = annotation([])
    assert ok('TOUCHING("green ball", "blue ball", t=1.0)', ann, tr)
    assert not ok('TOUCHING("green ball", "blue ball", t=0.3)', ann, tr)
    # red and green: centres 40 apart, radius 5 each: outlines 30 px apart, on the 12.8 px scale
    r = run('TOUCHING("green ball", "red ball")', ann, tr)
    assert r.score == pytest.approx(0.5 * inv(30 / 12.8))
    r = run('TOUCHING("green ball", "blue ball", t=0.0)', ann, tr)  # outlines meet, no contact yet: 0.5
    assert r.score == pytest.approx(0.5)
    assert ok('ALWAYS(TOUCHING("blue ball", "green ball"), window=(0.4, 1))', ann, tr)


def test_touching_hold_counts_contact_frames_in_a_row_by_t():
    # green and blue touch at frames 40-100 but for frame 70 (no contact row: a flicker)
    contacts = [(f, "green ball", "blue ball") for f in range(40, 101) if f != 70]
    tr = make_trace({"green ball": (0.0, 0.0), "blue ball": (10.0, 0.0), "red ball": (40.0, 0.0)},
                    num_frames=101, contacts=contacts, radius=5.0)
    ann = annotation([])
    assert ok('TOUCHING("green ball", "blue ball", t=0.8)', ann, tr)  # a plain touch bridges the flicker
    assert ok('TOUCHING("green ball", "blue ball", hold=0.3)', ann, tr)  # frames 71-100: 30 in a row
    r = run('TOUCHING("green ball", "blue ball", hold=0.31)', ann, tr)  # 31 asked: the flicker breaks it
    assert not r.success and r.score == pytest.approx(0.5 + 0.5 * 30 / 31)
    assert ok('TOUCHING("green ball", "blue ball", t=0.5, hold=0.11)', ann, tr)  # frames 40-50 by t=0.5
    r = run('TOUCHING("green ball", "blue ball", t=0.5, hold=0.12)', ann, tr)
    assert not r.success and r.score == pytest.approx(0.5 + 0.5 * 11 / 12)
    # never touched: the least outline gap up to t (the red ball is 30 px from green, 20 from blue)
    r = run('TOUCHING("red ball", "green object", hold=0.1)', ann, tr)
    assert not r.success and r.score == pytest.approx(0.5 * inv(30 / 12.8))
    r = run('TOUCHING("red ball", "*", hold=0.1)', ann, tr)
    assert r.score == pytest.approx(0.5 * inv(20 / 12.8))
    # without a trace, from collision events: touched, but not for long enough
    ev = annotation([collide(40, "green ball", "blue ball"), separate(60, "green ball", "blue ball")],
                    patterns=["collision start", "collision end"])
    r = run('TOUCHING("green ball", "blue ball", hold=0.3)', ev)
    assert not r.success and r.score == pytest.approx(0.5 + 0.5 * 20 / 30)
    assert ok('TOUCHING("green ball", "blue ball", hold=0.2)', ev)


def test_touching_grades_by_outline_gap_of_rotated_polygons():
    """A ball above a bar turned 90 degrees (standing on end): the gap is to the bar's top end,
    not to its bounding circle, and follows the bar's angle frame by frame."""
    T = 3
    bar = {"kind": "poly", "vertices": [[-40.0, -2.0], [40.0, -2.0], [40.0, 2.0], [-40.0, 2.0]]}
    ball = {"kind": "circle", "center": [0.0, 0.0], "radius": 5.0}
    bodies = [Body("green ball", "green", "ball", True, parts=(ball,)),
              Body("blue bar", "blue", "bar", True, parts=(bar,))]
    pos = np.zeros((T, 2, 2))
    pos[:, 0] = (0.0, 60.0)  # the ball 60 px above the bar's centre
    angle = np.zeros((T, 2))
    angle[1:, 1] = math.pi / 2  # frames 1, 2: the bar stands up to y = 40
    tr = Trace(bodies=bodies, time=np.arange(T) / 60.0, position=pos, angle=angle, velocity=np.zeros((T, 2, 2)),
               angular_velocity=np.zeros((T, 2)), contact_frame=np.zeros(0, np.int32),
               contact_a=np.zeros(0, np.int16), contact_b=np.zeros(0, np.int16), contact_point=np.zeros((0, 2)),
               contact_normal=np.zeros((0, 2)), contact_impulse=np.zeros(0),
               meta={"dt": 1 / 60, "world_size": [256, 256]})
    ann = annotation([])
    flat = run('TOUCHING("green ball", "blue bar", t=0.0)', ann, tr)  # lying: 60 - 2 - 5 = 53 px
    assert flat.score == pytest.approx(0.5 * inv(53 / 12.8))
    up = run('TOUCHING("green ball", "blue bar", t=1.0)', ann, tr)  # standing: 60 - 40 - 5 = 15 px
    assert up.score == pytest.approx(0.5 * inv(15 / 12.8))
    held = run('TOUCHING("green ball", "blue bar", hold=0.5)', ann, tr)  # the least gap over the frames
    assert held.score == pytest.approx(up.score)


# ------------------------------------------------------------------ NEARBY_AT
def test_nearby_at_scores_by_inverse_log_of_distance_over_radius():
    path = np.stack([np.linspace(0, 100, 101), np.zeros(101)], axis=1)  # x = frame
    tr = make_trace({"green ball": path, "gray jar": (60.0, 0.0)}, world=256.0)
    ann = annotation([])
    # default radius: 5% of 256 = 12.8
    assert ok('NEARBY_AT("green ball", x=95, y=0)', ann, tr)  # at t=1: x=100, d=5
    r = run('NEARBY_AT("green ball", x=0, y=0)', ann, tr)  # d = 100
    assert not r.success and r.score == pytest.approx(1 / (1 + math.log(100 / 12.8)))
    r = run('NEARBY_AT("green ball", x=0, y=0, radius=25)', ann, tr)
    assert r.score == pytest.approx(1 / (1 + math.log(4)))
    assert ok('NEARBY_AT("green ball", 40, 0, 0.4, 1)', ann, tr)  # positional x, y, t, radius
    assert ok('NEARBY_AT("green ball", target="gray jar", t=0.6)', ann, tr)
    assert ok('NEARBY_AT("green ball", target="Gray_Jar", window=(0.5, 0.7), radius=0.5)', ann, tr)
    assert not ok('NEARBY_AT("green ball", target="gray jar", window=(0.8, 1), radius=0.5)', ann, tr)
    # nearer in space than the time credit: the distance in the window decides (20 px at frame 80)
    wide = run('NEARBY_AT("green ball", target="gray jar", window=(0.8, 1), radius=10)', ann, tr)
    assert wide.score == pytest.approx(1 / (1 + math.log(20 / 10)))
    # NOT: scores d / r while inside
    r = run('NOT(NEARBY_AT("green ball", x=95, y=0, radius=10))', ann, tr)
    assert not r.success and r.score == pytest.approx(0.5)
    # as a state: within radius 10 of x=50 for frames 40..60 (21 frames of 101)
    r = run('ALWAYS(NEARBY_AT("green ball", x=50, y=0, radius=10))', ann, tr)
    assert r.score == pytest.approx(21 / 101)


def test_nearby_at_in_a_window_credits_being_there_at_another_time():
    # the ball sits at x=100, is at the jar (x=60) at frame 60 only, then at x=200
    x = np.where(np.arange(101) < 60, 100.0, 200.0)
    x[60] = 60.0
    tr = make_trace({"green ball": np.stack([x, np.zeros(101)], axis=1), "gray jar": (60.0, 0.0)}, world=256.0)
    ann = annotation([])
    scale = 0.05 * 100  # 5% of the episode's 100 frames
    late = run('NEARBY_AT("green ball", target="gray jar", window=(0.7, 1), radius=0.5)', ann, tr)
    assert late.score == pytest.approx(0.5 * inv(10 / scale))  # 10 frames before the window
    later = run('NEARBY_AT("green ball", target="gray jar", window=(0.9, 1), radius=0.5)', ann, tr)
    assert later.score == pytest.approx(0.5 * inv(30 / scale)) and later.score < late.score
    assert ok('NEARBY_AT("green ball", target="gray jar", window=(0.6, 1), radius=0.5)', ann, tr)


def test_nearby_at_is_monotone_in_distance():
    scores = []
    for d in (13, 20, 40, 80, 160, 320):
        tr = make_trace({"green ball": (float(d), 0.0)})
        scores.append(run('NEARBY_AT("green ball", x=0, y=0)', annotation([]), tr).score)
    assert all(a > b for a, b in zip(scores, scores[1:])) and 0 < scores[-1] < scores[0] < 1


def test_nearby_at_needs_a_trace_and_a_known_body():
    prog = compile_program('NEARBY_AT("green ball", x=1, y=2)')
    assert prog.needs_trace
    with pytest.raises(DSLEvaluationError) as info:
        prog.evaluate(annotation([]))
    assert info.value.code == "needs-trace" and info.value.line == 1
    tr = make_trace({"blue ball": (0.0, 0.0)})
    with pytest.raises(DSLError) as info:
        compile_program('NEARBY_AT("gren ball", x=1, y=2)').evaluate(annotation([]), tr)
    assert info.value.code == "unknown-body"


# ------------------------------------------------------------------ AND / OR / nesting
def test_and_is_the_mean_or_the_max_and_nesting():
    ann = annotation([collide(10, "a", "b"), PatternEvent("bounce", 5, {"object": "a"})])
    r = run('AND(EVENT("collision start"), EVENT("bounce"), EVENT("airborne"), EVENT("tip over"))', ann)
    assert not r.success and r.score == pytest.approx(0.5)
    assert [c.success for c in r.clauses] == [True, True, False, False]
    r = run('OR(EVENT("airborne"), COUNT("bounce") == 3)', ann)
    assert r.score == pytest.approx(inv(2))
    assert ok('OR(EVENT("airborne"), EVENT("bounce"))', ann)
    r = run('AND(EVENT("bounce"), AND(EVENT("collision start"), EVENT("airborne")))', ann)
    assert r.score == pytest.approx((1 + 0.5) / 2)
    # De Morgan under NOT
    r = run('NOT(AND(EVENT("bounce"), EVENT("collision start")))', ann)
    assert not r.success and r.score == pytest.approx(inv(1))  # best single violation: one event
    assert ok('NOT(OR(EVENT("airborne"), EVENT("tip over")))', ann)


def test_clauses_explain_and_batch():
    text = """AND(
        EVENT("collision start", {"object_a": "red ball"}),  # hit
        COUNT("bounce") >= 2,
    )"""
    prog = RewardProgram.from_text(text)
    assert prog.clauses == ['EVENT("collision start", {"object_a": "red ball"})', 'COUNT("bounce") >= 2']
    ann = annotation([collide(10, "red ball", "ground"), PatternEvent("bounce", 11, {"object": "red ball"})])
    r = prog.evaluate(ann, explain=True)
    assert not r.success and r.score == pytest.approx((1 + inv(1)) / 2)
    assert "frames 10 (t=0.10)" in r.clauses[0].detail
    assert r.clauses[1].detail == "1 >= 2 is false"
    text_report = r.explain_text()
    assert "FAIL" in text_report and 'COUNT("bounce") >= 2' in text_report
    results = prog.evaluate_batch([ann, annotation([])])
    assert [x.score for x in results] == [pytest.approx(r.score), pytest.approx(inv(2) / 2)]
    succ, scores = prog.compiled.score_batch([ann, annotation([])])
    assert succ.tolist() == [False, False] and scores[0] == pytest.approx(r.score)
    assert prog(ann) == pytest.approx(r.score)


def test_unnormalised_annotation_labels_are_found():
    ann = annotation([PatternEvent("Collision_Start", 3, {"object_a": "x", "object_b": "y"})],
                     patterns=["Collision_Start"])
    assert ok('EVENT("collision start")', ann)


def test_touching_reads_contacts_in_any_row_order():
    contacts = [(f, "green ball", "blue ball") for f in range(40, 101)] + [(f, "red ball", "blue ball") for f in (3, 99)]
    tr = make_trace({"green ball": (0.0, 0.0), "blue ball": (10.0, 0.0), "red ball": (40.0, 0.0)}, contacts=contacts)
    order = np.random.default_rng(0).permutation(tr.num_contacts)
    for name in ("contact_frame", "contact_a", "contact_b"):
        setattr(tr, name, getattr(tr, name)[order])
    ann = annotation([])
    assert ok('TOUCHING("green ball", "blue ball", t=0.4)', ann, tr)
    assert not ok('TOUCHING("green ball", "blue ball", t=0.39)', ann, tr)
    assert ok('TOUCHING("red ball", "*", t=0.03)', ann, tr)
    assert run('ALWAYS(TOUCHING("blue ball", "*"), window=(0.4, 1))', ann, tr).success
