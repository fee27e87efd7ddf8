"""Every Appendix C template on purpose-built scenes whose answers follow from the construction.

Expected values come from the scene constants (tests/qa/qa_scenes.py) and PHYRE's
physics (g = 58.8 px/s^2, restitution 0.2, 60 Hz), not from the code under test.
"""

from __future__ import annotations

import math

import pytest
import qa_scenes as S

from simpatterns.detectors.library import PatternLibrary
from simpatterns.qa.generate import rollout_facts
from simpatterns.qa.templates import TEMPLATES, QuestionRules, get_template


@pytest.fixture(scope="module")
def rf():
    lib = PatternLibrary.builtin()
    traces = {"drop": S.drop_trace(), "roll": S.roll_trace(), "stack": S.stack_trace(), "ramp": S.ramp_trace(),
              "sym": S.sym_trace()}
    return {k: rollout_facts(t, lib, QuestionRules()) for k, t in traces.items()}


def ask(rf, scene, template, cut=None, **slots):
    return get_template(template).answer(rf[scene], slots, cut)


def asked_slots(rf, scene, template):
    return [i.slots for i in get_template(template).instances(rf[scene])]


T_DROP = 1001  # no goal contact: the full 1000 steps
FALL = S.fall_frames(S.DROP["drop"])  # red's fall onto the block
AIR = [S.bounce_air_frames(S.DROP["drop"], k) for k in (1, 2, 3)]


def test_all_27_templates_with_families_and_types():
    assert [t.id for t in TEMPLATES] == list(range(1, 28))
    fam = {f: [t.id for t in TEMPLATES if t.family == f] for f in ("counts", "identification", "prediction")}
    assert fam["identification"] == [2, 3, 4, 5, 6, 7]
    assert fam["prediction"] == list(range(18, 28))
    assert fam["counts"] == [1] + list(range(8, 18))
    assert all(t.answer_type == "percent" for t in TEMPLATES if 8 <= t.id <= 17)
    assert all(t.answer_type == "yesno" for t in TEMPLATES if t.id >= 18)
    assert get_template("A18") is get_template(18) is get_template("will_pair_collide")
    with pytest.raises(KeyError, match="1..27"):
        get_template(28)


def test_a1_touch_count(rf):
    assert FALL > 60  # red is still falling at 1 s
    assert ask(rf, "drop", 1, a="red ball", t0=0.0, t1=1.0) == 0
    assert ask(rf, "drop", 1, a="red ball", t0=3.0, t1=5.0) == 1  # resting on the block
    assert ask(rf, "drop", 1, a="green ball", t0=0.0, t1=5.0) == 1  # the ground
    hit = (S.ROLL["blue"][0] - S.ROLL["green"][0] - 2 * S.R_BALL) / S.ROLL["green_v"]  # 1.48 s
    assert 1.0 < hit < 2.0
    assert ask(rf, "roll", 1, a="green ball", t0=0.0, t1=1.0) == 1
    assert ask(rf, "roll", 1, a="green ball", t0=1.0, t1=2.0) == 2  # ground and blue


def test_a2_pattern_objects(rf):
    # contacts: green and blue rest on the ground from frame 0, red lands on the block
    assert ask(rf, "drop", 2, pattern="collision start") == sorted(
        ["green ball", "blue ball", "ground", "red ball", "black block"])
    assert ask(rf, "stack", 2, pattern="stack formed") == ["blue box", "green ball"]
    asked = [s["pattern"] for s in asked_slots(rf, "drop", 2)]
    assert "collision start" in asked and "tip over" not in asked  # only patterns that fired


def test_a3_closest_at_start(rf):
    rx, ry = S.DROP["red"]
    d = {name: math.hypot(rx - x, ry - y) for name, (x, y) in
         (("green ball", S.DROP["green"]), ("blue ball", S.DROP["blue"]), ("black block", S.DROP["block"]))}
    assert min(d, key=d.get) == "black block"
    assert ask(rf, "drop", 3, a="red ball") == "black block"
    # sym: green and blue are equally far from red: a tie, not asked
    assert abs(math.hypot(S.SYM["red"][0] - S.SYM["green"][0], S.SYM["red"][1] - S.SYM["green"][1])
               - math.hypot(S.SYM["red"][0] - S.SYM["blue"][0], S.SYM["red"][1] - S.SYM["blue"][1])) < 1e-9
    assert {"a": "red ball"} not in asked_slots(rf, "sym", 3)


