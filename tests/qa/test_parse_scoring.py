"""Strict answer parsing per type, grading, baselines and bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest

from simpatterns.qa.parse import grade, parse_answer
from simpatterns.qa.questions import Question
from simpatterns.qa.scoring import bootstrap_ci, grade_run, random_chance, summarise

NAMES = ["ground", "left wall", "green ball", "blue ball", "red ball", "black bar"]


def q(answer_type, answer, qid="q", template=1, choices=None, max_count=None, family="counts", stable=True):
    return Question(id=qid, rollout="r.npz", rollout_id="r0", template=template, name="t", family=family,
                    answer_type=answer_type, slots={}, text="?", answer=answer, window=[0.0, 1.0],
                    choices=choices, max_count=max_count, stable=stable)


@pytest.mark.parametrize("reply,ok,value", [
    ("ANSWER: 3", True, 3),
    ("I think so.\nAnswer: 3.", True, 3),
    ("ANSWER: 3.0", False, None),
    ("ANSWER: three", False, None),
    ("ANSWER: -1", False, None),
    ("The answer is 3", False, None),
    ("ANSWER: 2\nwait\nANSWER: 4", True, 4),  # the last answer line counts
])
def test_integer(reply, ok, value):
    p = parse_answer(q("integer", 3, max_count=5), reply)
    assert p.ok is ok and p.value == value


@pytest.mark.parametrize("reply,ok,value", [
    ("ANSWER: 42", True, 42.0), ("ANSWER: 42.5%", True, 42.5), ("**ANSWER:** 7 %", True, 7.0),
    ("ANSWER: 101", False, None), ("ANSWER: about 40", False, None), ("ANSWER: 40-50", False, None),
])
def test_percent(reply, ok, value):
    p = parse_answer(q("percent", 40.0), reply)
    assert p.ok is ok and p.value == value


def test_objects_and_yes_no():
    obj = q("object", "green ball", choices=NAMES + ["none"])
    assert parse_answer(obj, "ANSWER: The Green Ball.").value == "green ball"
    assert parse_answer(obj, "ANSWER: none").value == "none"
    assert not parse_answer(q("object", "green ball", choices=NAMES), "ANSWER: none").ok  # not allowed there
    assert not parse_answer(obj, "ANSWER: green").ok
    assert not parse_answer(obj, "ANSWER: green ball, red ball").ok
    many = q("objects", ["green ball", "ground"], choices=NAMES)
    assert parse_answer(many, "ANSWER: ground, the green ball").value == ["green ball", "ground"]
    assert parse_answer(many, "ANSWER: ground and green ball").value == ["green ball", "ground"]
    assert not parse_answer(many, "ANSWER: ground, purple thing").ok
    yn = q("yesno", "yes")
    assert parse_answer(yn, "ANSWER: Yes.").value == "yes"
    assert not parse_answer(yn, "ANSWER: yes, because it rolls").ok
    assert not parse_answer(yn, "").ok and parse_answer(yn, "").error == "no ANSWER: line"
    # a reply that is nothing but the answer counts; nothing is picked out of prose
    assert parse_answer(yn, "No.").value == "no" and parse_answer(q("percent", 4.0), " 100 \n").value == 100.0
    assert not parse_answer(yn, "No.\nBecause it stops.").ok and not parse_answer(yn, "I say no").ok


def test_grading():
    g = grade(q("percent", 40.0), "ANSWER: 45")
    assert g.correct and g.abs_error == 5.0
    g = grade(q("percent", 40.0), "ANSWER: 45.5")
    assert not g.correct and g.abs_error == 5.5
    g = grade(q("objects", ["green ball", "ground"], choices=NAMES), "ANSWER: ground, red ball")
    assert not g.correct and g.jaccard == pytest.approx(1 / 3)
    g = grade(q("objects", ["green ball"], choices=NAMES), "nonsense")
    assert not g.correct and g.parsed.ok is False and g.jaccard == 0.0


def test_random_chance():
    assert random_chance(q("yesno", "no")) == 0.5
    assert random_chance(q("object", "x", choices=NAMES)) == pytest.approx(1 / 6)
    assert random_chance(q("objects", ["x"], choices=NAMES[:3])) == pytest.approx(1 / 7)
    assert random_chance(q("integer", 2, max_count=3)) == pytest.approx(1 / 4)
    assert random_chance(q("percent", 50.0)) == pytest.approx(0.10)
    assert random_chance(q("percent", 0.0)) == pytest.approx(0.05)  # only [0, 5] is within tolerance


def test_summary_groups_baselines_and_intervals():
    qs = [q("yesno", "yes" if i % 4 else "no", qid=f"q{i}", template=18, family="prediction", stable=i % 2 == 0)
          for i in range(40)]
    responses = [{"qid": x.id, "condition": "annotation", "response": "ANSWER: yes"} for x in qs]
    responses += [{"qid": x.id, "condition": "objects", "response": "ANSWER: maybe"} for x in qs]
    graded = grade_run(qs, responses)
    scores = summarise(graded)
    s = next(s for s in scores if s.condition == "annotation" and s.group == "all" and s.subset == "all")
    assert s.n == 40 and s.accuracy == pytest.approx(0.75) and s.majority == pytest.approx(0.75)
    assert s.random == 0.5 and s.ci[0] < 0.75 < s.ci[1] and s.unparsable == 0.0
    u = next(s for s in scores if s.condition == "objects" and s.group == "family:prediction" and s.subset == "all")
    assert u.accuracy == 0.0 and u.unparsable == 1.0
    st = next(s for s in scores if s.condition == "annotation" and s.group == "all" and s.subset == "stable")
    assert st.n == 20
    assert {s.group for s in scores} == {"all", "family:prediction", "template:18"}


def test_bootstrap_is_seeded_and_sensible():
    v = np.array([1.0] * 30 + [0.0] * 70)
    a, b = bootstrap_ci(v, seed=3)
    assert (a, b) == bootstrap_ci(v, seed=3)
    assert a < 0.3 < b and 0.15 < a and b < 0.45
    assert bootstrap_ci(np.ones(5)) == (1.0, 1.0)
