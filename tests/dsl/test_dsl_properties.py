"""Property tests (hypothesis, derandomised): on generated programs and
annotations, score is in [0, 1] and equals 1 exactly when the program
succeeds; NOT flips success; the printer round-trips any syntax tree."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl_builders import GEN_BODIES, GEN_PATTERNS, PAIR_PATTERNS, ProgramGenerator, annotation, make_trace
from simpatterns.annotation import PatternEvent
from simpatterns.dsl import compile_program, format_expr, format_program, parse, predicate_names
from simpatterns.dsl.syntax import Call, Compare, DictLit, Keyword, ListLit, Num, Program, Str, TupleLit

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