def test_a4_blocking_object(rf):
    # green and blue lie on the ground at the same height, the 20 px block stands between them
    assert ask(rf, "drop", 4, a="green ball", b="blue ball") == "black block"
    # red (160, 88) to green (90, 10.5): over the block's x range [150, 170] the line is above its top (20)
    (rx, ry), (gx, gy) = S.DROP["red"], S.DROP["green"]
    assert ry + (gy - ry) * (150 - rx) / (gx - rx) > 20
    assert ask(rf, "drop", 4, a="red ball", b="green ball") == "none"
    assert ask(rf, "ramp", 4, a="red ball", b="green ball") == "black ramp"  # red on the ramp, green under it


def test_a5_greatest_distance(rf):
    assert ask(rf, "drop", 5) == "red ball"  # the only body that moves
    assert ask(rf, "roll", 5) == "green ball"  # rolls 89 px to blue, then pushes it


def test_a6_highest_speed(rf):
    assert ask(rf, "drop", 6) == "red ball"
    v_red = math.sqrt(2 * S.G * (S.ROLL["red"][1] - S.R_RED))  # 78 px/s at landing
    assert v_red > S.ROLL["green_v"]
    assert ask(rf, "roll", 6) == "red ball"


def test_a7_first_collision(rf):
    assert ask(rf, "drop", 7, a="red ball") == "black block"
    assert ask(rf, "roll", 7, a="green ball") == "blue ball"  # rolling on the ground since frame 0 is no collision
    assert ask(rf, "stack", 7, a="green ball") == "none"  # rests on the box from the start
    assert ask(rf, "sym", 7, a="red ball") == "none"  # 20 frames of falling from 92 px


def test_a8_a9_a10_a17_contact_percentages(rf):
    expect = 100 * (T_DROP - FALL - sum(AIR)) / T_DROP  # red rests on the block after its bounces
    for t in (8, 9, 17):
        assert ask(rf, "drop", t, a="red ball") == pytest.approx(expect, abs=3)
    assert ask(rf, "drop", 10, a="red ball") == 0.0
    assert ask(rf, "stack", 8, a="red ball") == 100.0  # rests on the ground
    assert ask(rf, "stack", 10, a="red ball") == 100.0
    assert ask(rf, "stack", 9, a="red ball") == 0.0
    assert ask(rf, "ramp", 17, a="green ball") == 0.0


def test_a11_moving_pair(rf):
    assert ask(rf, "drop", 11) == 0.0
    assert ask(rf, "stack", 11) == 100.0  # green rests on the blue box


def test_a12_free_fall(rf):
    assert AIR[1] < 10 < AIR[0]  # only the first rebound lasts the 1/6 s free fall needs
    assert ask(rf, "drop", 12, a="red ball") == pytest.approx(100 * (FALL + AIR[0]) / T_DROP, abs=2.5)
    assert ask(rf, "stack", 12, a="red ball") == 0.0
    assert ask(rf, "sym", 12, a="red ball") == 100.0


def test_a13_a14_motion(rf):
    moving = 100 * (FALL + AIR[0] + AIR[1]) / T_DROP  # red moves until its rebounds die out
    assert ask(rf, "drop", 13) == pytest.approx(moving, abs=2.5)
    assert ask(rf, "drop", 14) == pytest.approx(100 - moving, abs=2.5)
    assert ask(rf, "stack", 13) == 0.0
    assert ask(rf, "stack", 14) == 100.0


def test_a15_pair_touch(rf):
    assert ask(rf, "stack", 15, a="green ball", b="blue box") == 100.0
    assert ask(rf, "drop", 15, a="red ball", b="green ball") == 0.0


def test_a16_wall(rf):
    # red rolls 162 px (horizontally) down the 20 degree ramp into the left wall, without slipping
    a = S.G * math.sin(math.radians(S.RAMP["angle"])) * 5 / 7
    arrive = math.sqrt(2 * (S.RAMP["red_x"] - S.R_RED) / math.cos(math.radians(S.RAMP["angle"])) / a) * S.FPS
    gold = ask(rf, "ramp", 16, a="red ball")
    assert 100 * (T_DROP - arrive - 120) / T_DROP < gold < 100 * (T_DROP - arrive) / T_DROP + 1
    assert ask(rf, "drop", 16, a="red ball") == 0.0


