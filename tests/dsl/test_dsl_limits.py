"""DSL limits: numeric overflow, program size, nesting depth and error floods are `DSLError`s
with a position, and checking stays linear in the program's size."""

from __future__ import annotations

import gc
import subprocess
import sys
import time

import pytest

from simpatterns.dsl import check, parse
from simpatterns.dsl.checker import MAX_ERRORS
from simpatterns.dsl.errors import DSLError
from simpatterns.dsl.parser import MAX_NESTING, MAX_PROGRAM_CHARS
from simpatterns.dsl.program import RewardProgram, builtin_library


def errors_of(text: str) -> list[DSLError]:
    return check(text, builtin_library(), ["green ball", "blue ball", "red ball"])


@pytest.mark.parametrize("number", ["9" * 309, "9" * 309 + ".5", "1e400", "-" + "1" * 400, "1" * 5000])
def test_a_number_out_of_range_is_an_error_at_its_position(number):
    text = f'AND(\n  COUNT("collision start") == {number}\n)'
    [err] = errors_of(text)
    assert err.code == "bad-number" and (err.line, err.column) == (2, 31), str(err)
    assert len(err.message) < 120  # the digits are not repeated in full


def test_reward_check_says_one_error_for_a_huge_number(tmp_path):
    goal = tmp_path / "big.rwd"
    goal.write_text(f'AND(COUNT("collision start") == {"9" * 309})\n')
    done = subprocess.run([sys.executable, "-m", "simpatterns.cli", "reward", "check", str(goal)],
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in out and "OverflowError" not in out
    assert f"{goal}:1:33: error[bad-number]" in out


def test_a_program_over_the_size_limit_is_an_error_with_a_position():
    clause = 'COUNT("collision start") >= 1'
    text = "AND(\n" + ",\n".join([clause] * (MAX_PROGRAM_CHARS // len(clause) + 10)) + "\n)"
    with pytest.raises(DSLError) as err:
        parse(text)
    assert err.value.code == "too-long" and err.value.line > 1 and err.value.column >= 1


def test_nesting_deeper_than_the_limit_is_an_error_at_the_bracket():
    text = "AND(" * (MAX_NESTING + 1) + 'EVENT("collision start")' + ")" * (MAX_NESTING + 1)
    with pytest.raises(DSLError) as err:
        parse(text)
    assert err.value.code == "too-deep" and err.value.line == 1 and err.value.column == 4 * (MAX_NESTING + 1)


def test_an_error_flood_is_cut_and_costs_linear_time():
    def program(n: int) -> str:
        return "AND(\n" + ",\n".join(f'COUNT("no such pattern {i}") >= 1' for i in range(n)) + "\n)"

    def cost(n: int) -> tuple[float, list[DSLError]]:
        best = float("inf")
        for _ in range(3):  # the least of three: a collection or a busy neighbour inflates one reading
            t0 = time.process_time()
            errs = errors_of(program(n))
            best = min(best, time.process_time() - t0)
        return best, errs

    small, errs = cost(700)
    large, errs = cost(2700)  # ~95 KB
    assert len(errs) == MAX_ERRORS + 1 and errs[-1].code == "too-many-errors" and errs[-1].line > 1
    assert large < 2.0 and large < 8 * max(small, 0.02), (small, large)


def test_checking_and_evaluating_an_80kb_program_is_linear(traces_for_timing):
    trace = traces_for_timing
    lib = builtin_library()
    body = trace.names[-1]
    clause = f'COUNT("collision start", {{"object_a": "{body}"}}) >= {{i}}'

    def program(n: int) -> str:
        return "AND(\n" + ",\n".join(clause.replace("{i}", str(i % 7)) for i in range(n)) + "\n)"

    ann = RewardProgram.from_text(program(1), lib).annotate(trace)

    def cost(n: int) -> float:
        text = program(n)
        gc.collect()  # a full collection of earlier garbage would land on whichever reading comes next
        t0 = time.process_time()
        prog = RewardProgram.from_text(text, lib, bodies=list(trace.names))
        prog.evaluate(ann, trace)
        return time.process_time() - t0

    # the least of three each, alternating, so both sizes see the same machine
    readings = [(cost(360), cost(1450)) for _ in range(3)]  # ~20 KB and ~82 KB
    small, large = min(r[0] for r in readings), min(r[1] for r in readings)
    assert len(program(1450)) > 80_000
    # 4x the clauses: linear costs about 4x (7x was read once on a loaded machine), quadratic 16x
    assert large < 3.0 and large < 10 * small, (small, large)


@pytest.fixture(scope="module")
def traces_for_timing():
    from simpatterns.simulators.phyre import get_template, simulate

    template = get_template("00000")
    params = next(iter(template.valid_param_sets()))
    return simulate(template.scene(params), (0.5, 0.5, 0.5), max_steps=200).trace
