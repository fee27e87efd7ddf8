"""The ten Appendix G goal programs (examples/goals/a*.rwd) mean what the goals say, on every
template: on solution and near-miss rollouts of all 25 templates their verdicts agree with a
direct reading of each goal from the trace's raw arrays (tests/dsl/goal_readings.py, no DSL), and
on rollouts stopped at success every verdict the program calls determined is the verdict of the
same rollout run to its horizon. benchmarks/goal_agreement.py runs the same on every variant."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from goal_readings import read_goals
from goal_rollouts import cases, rollout
from simpatterns.dsl import RewardProgram
from simpatterns.simulators.phyre import TEMPLATES

GOALS = Path(__file__).resolve().parents[2] / "examples" / "goals"
VARIANTS = 2  # per template and kind: 100 rollouts, 1000 verdicts


@pytest.fixture(scope="module")
def programs() -> dict[str, RewardProgram]:
    return {p.name[:3]: RewardProgram.coerce(p) for p in sorted(GOALS.glob("a[0-9][0-9]_*.rwd"))}


@pytest.fixture(scope="module")
def verdicts(programs):
    """(case, goal) -> (program's verdict, direct reading) on rollouts run to the horizon."""
    out = {}
    for case in cases(VARIANTS):
        trace = rollout(*case)
        if trace is None:
            continue
        reading = read_goals(trace)
        for goal, program in programs.items():
            out[case, goal] = (program.evaluate(None, trace).success, reading[goal])
    return out


def test_the_goals_run_on_every_template(programs):
    assert len(programs) == 10
    for tid in sorted(TEMPLATES):
        trace = rollout(tid, 0, "solution")
        for goal, program in programs.items():
            assert program.check_bodies(trace.bodies) == [], (tid, goal)
            program.evaluate(None, trace)  # no unknown-body at evaluation either


def test_verdicts_agree_with_a_direct_reading_of_the_goals(verdicts):
    total = len(verdicts)
    assert total >= 0.95 * 10 * 2 * VARIANTS * len(TEMPLATES)  # a near-miss may be missing
    disagree = sorted(k for k, (mine, direct) in verdicts.items() if mine != direct)
    assert len(disagree) <= 0.01 * total, disagree
    # the comparison is not vacuous: every goal fails somewhere, and goals succeed on dozens of rollouts
    for goal in {g for _, g in verdicts}:
        outcomes = {direct for (_, g), (_, direct) in verdicts.items() if g == goal}
        assert False in outcomes
    assert sum(direct for _, direct in verdicts.values()) >= 20


def keeps_touching(stopped, full) -> bool:
    """Whether the full run bears out what a stop at success lets programs assume: the success
    pair keeps touching (contacts apart for at most 2 frames are one touch). PHYRE ends a solved
    episode there; run on, the green ball can still roll away (template 00000, variant 0)."""
    if stopped.num_frames == stopped.horizon:
        return True
    frames = np.flatnonzero(full.pair_touching(*stopped.episode.goal))
    after = frames[frames >= stopped.num_frames - 1]
    return after.size > 0 and after[0] == stopped.num_frames - 1 and after[-1] >= full.num_frames - 3 and \
        bool((np.diff(after) <= 3).all())


def test_determined_verdicts_of_stopped_rollouts_are_the_full_runs(programs):
    undetermined = checked = broken = 0
    for case in cases(1):
        stopped, full = rollout(*case, full=False), rollout(*case)
        if stopped is None:
            continue
        assert stopped.horizon == full.horizon == full.num_frames == 1001
        if not keeps_touching(stopped, full):
            broken += 1
            continue
        for goal, program in programs.items():
            res = program.evaluate(None, stopped)
            checked += 1
            if res.determined:
                assert res.success == program.evaluate(None, full).success, (case, goal)
            else:
                undetermined += 1
                assert stopped.num_frames < stopped.horizon
    assert checked >= 400 and undetermined < checked and broken <= 5
