"""Fuzz: 10,000 random, generated and mutated programs go through parse ->
check -> compile -> evaluate. Each must end in a result or a `DSLError`
with a position, never another exception, and within a time bound."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from dsl_builders import GEN_BODIES, ProgramGenerator, SIGNATURES
from simpatterns.dsl import DSLError, DSLErrors, check, compile_program, parse, predicate_names

N_INPUTS = 10_000
TIME_BOUND_S = 2.0  # per input; typical inputs take about a millisecond
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "goals"

ALPHABET = '(){}[],:="\'#\n\t -+.0123456789eEabcxyzXYZ_*\\<>!=' + "é§\x00"
SNIPPETS = ['"', "'", "(", ")", "[", "]", "{", "}", ",", "=", "==", ">=", "#", "\n", "1e999", "-0.0", "99999999999",
            '"object X"', '"*"', 'window=(0, 1.5)', "t=2", "x=", "AND(", "NOT(", "COUNT(", ") >= 2",
            '{"object_a": ', '"collision start"', '"bounce"', "True", "None", "lambda", "__import__('os')"]


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def mutate(text: str, r: random.Random) -> str:
    for _ in range(r.randint(1, 3)):
        n = len(text)
        i = r.randrange(n + 1) if n else 0
        op = r.randrange(8)
        if op == 0 and n:  # delete a span
            text = text[:i] + text[i + r.randint(1, 12):]
        elif op == 1:  # insert characters
            text = text[:i] + "".join(r.choice(ALPHABET) for _ in range(r.randint(1, 4))) + text[i:]
        elif op == 2:  # insert a syntactic snippet or a predicate name
            text = text[:i] + r.choice(SNIPPETS + list(predicate_names())) + text[i:]
        elif op == 3 and n:  # replace one character
            text = text[:i] + r.choice(ALPHABET) + text[i + 1:]
        elif op == 4 and n:  # truncate
            text = text[:i]
        elif op == 5 and n:  # duplicate a segment
            j = min(n, i + r.randint(1, 40))
            text = text[:j] + text[i:j] + text[j:]
        elif op == 6 and n:  # swap two segments
            j, k = sorted(r.randrange(n) for _ in range(2))
            text = text[:i] + text[j:k] + text[i:j] + text[k:] if i < j else text
        else:  # change a number or a quoted word
            text = text.replace(r.choice(["1", "0", "2", "5"]), r.choice(["-1", "1.5", "1e9", "0.0", "7"]), 1)
    return text


def garbage(r: random.Random) -> str:
    kind = r.randrange(3)
    if kind == 0:
        return "".join(r.choice(ALPHABET) for _ in range(r.randint(0, 60)))
    if kind == 1:
        return bytes(r.randrange(256) for _ in range(r.randint(0, 60))).decode("utf-8", errors="replace")
    return " ".join(r.choice(SNIPPETS + list(predicate_names())) for _ in range(r.randint(1, 20)))


def inputs(seed: int = 1234):
    r = random.Random(seed)
    gen = ProgramGenerator(r)
    bases = [p.read_text() for p in sorted(EXAMPLES.glob("*.rwd"))]
    for k in range(N_INPUTS):
        kind = k % 10
        if kind < 2:
            yield "generated", gen.program()
        elif kind < 9:
            base = gen.program() if r.random() < 0.6 else r.choice(bases)
            yield "mutated", mutate(base, r)
        else:
            yield "garbage", garbage(r)


def _positioned(e: DSLError) -> bool:
    return e.line >= 1 and e.column >= 1 and bool(e.code) and f"{e.line}:{e.column}" in str(e)


def run_one(text: str, ann, trace, bodies) -> str:
    try:
        prog = parse(text, "fuzz.rwd")
    except DSLError as e:
        assert _positioned(e), str(e)
        return "syntax"
    errors = check(prog, SIGNATURES, bodies)
    for e in errors:
        assert _positioned(e), str(e)
    try:
        compiled = compile_program(prog)
    except DSLErrors as es:
        assert es.errors and all(_positioned(e) for e in es), str(es)
        return "check"
    try:
        res = compiled.evaluate(ann, trace)
    except DSLError as e:
        assert _positioned(e), str(e)
        return "evaluation"
    assert 0.0 <= res.score <= 1.0 and (res.score == 1.0) == res.success
    return "checked-errors" if errors else "ok"


def test_fuzz_ten_thousand_programs():
    gen = ProgramGenerator(99)
    ann, trace = gen.annotation(), gen.trace()
    bodies = list(GEN_BODIES)
    outcomes: dict[str, int] = {}
    slowest = 0.0
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for n, (kind, text) in enumerate(inputs(), start=1):
            signal.setitimer(signal.ITIMER_REAL, 5 * TIME_BOUND_S)  # a hang becomes a failure, not a stuck CI
            t0 = time.perf_counter()
            try:
                outcome = run_one(text, ann, trace, bodies)
            except _Timeout:
                pytest.fail(f"input {n} ({kind}) did not finish in {5 * TIME_BOUND_S} s:\n{text!r}")
            except AssertionError:
                raise
            except Exception as exc:  # noqa: BLE001  the point of the test
                pytest.fail(f"input {n} ({kind}) raised {type(exc).__name__}: {exc}\n{text!r}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - t0
            slowest = max(slowest, elapsed)
            assert elapsed < TIME_BOUND_S, f"input {n} took {elapsed:.2f} s:\n{text!r}"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, old)
    assert n == N_INPUTS
    # the mix exercises every stage, not only the parser
    assert outcomes.get("ok", 0) >= 1000 and outcomes.get("syntax", 0) >= 3000, outcomes
    assert outcomes.get("check", 0) + outcomes.get("checked-errors", 0) >= 100, outcomes


def test_fast_lexer_parses_exactly_like_larks_lexer():
    """`parse` tokenises with a fast single-regex lexer and falls back to Lark's
    contextual lexer on failure; on valid and broken inputs alike the two
    must accept the same texts and build the same trees."""
    from lark.exceptions import UnexpectedInput

    from simpatterns.dsl.parser import _fast_parser, _LexFailed, _parser

    def outcome(parser, text):
        try:
            return parser().parse(text)
        except (UnexpectedInput, _LexFailed):
            return "error"
        except Exception as exc:  # transformer errors (bad numbers) are the same on both paths
            return type(exc).__name__

    agree = 0
    for n, (_, text) in enumerate(inputs(seed=77)):
        if n >= 1500:
            break
        fast, ref = outcome(_fast_parser, text), outcome(_parser, text)
        assert fast == ref, text
        agree += fast != "error"
    assert agree > 250
