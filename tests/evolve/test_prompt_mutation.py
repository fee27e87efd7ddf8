"""Prompts (versions, no off-by-one, trace API), parsing answers, and the offline operators."""

import ast
import asyncio

import numpy as np
import pytest

from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.gate import check_candidate
from simpatterns.evolve.mutation import crossover, find_sites, mutate
from simpatterns.evolve.prompt import LabelSpec, Version, assemble, build_prompt, skeleton, trace_api
from simpatterns.evolve.proposers import OfflineProposer
from simpatterns.sandbox.reasons import Rejected

SPEC = LabelSpec("fast mover", "A body moves faster than a threshold.", params=["object"])
V0 = skeleton(SPEC)
V1 = '''import numpy as np

PATTERN = "fast mover"
DESCRIPTION = "A body moves faster than a threshold."
DEPENDS = []
PARAMS = ["object"]

THRESHOLD = 120.0  # px/s
MIN_FRAMES = 3


def detect(trace, events):
    s = trace.speed()
    out = []
    for j, name in enumerate(trace.names):
        fast = np.nonzero(s[:, j] > THRESHOLD)[0]
        if len(fast) >= MIN_FRAMES and s[0, j] <= 5:
            out.append((int(fast[0]), {"object": name}))
    return out
'''
LIB = {"collision start": {"description": "two bodies start touching", "params": ["object_a", "object_b"]}}


def test_trace_api_is_generated_from_the_docstrings():
    api = trace_api()
    for name in ("position[T, N, D]", "trace.speed", "trace.touching_matrix", "trace.contact_intervals",
                 "trace.names", "trace.num_frames"):
        assert name in api
    assert "trace.save" not in api and "trace._" not in api
    assert "inclusive" in api  # whole first paragraphs, not cut lines


@pytest.mark.parametrize("k", [1, 2, 3])
def test_versions_and_the_number_to_complete_agree(k):
    versions = [Version(V0 if i == 0 else V1, None if i == 0 else 0.1 * i, i) for i in range(k)]
    p = build_prompt(SPEC, versions, island=2, epoch=1, library_info=LIB, api_text="API")
    text = p.messages[-1]["content"]
    for i in range(k):
        assert f"def detect_v{i}(trace, events)" in text
    assert f"def detect_v{k}(trace, events)" in text and f"def detect_v{k + 1}" not in text
    assert p.version == k and p.function_name == f"detect_v{k}" and p.parents == list(range(k))
    # the answer defines the version the prompt asked for, and the parser takes exactly that one
    answer = "Here you go:\n```python\n" + V1.replace("def detect(", f"def detect_v{k}(") + "```"
    src, tree = assemble(answer, p, SPEC)
    info = check_candidate(src, "fast mover", tree=tree)
    assert info.declarations.params == ("object",) and "def detect(trace, events)" in src
    wrong = "```python\n" + V1.replace("def detect(", f"def detect_v{k + 1}(") + "```"
    with pytest.raises(Rejected) as err:
        assemble(wrong, p, SPEC)
    assert err.value.reason.code == R.NO_FUNCTION


def test_prompt_carries_feedback_and_dependencies():
    spec = LabelSpec("bounce", "rebound", depends=["collision start"], params=["object"])
    lib = {"collision start": dict(LIB["collision start"], source="PATTERN = 'collision start'\n")}
    p = build_prompt(spec, [Version(skeleton(spec), None, 0)], 0, 0, lib,
                     feedback=[{"code": "timeout", "detail": "smoke test exceeded 3 s wall clock"}], api_text="API")
    text = p.messages[-1]["content"]
    assert "timeout: smoke test exceeded 3 s" in text and "vectorise" in text
    assert "Detector of 'collision start'" in text and "params=['object_a', 'object_b']" in text


def test_assemble_body_only_and_forced_constants():
    p = build_prompt(SPEC, [Version(V1, 0.2, 7)], 0, 0, {}, api_text="API")
    src, tree = assemble("    return [(0, {'object': trace.names[0]})]\n", p, SPEC)
    info = check_candidate(src, "fast mover", tree=tree)
    assert info.declarations.params == ("object",)
    # the model renamed the pattern: the label's PATTERN and DESCRIPTION win
    src, tree = assemble(V1.replace('"fast mover"', '"speedy"').replace("def detect(", "def detect_v1("), p, SPEC)
    assert check_candidate(src, "fast mover", tree=tree).pattern == "fast mover"
    with pytest.raises(Rejected) as err:
        assemble("I cannot help with that.", p, SPEC)
    assert err.value.reason.code in (R.NO_FUNCTION, R.SYNTAX_ERROR)


def test_mutation_changes_thresholds_and_comparisons_only():
    sites = find_sites(V1)
    names = {s.name for s in sites if s.name}
    assert names == {"THRESHOLD", "MIN_FRAMES"}
    assert {s.text for s in sites if s.kind == "compare"} == {">", ">=", "<="}
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(30):
        mutant = mutate(V1, rng)
        assert mutant is not None
        child, tree = mutant
        assert child != V1 and ast.dump(tree) == ast.dump(ast.parse(child))
        assert child.count("# px/s") == 1  # comments survive text-level edits
        check_candidate(child, "fast mover")
        seen.add(child)
    assert len(seen) > 20


def test_crossover_takes_thresholds_from_the_other_parent():
    other = V1.replace("THRESHOLD = 120.0", "THRESHOLD = 60.0").replace("MIN_FRAMES = 3", "MIN_FRAMES = 9")
    outs = {crossover(V1, other, np.random.default_rng(s)) for s in range(20)} - {None}
    assert any("THRESHOLD = 60.0" in o and "MIN_FRAMES = 3" in o for o in outs)
    assert any("MIN_FRAMES = 9" in o for o in outs)


def test_offline_proposer_is_deterministic_and_reports_nothing_to_mutate():
    prop = OfflineProposer()
    versions = [Version(V1, 0.1, 1)]
    a = asyncio.run(prop.propose(None, SPEC, versions, 42))
    b = asyncio.run(prop.propose(None, SPEC, versions, 42))
    assert a.source == b.source and a.source != V1
    none = asyncio.run(prop.propose(None, SPEC, [Version(V0, None, 0)], 1))
    assert none.source is None and none.reason.code == R.NOTHING_TO_MUTATE
