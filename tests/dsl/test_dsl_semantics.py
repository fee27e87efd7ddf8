"""Reward programs mean what a goal says (issue 14), one test group per surprise the issue lists:
time on the episode's horizon, events with durations, touches as people count them, resting and
nearness, and bodies named by role or colour on every template."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from dsl_builders import annotation, make_trace
from goal_rollouts import rollout
from simpatterns.annotate.annotator import annotate
from simpatterns.annotation import PatternEvent
from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl import RewardProgram, compile_program
from simpatterns.simulators.phyre import TEMPLATES, SceneBuilder, load_scene, simulate
from simpatterns.simulators.phyre.physics import thin
from simpatterns.trace import Episode

GOALS = Path(__file__).resolve().parents[2] / "examples" / "goals"


@pytest.fixture(scope="module")
def lib() -> PatternLibrary:
    return PatternLibrary.builtin()


def goal(name: str) -> RewardProgram:
    return RewardProgram.coerce(next(GOALS.glob(f"{name}_*.rwd")))


# ------------------------------------------------------------ 1. absolute time
def test_time_is_measured_on_the_horizon_whether_or_not_the_rollout_stopped():
    # A2 on template 00000 variant 8: the rollout stops at success at frame 606; in the full
    # run the red ball touches the green ball at frame 142, inside the first 20% of the episode
    stopped, full = rollout("00000", 8, "solution", full=False), rollout("00000", 8, "solution")
    assert stopped.num_frames == 607 and full.num_frames == 1001
    assert stopped.episode == Episode(607, 1001, "success", ("green ball", "blue ball"))
    assert full.episode == Episode(1001, 1001, None, ("green ball", "blue ball"))
    touch = full.contact_intervals("red ball", "green ball")[0][0]
    assert touch == 142 and 0.2 * 606 < touch <= 0.2 * 1000  # inside the window only on the horizon
    a2 = goal("a02")
    on_stopped, on_full = a2.evaluate(None, stopped), a2.evaluate(None, full)
    assert on_stopped.success is on_full.success is False
    assert on_stopped.determined  # the first 20% of the episode was simulated


def test_stored_annotations_and_thinned_traces_keep_the_horizon(tmp_path, lib):
    trace = rollout("00000", 8, "solution", full=False)
    ann = annotate(trace, lib.subset(["touch start"]))
    assert ann.episode == trace.episode
    loaded = type(ann).load(ann.save(tmp_path / "a.jsonl"))
    a2 = goal("a02")
    assert loaded.episode == trace.episode
    # the annotation alone gives t the same meaning as the trace does
    prog = compile_program('EVENT("touch start", {"object_a": "red ball", "object_b": "green ball"}, '
                           'window=(0, 0.2))', library=lib)
    assert prog.evaluate(loaded).success == prog.evaluate(ann, trace).success is True
    assert a2.evaluate(None, trace).success is False
    thinned = thin(trace, 4)
    assert thinned.horizon == 251 and thinned.num_frames == 152


def test_after_an_early_stop_only_the_success_pair_is_known():
    stopped, full = rollout("00000", 8, "solution", full=False), rollout("00000", 8, "solution")
    # the success pair keeps touching: known at the end of the episode
    touching = RewardProgram.coerce('TOUCHING("green ball", "blue ball", t=1.0)').evaluate(None, stopped)
    assert touching.success and touching.determined
    # anything else is unknown: the verdict is the frozen completion's, marked undetermined and explained
    never = RewardProgram.coerce('NEVER(TOUCHING("red ball", "ground"), window=(0.9, 1.0))')
    res = never.evaluate(None, stopped, explain=True)
    assert not res.determined and "frames 607-1000 of the episode were not simulated" in res.explain_text()
    assert res.success == (not full.pair_touching("red ball", "ground")[606])  # the last frame held
    # no raw contact event of the success pair can follow; of another pair it can
    assert RewardProgram.coerce('NEVER("collision start", {"object_a": "green ball", "object_b": "blue ball"}, '
                                'window=(0.7, 1))').evaluate(None, stopped).determined
    assert not RewardProgram.coerce('NEVER("collision start", {"object_a": "red ball"}, window=(0.7, 1))'
                                    ).evaluate(None, stopped).determined
    # counts are bounded below by what was seen: "at least one" is settled, "exactly one" is not
    seen = RewardProgram.coerce('COUNT("touch start", {"object_a": "red ball"}) >= 1').evaluate(None, stopped)
    assert seen.success and seen.determined
    exact = RewardProgram.coerce('COUNT("touch start", {"object_a": "red ball"}) == 99').evaluate(None, stopped)
    assert not exact.success and not exact.determined


def test_a_settled_stop_holds_its_last_frame():
    B = SceneBuilder()
    B.add("ball", scale=0.1, center_x=60, bottom=0).color = "green"
    trace = simulate(B.build(require_goal=False), None, max_steps=600, stop_when_settled=True).trace
    assert trace.episode.stopped == "settled" and trace.num_frames < trace.horizon == 601
    for text in ('NEARBY_AT("green ball", x=60, y=12.8, radius=2, t=1.0)',
                 'ALWAYS(TOUCHING("green ball", "ground"), window=(0.5, 1))',
                 'NEVER("collision start", window=(0.5, 1))'):
        res = RewardProgram.coerce(text).evaluate(None, trace)
        assert res.success and res.determined, text


# ------------------------------------------------------------ 2. events with duration
def _interval_case(rng: random.Random, T: int = 101):
    events = []
    for _ in range(rng.randint(1, 4)):
        start = rng.randrange(T)
        events.append(PatternEvent("airborne", start, {"object": "red ball", "frames": rng.randint(1, T - start)}))
    lo = rng.random()
    hi = lo + rng.random() * (1 - lo)
    return annotation(events, T, patterns=["airborne"]), (round(lo, 3), round(hi, 3))


def test_always_and_never_never_both_hold_when_the_pattern_occurs(lib):
    rng = random.Random(14)
    occurring = 0
    for _ in range(400):
        ann, (lo, hi) = _interval_case(rng)
        w = f"window=({lo}, {hi})"
        p = '"airborne", {"object": "red ball"}'
        run = lambda text: compile_program(text, library=lib).evaluate(ann).success  # noqa: E731
        first, last = int(np.ceil(lo * 100 - 1e-9)), int(np.floor(hi * 100 + 1e-9))
        spans = [(f, f + q["frames"] - 1) for f, q in ann.events_of("airborne")]
        occurs = any(s <= last and e >= first for s, e in spans) and first <= last
        occurring += occurs
        always, never, event = run(f"ALWAYS({p}, {w})"), run(f"NEVER({p}, {w})"), run(f"EVENT({p}, {w})")
        assert not (occurs and always and never)
        assert event == occurs and never == (not occurs)  # one meaning of "occurs in a window"
        covered = set().union(*(range(max(s, first), min(e, last) + 1) for s, e in spans))
        assert always == (covered >= set(range(first, last + 1)))
        n = sum(s <= last and e >= first for s, e in spans) if first <= last else 0
        assert run(f"COUNT({p}, {w}) == {n}")
    assert occurring > 100


def test_order_predicates_read_starts_and_windows_read_activity(lib):
    # airborne frames 10-49, a collision at frame 30; the window (0.4, 0.6) holds frames 40-60
    ann = annotation([PatternEvent("airborne", 10, {"object": "red ball", "frames": 40}),
                      PatternEvent("collision start", 30, {"object_a": "red ball", "object_b": "ground"})],
                     101, patterns=["airborne", "collision start"])
    run = lambda text: compile_program(text, library=lib).evaluate(ann).success  # noqa: E731
    assert run('EVENT("airborne", window=(0.4, 0.6))')  # still airborne at frames 40-49
    assert run('AFTER("airborne", "collision start")')  # the collision starts after the flight did
    assert run('BEFORE("airborne", "collision start")')
    assert not run('AFTER("collision start", "airborne")')
    assert run('FIRST("airborne", window=(0.4, 0.6))')  # the first flight occurs in the window
    # the same events read as instants when compiled without the library's declarations
    assert not compile_program('EVENT("airborne", window=(0.4, 0.6))').evaluate(ann).success


# ------------------------------------------------------------ 3. touches as people count them
def test_touches_are_counted_as_a_person_counts_them():
    # A7 on template 00022 variant 3: the red ball touches the green ball twice and the blue ball
    # twice; their contacts flicker apart for a frame, so raw collision starts count 3 and 4
    trace = rollout("00022", 3, "solution")
    assert [s for s, _ in trace.contact_intervals("red ball", "green ball")] == [323, 370, 373]
    assert [s for s, _ in trace.contact_intervals("red ball", "blue ball")] == [153, 193, 236, 301]
    count = lambda label, other: RewardProgram.coerce(  # noqa: E731
        f'COUNT("{label}", {{"object_a": "red ball", "object_b": "{other}"}}) == 2').evaluate(None, trace).success
    assert count("touch start", "green object") and count("touch start", "blue object")
    assert not count("collision start", "green ball") and not count("collision start", "blue ball")
    assert goal("a07").evaluate(None, trace).success


# ------------------------------------------------------------ 4. resting and nearness
def test_stopped_moving_is_rest_not_a_bounce(lib):
    # template 00000 variant 3: the red ball's first support by the ground is a 4-frame bounce
    # at 62 px/s (the old approximation of A8 read it as resting); it never rests
    trace = rollout("00000", 3, "solution")
    ann = annotate(trace, lib.subset(["support relationship", "comes to rest"]))
    i = trace.body_index("red ball")
    (f, p), *_ = [(f, p) for f, p in ann.events_of("support relationship")
                  if p["object_a"] == "red ball" and p["object_b"] == "ground"]
    assert p["frames"] == 4 and np.hypot(*trace.velocity[f, i]) > 60
    assert [e for e in ann.events_of("comes to rest") if e[1]["object"] == "red ball"] == []
    speed = np.hypot(*trace.velocity[:, i].T)
    for f, p in ann.events_of("comes to rest"):  # every rest is still for its whole length, 0.5 s at least
        j = trace.body_index(p["object"])
        assert p["frames"] >= 30 and np.hypot(*trace.velocity[f: f + p["frames"], j].T).max() < 1.0
    assert speed.max() > 1.0


def flyby(gap: float):
    """Two balls thrown at each other, their surfaces passing ``gap`` px apart (known by construction)."""
    B = SceneBuilder()
    a = B.add("ball", scale=0.1, center_x=40, center_y=150)
    a.color, a.velocity = "red", (150.0, 0.0)
    b = B.add("ball", scale=0.1, center_x=216, center_y=150 - 2 * a.size["radius"] - gap)
    b.color, b.velocity = "blue", (-150.0, 0.0)
    return simulate(B.build(require_goal=False), None, max_steps=60).trace


def test_distance_between_surfaces_expresses_very_close():
    trace = flyby(3.0)
    d = RewardProgram.coerce('DISTANCE("red ball", "blue ball", window=(0, 1)) <= 3.2').evaluate(None, trace)
    assert d.success
    assert not RewardProgram.coerce('DISTANCE("red ball", "blue ball", window=(0, 1)) <= 2.8').evaluate(
        None, trace).success
    # the goal A6 in its own words: close around t = 0.5, never touching
    a6 = RewardProgram.coerce('AND(DISTANCE("red ball", "blue object", window=(0.4, 0.6)) <= 5, '
                              'NEVER(TOUCHING("red ball", "blue object")))')
    assert a6.evaluate(None, trace).success
    hit = flyby(-3.0)
    assert not a6.evaluate(None, hit).success
    assert RewardProgram.coerce('DISTANCE("red ball", "blue ball", window=(0, 1)) <= 0').evaluate(None, hit).success


# ------------------------------------------------------------ 5. references by role and colour
def test_goals_name_bodies_by_colour_and_role_on_every_template():
    for tid in sorted(TEMPLATES):
        bodies = load_scene(tid, 0).trace_bodies()
        names = {b.name for b in bodies}
        for path in sorted(GOALS.glob("a[0-9][0-9]_*.rwd")):
            assert RewardProgram.load(path, PatternLibrary.builtin(), bodies=list(bodies) + ["red ball"]), path
        assert "green object" not in names
    prog = RewardProgram.coerce('AND(TOUCHING("the goal object", "the goal subject", t=1.0), '
                                'EVENT("touch start", {"object_a": "the agent\'s ball", "object_b": "any wall"}))')
    for tid in ("00002", "00016", "00022"):
        full = rollout(tid, 0, "solution")
        assert prog.evaluate(None, full).clauses[0].success  # the solution's goal pair touches at the end


def test_a_class_with_no_member_is_not_an_error_but_cannot_hold():
    trace = rollout("00002", 0, "solution")  # green ball, purple floor: no blue body
    res = goal("a01").evaluate(None, trace, explain=True)
    assert not res.success and 'no body here is "blue object"' in res.explain_text()
    gray = RewardProgram.coerce('NEVER(TOUCHING("any gray object", "*"))').evaluate(None, trace)
    assert gray.success  # no gray body to touch anything


def test_classes_resolve_per_scene_in_events_and_states():
    trace = make_trace({"green ball": (0, 0), "green bar": (30, 0), "blue ball": (60, 0), "red ball": (90, 0)},
                       contacts=[(10, "green bar", "blue ball")])
    ann = annotation([PatternEvent("touch start", 10, {"object_a": "green bar", "object_b": "blue ball"})],
                     patterns=["touch start"])
    for text in ('EVENT("touch start", {"object_a": "green object", "object_b": "blue object"})',
                 'TOUCHING("a green object", "the blue ball", t=0.1)',
                 'NEARBY_AT("green object", target="blue object", radius=31)'):
        assert RewardProgram.from_text(text).evaluate(ann, trace).success, text
    assert not RewardProgram.from_text('NEARBY_AT("green object", target="blue object", radius=29)').evaluate(
        ann, trace).success
    with pytest.raises(Exception, match="needs-trace|pass the trace"):
        RewardProgram.from_text('EVENT("touch start", {"object_a": "green object"})').evaluate(ann)


def test_reward_check_lists_what_a_program_can_name_on_a_template():
    from typer.testing import CliRunner

    import typer

    from simpatterns.dsl.commands import register

    app = typer.Typer()

    @app.callback()
    def _main() -> None:
        pass

    register(app)
    res = CliRunner().invoke(app, ["reward", "check", str(next(GOALS.glob("a01_*.rwd"))), "--template", "00004"],
                             terminal_width=200)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "  blue beam          blue    bar    goal_subject" in lines
    assert '  "the goal object"   green ball' in lines and '  "the agent\'s ball"  red ball' in lines
    assert 'program: "blue object" names blue beam' in lines
    assert lines[-1].endswith("3 clauses; fits 100 variants of template 00004")
    res = CliRunner().invoke(app, ["reward", "check", str(next(GOALS.glob("a01_*.rwd"))), "--template", "00002",
                                   "--variant", "0"], terminal_width=200)
    assert res.exit_code == 0 and 'program: "blue object" names no body here: clauses about it cannot hold' in \
        res.output.splitlines()
    bad = CliRunner().invoke(app, ["reward", "check", str(GOALS / "bucket_first.rwd"), "--template", "00002"],
                             terminal_width=200)
    assert bad.exit_code == 1 and "unknown body" in bad.output and "(in template 00002 variant 0)" in bad.output
