"""No leakage: a prediction question shows only the trace up to its cut, and its annotation is
recomputed on the truncated trace, so a detector that looks ahead cannot reveal the answer."""

from __future__ import annotations

import numpy as np

from simpatterns.annotate import annotate
from simpatterns.detectors.library import PatternLibrary
from simpatterns.qa.context import ContextBuilder, frame_indices, state_text
from simpatterns.qa.views import OUTCOME_KEYS, truncate
from simpatterns.trace import Trace

# a detector that reads the LAST frame of whatever trace it is given: on a whole rollout it would tell
# at frame 0 whether the goal pair ends up touching
LOOKAHEAD = '''
PATTERN = "ends touching"
DESCRIPTION = "At frame 0: whether the first goal body touches the second one in the last frame."
DEPENDS = []
PARAMS = ["touching"]

def detect(trace, events):
    g = [i for i, b in enumerate(trace.bodies) if b.role in ("goal_object", "goal_subject")]
    if len(g) < 2:
        return []
    return [(0, {"touching": bool(trace.touching_matrix()[-1, g[0], g[1]])})]
'''


def _prediction_questions(questions):
    qs = [q for q in questions if q.cut_frame is not None]
    assert len(qs) >= 10
    return qs


def test_truncated_trace_holds_nothing_after_the_cut(dataset):
    root, questions = dataset
    for q in _prediction_questions(questions):
        full = Trace.load(root / q.rollout)
        tr = truncate(full, q.cut_frame)
        assert tr.num_frames == q.cut_frame + 1
        assert tr.time[-1] == full.time[q.cut_frame]
        assert (tr.contact_frame <= q.cut_frame).all() and all(e.frame <= q.cut_frame for e in tr.events)
        assert not any(e.kind == "TaskComplete" for e in tr.events)
        assert not set(OUTCOME_KEYS) & set(tr.meta)
        np.testing.assert_array_equal(tr.position, full.position[: q.cut_frame + 1])


def test_shown_annotation_is_the_truncated_traces_and_ends_at_the_cut(dataset, builtin):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    qs = _prediction_questions(questions)
    builder.prepare(qs, ["annotation"])
    for q in qs:
        shown = builder.annotation(q)
        assert all(e.frame <= q.cut_frame for e in shown.events)
        expected = annotate(truncate(Trace.load(root / q.rollout), q.cut_frame), builtin)
        assert shown.equals(expected)
        text = builder.annotation_text(q)
        times = [float(line.split()[0].split("–")[-1]) for line in text.splitlines()[1:]
                 if line[:1].isdigit()]
        assert all(t <= q.window[1] + 1e-9 for t in times), q.id


def test_a_look_ahead_detector_cannot_leak(dataset, builtin):
    root, questions = dataset
    lib = PatternLibrary.from_detectors([LOOKAHEAD])
    builder = ContextBuilder(root, lib)
    leaked = 0
    for q in _prediction_questions(questions):
        full = Trace.load(root / q.rollout)
        on_full = annotate(full, lib).by_pattern("ends touching")[0].params["touching"]
        shown = builder.annotation(q).by_pattern("ends touching")[0].params["touching"]
        at_cut = bool(full.touching_matrix()[q.cut_frame][tuple(
            i for i, b in enumerate(full.bodies) if b.role in ("goal_object", "goal_subject"))])
        assert shown == at_cut  # what the detector saw is the last visible frame, not the end
        leaked += on_full != shown
    assert leaked > 0  # the data set has rollouts where the whole-trace annotation would have told


def test_every_condition_stops_at_the_cut(dataset, builtin):
    root, questions = dataset
    builder = ContextBuilder(root, builtin)
    for q in _prediction_questions(questions)[:5]:
        tr = builder.visible_trace(q)
        assert tr.num_frames == q.cut_frame + 1
        assert max(frame_indices(tr, 2.0, 12)) == q.cut_frame
        text = state_text(tr, 4000)
        last = max(float(line.split("|")[0][2:]) for line in text.splitlines()[1:])
        assert last <= q.window[1] + 1e-9
        table = builder.table(q)
        assert f"from 0.00 to {q.window[1]:.2f} s only" in table and "frames)" not in table
        parts = builder.messages(q, "frames")[1]["content"]
        stamps = [float(p["text"][4:-2]) for p in parts if p["type"] == "text" and p["text"].startswith("t = ")]
        assert max(stamps) <= q.window[1] + 1e-9
