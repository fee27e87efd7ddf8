"""Incremental annotation of rope episodes: after every step it equals a full annotation."""

import gymnasium as gym
import numpy as np
import pytest

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.annotate import annotate
from simpatterns.annotate.incremental import ByArguments, FrameRows, IncrementalAnnotator
from simpatterns.detectors.library import PatternLibrary
from simpatterns.envs import KNOT_ROPE, RewardProgramWrapper

CROSSINGS = ("crossing formed", "crossing removed", "loop tightened")
PROGRAM = 'AND(COUNT("crossing removed") >= 2, NEVER("crossing formed"), COUNT("bead dragged") >= 3)'


def episodes(env, steps=(12, 3), seed=0):
    """(step info, trace) after every step of episodes of random pushes (no early end)."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(steps):
        env.reset(seed=seed + k)
        for _ in range(n):
            info = env.step(rng.uniform(-1, 1, 6).astype(np.float32))[4]
            out.append((info, env.unwrapped.last_trace))
    return out


@pytest.fixture(scope="module")
def annotated_steps():
    env = gym.make(KNOT_ROPE, obs_mode="state", annotate=True, task="unknot", crossings=3).unwrapped
    return env, episodes(env)


def test_the_envs_annotation_equals_a_full_one_after_every_step(annotated_steps):
    env, steps = annotated_steps
    assert sorted(env.annotator.detectors) == sorted(CROSSINGS)  # the built-in crossing finder is memoised
    for k, (info, trace) in enumerate(steps):
        full = annotate(trace, env.library)
        assert info["annotation"].pattern_events == full.pattern_events, f"step {k + 1}"
        assert info["annotation"].num_frames == trace.num_frames
    assert any(info["annotation"].events_of(label) for info, _ in steps for label in CROSSINGS[:2])
    # the two episodes' frames were each found once (a new episode starts afresh)
    memo = next(m for m in env.annotator._memos.values() if isinstance(m, FrameRows))
    assert memo.frames_computed == steps[11][1].num_frames + steps[-1][1].num_frames


def test_the_wrappers_program_reads_the_same_annotation_as_from_scratch():
    env = RewardProgramWrapper(
        gym.make(KNOT_ROPE, obs_mode="state", task="unknot", crossings=3), PROGRAM, info_trace=True
    )
    paid = []
    for info, trace in episodes(env, steps=(8, 2), seed=3):
        fresh = env.program.evaluate(None, trace)
        assert info["annotation"].pattern_events == fresh.annotation.pattern_events
        assert info["program_score"] == fresh.score and info["is_success"] == fresh.success
        paid.append(info["program_score"])
    assert len(set(paid)) > 1  # the score moved: the comparison saw events change


def test_frame_rows_computes_only_new_frames_and_equals_the_whole_call():
    calls = []

    def rows(series, scale):  # rows keyed by frame: one row per positive entry
        calls.append(len(series))
        f, i = np.nonzero(series > 0)
        return f, i, series[f, i] * scale

    memo = FrameRows(rows)
    x = np.random.default_rng(0).normal(size=(30, 5))
    for n, scale in [(10, 1.0), (25, 1.0), (30, 1.0), (30, 2.0), (12, 2.0)]:
        got, want = memo(x[:n], scale), rows(x[:n], scale)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert calls[::2] == [10, 15, 5, 30, 12]  # the extensions computed their new frames only
    got[0][:] = -1  # what a caller is given is its own
    assert np.array_equal(memo(x[:12], 2.0)[0], rows(x[:12], 2.0)[0])
    changed = x[:12].copy()
    changed[3] += 1.0  # an earlier frame differs: computed whole
    assert np.array_equal(memo(changed, 2.0)[2], rows(changed, 2.0)[2])


def test_by_arguments_answers_a_repeated_call_with_a_fresh_copy():
    calls = []

    def pairs(first, second, limit):
        calls.append(limit)
        return [int(k) for k in np.flatnonzero(np.abs(first - second) <= limit)]

    memo = ByArguments(pairs)
    a, b = np.arange(6), np.array([0, 3, 2, 9, 4, 5])
    got = memo(a, b, 1)
    assert got == pairs(a, b, 1) and memo.calls_computed == 1
    got.append(99)  # what a caller is given is its own
    assert memo(a.copy(), b.copy(), 1) == pairs(a, b, 1) and memo.calls_computed == 1  # keyed by value
    assert memo(a, b, 2) == pairs(a, b, 2) and memo(a, b + 1, 1) == pairs(a, b + 1, 1)
    assert memo.calls_computed == 3 and memo(a, b, [1]) is not None  # an unhashable argument: just called


def test_only_an_exact_copy_of_a_helper_is_memoised():
    source = PatternLibrary.builtin("3d").get("crossing formed").source
    copied = source.replace('PATTERN = "crossing formed"', 'PATTERN = "copy"')
    edited = source.replace('PATTERN = "crossing formed"', 'PATTERN = "edited"').replace("zi > zj", "zi >= zj")
    inc = IncrementalAnnotator(PatternLibrary.from_detectors([copied, edited]))
    helpers = {label: det.detect.__globals__ for label, det in inc.detectors.items()}
    assert isinstance(helpers["copy"]["frame_crossings"], FrameRows)
    assert not isinstance(helpers["edited"]["frame_crossings"], FrameRows)  # its own, run whole
    assert isinstance(helpers["edited"]["unmatched"], ByArguments)  # still an exact copy


def test_the_rope_worlds_trace_after_every_step_equals_one_assembled_afresh():
    """The rope world's recorder keeps what it assembled of earlier frames; a recorder that
    does not, on a second world given the same pushes, makes the same traces."""
    from simpatterns.simulators.mujoco import RopeWorld, load_configurations
    from simpatterns.simulators.mujoco.tracer import TraceRecorder
    from simpatterns.trace import _ALL_ARRAY_FIELDS

    start = load_configurations("train").positions[3]
    worlds = [RopeWorld(), RopeWorld()]
    for w in worlds:
        w.set_positions(start)
        w.start_recording(8)
    kept, afresh = worlds
    afresh.recorder = TraceRecorder(afresh.model, stride=8, meta=kept.recorder.meta)
    rng = np.random.default_rng(5)
    contacts = 0
    given = []  # each step's trace, and a copy of its arrays then
    for step in range(10):
        action = rng.uniform(-1, 1, 6)
        a, b = [(w.act(action), w.trace({"step": step}))[1] for w in worlds]
        for name in _ALL_ARRAY_FIELDS:
            assert np.array_equal(getattr(a, name), getattr(b, name)), (step, name)
            assert getattr(a, name).dtype == getattr(b, name).dtype
            assert not getattr(a, name).flags.writeable, name
        assert a.events == b.events and a.meta == b.meta, step
        contacts = len(a.events)
        given.append((a, {name: getattr(a, name).copy() for name in _ALL_ARRAY_FIELDS}))
    assert kept.recorder.incremental and kept.recorder._assembled.frames == a.num_frames - 1
    assert contacts  # collision events were compared
    # a later step changed no earlier trace (each ended with its final state, which the next step
    # records again with its own push), and the traces share their earlier frames' memory
    for trace, arrays in given:
        assert all(np.array_equal(getattr(trace, k), v) for k, v in arrays.items())
    shared = [np.shares_memory(t.position, u.position) for (t, _), (u, _) in zip(given, given[1:])]
    assert sum(shared) >= len(shared) // 2


def test_growing_arrays_hand_out_views_that_later_writes_leave_alone():
    from simpatterns.simulators.mujoco.growing import GrowingArrays

    grown = GrowingArrays()
    grown.put("x", 0, np.arange(6.0).reshape(3, 2))
    first = grown.view("x", 3)
    with pytest.raises(ValueError):
        first[0, 0] = 9.0  # read-only
    grown.put("x", 2, np.array([[4.0, 5.0], [6.0, 7.0]]))  # row 2 rewritten with its own values
    second = grown.view("x", 4)
    assert np.shares_memory(first, second)
    grown.put("x", 3, np.array([[0.0, -0.0]]))  # row 3 was handed out: a new buffer for what differs
    third = grown.view("x", 4)
    assert np.array_equal(second[3], [6.0, 7.0]) and np.array_equal(third, [[0, 1], [2, 3], [4, 5], [0, 0]])
    assert not np.shares_memory(second, third)
    grown.put("x", 4, np.ones((40, 2)))  # past the buffer's end: it grows, the rows before kept
    assert np.array_equal(grown.view("x", 44)[:4], third) and np.array_equal(third[3], [0.0, 0.0])
    grown.put("i", 0, np.zeros(2, np.int16))
    grown.put("i", 2, np.array([70000], np.int32))  # a wider dtype widens the rows before (as concatenate)
    assert grown.view("i", 3).dtype == np.int32 and grown.view("i", 3).tolist() == [0, 0, 70000]


def test_the_timeline_text_equals_the_reference_one(annotated_steps):
    """`timeline_text`, rewritten for speed, writes the text of the version it replaced (frozen in
    tests/data/reference_text/text.py) for every step's annotation, at budgets that summarise and cut,
    also from the lines kept over the steps (`TimelineLines`, as the environment's text is made)."""
    import importlib.util
    import sys
    from pathlib import Path

    from simpatterns.annotate.text import TimelineLines, timeline_text

    path = Path(__file__).parent.parent / "data" / "reference_text" / "text.py"
    spec = importlib.util.spec_from_file_location("reference_text", path)
    reference = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = reference  # its dataclasses look their module up
    spec.loader.exec_module(reference)
    env, steps = annotated_steps
    texts = []
    kept = TimelineLines()  # kept over both episodes: the second is recognised as not extending the first
    for info, trace in steps:
        ann = info["annotation"]
        budget = int(env.render_options.text_budget)
        assert info["annotation_text"].endswith("\n\n" + reference.timeline_text(trace, ann, budget))
        for budget, until in ((4000, None), (100_000, None), (600, None), (300, None), (4000, 1.0)):
            texts.append(reference.timeline_text(trace, ann, budget, until_s=until))
            assert timeline_text(trace, ann, budget, until_s=until) == texts[-1], (trace.num_frames, budget)
            assert timeline_text(trace, ann, budget, until_s=until, timeline=kept) == texts[-1]
    assert any("summarised" in t for t in texts) and any("cut to fit" in t for t in texts)  # budget paths seen
