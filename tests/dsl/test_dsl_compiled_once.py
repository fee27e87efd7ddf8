"""A reward program is parsed once and checked once before its first score,
on every path that scores with it: ``simpatterns reward eval``, an
environment step through `RewardProgramWrapper`, an optimizer run. The Lark
parser's entry point and the checker's walk are counted (the real ones run;
the counts wrap them); a new scene's bodies are checked from the names the
one check recorded."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from lark import Lark
from typer.testing import CliRunner

import simpatterns.envs  # noqa: F401  (registers the ids)
from simpatterns.dsl import RewardProgram, builtin_library, parse
from simpatterns.dsl.checker import Checker
from simpatterns.simulators.phyre import get_template, simulate

PROGRAM = """AND(
    EVENT("collision start", {"object_a": "green ball", "object_b": "ground"}),
    NEARBY_AT("green ball", target="blue ball", t=1.0, radius=30),
    TOUCHING("green ball", "blue ball", t=1.0),
)"""


class Parses(list):
    """One entry per call of `Lark.parse`; ``checks`` counts full checks (`Checker.run`)."""

    checks = 0


@pytest.fixture
def lark_parses(monkeypatch):
    """Counts parses and checks from now on."""
    parse('EVENT("warm up")')  # build the cached parsers first: building one is not a parse of a program
    calls = Parses()
    real_parse, real_run = Lark.parse, Checker.run

    def counting_parse(self, text, *args, **kwargs):
        calls.append(text)
        return real_parse(self, text, *args, **kwargs)

    def counting_run(self):
        calls.checks += 1
        return real_run(self)

    monkeypatch.setattr(Lark, "parse", counting_parse)
    monkeypatch.setattr(Checker, "run", counting_run)
    return calls


def test_reward_eval_parses_once_for_all_its_traces(lark_parses, tmp_path):
    from simpatterns.cli import app

    template = get_template("00000")
    paths = []
    for v in (0, 1):  # two scenes: their bodies are checked without parsing again
        trace = simulate(template.variant_scene(v), template.solution(v), max_steps=400).trace
        paths.append(tmp_path / f"t{v}.npz")
        trace.save(paths[-1])
    goal = tmp_path / "goal.rwd"
    goal.write_text(PROGRAM)
    out = CliRunner().invoke(app, ["reward", "eval", str(goal), *map(str, paths), "--json"])
    assert out.exit_code == 0, out.output
    assert len([line for line in out.output.splitlines() if line.startswith("{")]) == 2
    assert len(lark_parses) == 1 and lark_parses.checks == 1


def test_env_step_through_the_wrapper_parses_once(lark_parses):
    from simpatterns.envs import PHYRE_ONE_BALL, RewardProgramWrapper

    env = RewardProgramWrapper(gym.make(PHYRE_ONE_BALL, template="00000", max_steps=240), PROGRAM)
    env.reset(seed=0, options={"template": "00000", "variant": 1})
    env.reset(seed=0, options={"template": "00000", "variant": 0})  # another scene: bodies checked, no parse
    _, reward, _, _, info = env.step(np.asarray(get_template("00000").solution(0), np.float32))
    assert reward == info["program_score"] and [k for k in info if k.startswith("reward/")] == [
        f"reward/{c}" for c in env.program.clauses]
    assert len(lark_parses) == 1 and lark_parses.checks == 1
    for _ in range(3):  # later episodes parse nothing
        env.reset(seed=1)
        env.step(env.action_space.sample())
    assert len(lark_parses) == 1 and lark_parses.checks == 1


def test_optimizer_run_parses_once(lark_parses):
    from simpatterns.envs.scenes import bucket_program_text, three_buckets
    from simpatterns.optimize import Objective, anneal

    objective = Objective(three_buckets(), program=bucket_program_text(2), max_steps=300)
    res = anneal(objective, 4, seed=0, keep_trace=False, stop_on_success=False)
    assert res.samples == 4 and 0 < res.best_score <= 1
    assert len(lark_parses) == 1 and lark_parses.checks == 1


def test_a_new_scene_is_checked_from_the_recorded_body_names(lark_parses):
    prog = RewardProgram.from_text(PROGRAM, builtin_library(), filename="goal.rwd")
    assert len(lark_parses) == 1 and lark_parses.checks == 1
    assert prog.check_bodies(["green ball", "blue ball", "ground", "red ball"]) == []
    errors = prog.check_bodies(["green ball", "ground"])
    assert [(e.code, e.line, e.filename) for e in errors] == [("unknown-body", 3, "goal.rwd"),
                                                              ("unknown-body", 4, "goal.rwd")]
    assert all('"blue ball"' in e.message for e in errors)
    # the errors a full check of the parsed tree with those bodies gives
    from simpatterns.dsl import check

    assert len(lark_parses) == 1 and lark_parses.checks == 1
    full = check(prog.program, builtin_library(), ["green ball", "ground"])
    assert [str(e) for e in full] == [str(e) for e in errors]
    assert prog.patterns == frozenset({"collision start"})


def test_compiling_a_goal_parses_each_candidate_once(lark_parses):
    from simpatterns.dsl.synthesize import judge

    ok = judge(f"```\n{PROGRAM}\n```", "stop", builtin_library(), ["green ball", "blue ball", "ground"])
    bad = judge('EVENT("no such pattern")', "stop", builtin_library(), None)
    assert ok.stage == "ok" and ok.program is not None and ok.program.clauses[0].startswith("EVENT(")
    assert bad.stage == "check" and bad.program is None and bad.errors[0].code == "unknown-pattern"
    assert len(lark_parses) == 2 and lark_parses.checks == 2
    assert json.loads(json.dumps(ok.to_json()))["stage"] == "ok"