@pytest.mark.parametrize("scene,template,slots,cut,expect", [
    ("roll", 18, {"a": "green ball", "b": "blue ball"}, 30, "yes"),  # they meet at 1.48 s
    ("drop", 18, {"a": "red ball", "b": "green ball"}, 30, "no"),
    ("roll", 19, {"a": "blue ball", "b": "green ball"}, 30, "yes"),
    ("drop", 19, {"a": "red ball", "b": "green ball"}, 30, "no"),
    ("roll", 20, {"a": "red ball", "b": "blue ball"}, 60, "yes"),  # blue is knocked toward red, rolls on
    ("drop", 20, {"a": "red ball", "b": "blue ball"}, 30, "no"),
    ("roll", 21, {}, 30, "yes"),
    ("drop", 21, {}, 30, "no"),
    ("drop", 22, {"pattern": "bounce"}, 30, "yes"),  # red lands at 1.43 s and rebounds
    ("stack", 22, {"pattern": "bounce"}, 30, "no"),  # nothing moves
    ("roll", 23, {"a": "red ball"}, 60, "yes"),  # red lands at 1.33 s
    ("drop", 23, {"a": "red ball"}, 30, "no"),  # lands on the block
    ("ramp", 24, {"a": "red ball"}, 60, "yes"),  # reaches the left wall after about 5 s
    ("drop", 24, {"a": "red ball"}, 30, "no"),
    ("ramp", 25, {"a": "red ball", "b": "green ball"}, 60, "yes"),  # rolls left past x = 100
    ("drop", 25, {"a": "red ball", "b": "green ball"}, 30, "no"),  # falls straight down at x = 160
    ("roll", 26, {"a": "red ball", "b": "blue ball"}, 30, "yes"),  # its centre ends at 8 < 10.5 px
    ("drop", 26, {"a": "red ball", "b": "blue ball"}, 30, "no"),  # ends at 28 px, above 10.5
    ("drop", 27, {}, 30, "yes"),  # red settles on the block
    ("ramp", 27, {}, 60, "yes"),  # red settles in the corner
])
def test_prediction_answers(rf, scene, template, slots, cut, expect):
    assert ask(rf, scene, template, cut, **slots) == expect


def test_prediction_cuts_leave_the_answer_open(rf):
    # once red touched the ground (1.33 s), "for the first time" is decided: no cut after it
    land = S.fall_frames(S.ROLL["red"][1] - S.R_RED)
    cuts = [i.cut_frame for i in get_template(23).instances(rf["roll"]) if i.slots["a"] == "red ball"]
    assert cuts and all(c < land for c in cuts)
    # everything rests from the start in the stack scene: "will anything come to rest" is never asked
    assert get_template(27).instances(rf["stack"]) == []
    # a pair touching at the cut is not asked whether it will touch
    tr = rf["stack"].facts.trace
    assert not [i for i in get_template(18).instances(rf["stack"])
                if tr.pair_touching(i.slots["a"], i.slots["b"])[i.cut_frame]]
    # every cut lies in the cut range and leaves at least min_future_s
    r = QuestionRules()
    for t in TEMPLATES[17:]:
        for i in t.instances(rf["drop"]):
            sec = i.cut_frame / 60
            assert r.cut_range[0] * (T_DROP - 1) / 60 - 1e-6 <= sec <= (T_DROP - 1) / 60 - r.min_future_s + 1e-6


def test_yes_and_no_cuts_are_offered(rf):
    answers = {i.answer for t in TEMPLATES[17:] for name in ("roll", "ramp") for i in t.instances(rf[name])}
    assert answers == {"yes", "no"}


def test_rendered_text_names_bodies_and_times():
    t = get_template(18)
    text = t.render({"a": "red ball", "b": "green ball", "tc": 3.25})
    assert "the red ball and the green ball" in text and "3.25 s" in text and text.endswith("Answer yes/no.")
    assert "between 1.0 s and 3.5 s" in get_template(1).render({"a": "red ball", "t0": 1.0, "t1": 3.5})
