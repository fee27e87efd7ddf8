"""Property tests (hypothesis, derandomised): on generated programs and
annotations, score is in [0, 1] and equals 1 exactly when the program
succeeds; NOT flips success; the printer round-trips any syntax tree."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl_builders import GEN_BODIES, GEN_PATTERNS, PAIR_PATTERNS, ProgramGenerator, annotation, make_trace
from simpatterns.annotation import PatternEvent
from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl import compile_program, format_expr, format_program, parse, predicate_names
from simpatterns.dsl.syntax import Call, Compare, DictLit, Keyword, ListLit, Num, Program, Str, TupleLit
from simpatterns.trace import Episode

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def annotations(draw, num_frames):
    rows = draw(st.lists(st.tuples(st.sampled_from(GEN_PATTERNS), st.integers(0, num_frames - 1),
                                   st.sampled_from(GEN_BODIES), st.sampled_from(GEN_BODIES),
                                   st.integers(1, 30)), max_size=25))
    events = []
    for pattern, frame, a, b, n in rows:
        if pattern in PAIR_PATTERNS:
            if a != b:
                events.append(PatternEvent(pattern, frame, {"object_a": a, "object_b": b}))
        elif pattern == "airborne":
            events.append(PatternEvent(pattern, frame, {"object": a, "frames": n}))
        else:
            events.append(PatternEvent(pattern, frame, {"object": a}))
    return annotation(events, num_frames, patterns=list(GEN_PATTERNS))


@st.composite
def traces(draw, num_frames):
    xy = st.tuples(st.floats(0, 256), st.floats(0, 256))
    positions = {b: draw(xy) for b in GEN_BODIES}
    contacts = draw(st.lists(st.tuples(st.integers(0, num_frames - 1), st.sampled_from(GEN_BODIES),
                                       st.sampled_from(GEN_BODIES)), max_size=30))
    contacts = sorted({(f, *sorted((a, b))) for f, a, b in contacts if a != b})
    return make_trace(positions, num_frames=num_frames, contacts=contacts)


@st.composite
def cases(draw):
    num_frames = draw(st.integers(2, 80))
    text = ProgramGenerator(draw(st.randoms(use_true_random=False))).program()
    return text, draw(annotations(num_frames)), draw(traces(num_frames))


@SETTINGS
@given(cases())
def test_score_is_one_exactly_when_success(case):
    text, ann, trace = case
    prog = compile_program(text)
    r = prog.evaluate(ann, trace)
    assert 0.0 <= r.score <= 1.0
    assert (r.score == 1.0) == r.success
    for c in r.clauses:
        assert 0.0 <= c.score <= 1.0 and (c.score == 1.0) == c.success
    # the fast path and the explaining path agree
    fast = prog.score(ann, trace)
    explained = prog.evaluate(ann, trace, explain=True)
    assert fast == (r.success, r.score) == (explained.success, explained.score)
    # NOT flips success and keeps the invariant
    n = compile_program(f"NOT({text})").evaluate(ann, trace)
    assert n.success == (not r.success) and (n.score == 1.0) == n.success and 0 <= n.score <= 1


@SETTINGS
@given(st.randoms(use_true_random=False))
def test_generated_programs_round_trip_through_the_printer(rnd):
    text = ProgramGenerator(rnd).program()
    p = parse(text)
    printed = format_program(p)
    assert parse(printed) == p
    assert format_program(parse(printed)) == printed  # canonical: printing is idempotent


# ------------------------------------------------------------ arbitrary trees
names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
strings = st.text(max_size=12)
numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=False, allow_infinity=False))


def trees():
    leaves = st.one_of(strings.map(Str), numbers.map(Num))

    def extend(children):
        calls = st.builds(
            lambda name, args, kws: Call(name, tuple(args) + tuple(Keyword(k, v) for k, v in kws)),
            st.sampled_from(predicate_names()),
            st.lists(children, max_size=3),
            st.lists(st.tuples(names, children), max_size=2),
        )
        return st.one_of(
            calls,
            st.lists(children, max_size=3).map(lambda xs: ListLit(tuple(xs))),
            st.lists(children, max_size=3).map(lambda xs: TupleLit(tuple(xs))),
            st.lists(st.tuples(strings.map(Str), children), max_size=3).map(lambda xs: DictLit(tuple(xs))),
        )

    operand = st.recursive(leaves, extend, max_leaves=12)
    compare = st.builds(Compare, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), operand, operand)
    return st.one_of(operand, compare)


@SETTINGS
@given(trees())
def test_any_tree_round_trips(tree):
    assert parse(format_program(Program(tree))).root == tree
    assert parse(format_expr(tree)).root == tree


def test_generator_is_reproducible():
    assert ProgramGenerator(random.Random(7)).program() == ProgramGenerator(7).program()


# ------------------------------------------------------------------ early stops
@st.composite
def stopped_cases(draw):
    """A program, a rollout of H frames (annotation and trace), and the same rollout stopped after
    T < H frames (events after T dropped, intervals cut at T - 1), told its horizon and why it
    stopped: "settled" (the extension repeats the last frame's positions and contacts and starts no
    contact event) or unknown (the extension is anything)."""
    H = draw(st.integers(3, 60))
    T = draw(st.integers(2, H - 1))
    settled = draw(st.booleans())
    text = ProgramGenerator(draw(st.randoms(use_true_random=False))).program()
    full_ann = draw(annotations(H))
    trace = draw(traces(H))
    if settled:  # freeze the world after frame T - 1; no contact starts or ends after it
        trace.position[T:] = trace.position[T - 1]
        last = [(a, b) for f, a, b in zip(trace.contact_frame, trace.contact_a, trace.contact_b) if f == T - 1]
        rows = [(f, a, b) for f, a, b in zip(trace.contact_frame.tolist(), trace.contact_a.tolist(),
                                             trace.contact_b.tolist()) if f < T]
        rows += [(f, int(a), int(b)) for f in range(T, H) for a, b in last]
        names = trace.names
        trace = make_trace({n: trace.position[:, i] for i, n in enumerate(names)}, num_frames=H,
                           contacts=[(f, names[a], names[b]) for f, a, b in rows])
        full_ann = annotation([PatternEvent(p, f, q) for p, evs in full_ann.pattern_events.items() for f, q in evs
                               if f < T or p not in PAIR_PATTERNS], H, patterns=list(GEN_PATTERNS))
    cut = []
    for p, evs in full_ann.pattern_events.items():
        for f, q in evs:
            if f < T:
                q = dict(q, frames=min(q["frames"], T - f)) if "frames" in q else q
                cut.append(PatternEvent(p, f, q))
    stopped_ann = annotation(cut, T, patterns=list(GEN_PATTERNS))
    stopped_ann.episode = Episode(T, H, "settled" if settled else None)
    rows = trace.contact_frame < T
    names = trace.names
    stopped = make_trace({n: trace.position[:T, i] for i, n in enumerate(names)}, num_frames=T,
                         contacts=[(int(f), names[a], names[b]) for f, a, b in
                                   zip(trace.contact_frame[rows], trace.contact_a[rows], trace.contact_b[rows])])
    stopped.meta.update({"horizon": H, "stopped": "settled" if settled else None})
    return text, (full_ann, trace), (stopped_ann, stopped)


@SETTINGS
@given(stopped_cases())
def test_determined_verdicts_hold_whatever_the_unsimulated_frames_held(case):
    text, full, stopped = case
    prog = compile_program(text, library=PatternLibrary.builtin())
    early = prog.evaluate(*stopped)
    if early.determined:
        assert early.success == prog.evaluate(*full).success
    for clause, whole in zip(early.clauses, prog.evaluate(*full).clauses):
        if clause.determined:
            assert clause.success == whole.success, clause.text


@SETTINGS
@given(st.integers(2, 60), st.integers(0, 5), st.data())
def test_touching_at_a_frame_reads_the_bridged_contact_series(T, extra, data):
    trace = data.draw(traces(T))
    trace.meta["horizon"] = T + extra
    prog = compile_program('NEVER(TOUCHING("green ball", "*"))')
    ctx = prog.context(None, trace)
    node = prog.root.what
    series = node.series(ctx)
    assert [node._touching_at(ctx, f) for f in range(T)] == series.tolist()
    raw = node._raw_series(ctx)
    assert (series >= raw).all()  # bridging only adds frames between contacts
