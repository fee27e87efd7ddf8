"""The reward DSL reads what detectors declare: which pairs are directed and which params name bodies."""

from __future__ import annotations

import pytest

from dsl_builders import annotation
from simpatterns.annotation import PatternEvent
from simpatterns.detectors import PatternLibrary
from simpatterns.dsl import RewardProgram, check, compile_program
from simpatterns.sandbox.gate import check_candidate

BODIES = ["ground", "red ball", "green ball", "purple box"]


def detector(label: str, params: list[str], extra: str = "") -> str:
    return (
        f"PATTERN = {label!r}\n"
        f"DESCRIPTION = 'Test pattern {label}.'\n"
        "DEPENDS = []\n"
        f"PARAMS = {params!r}\n"
        f"{extra}\n\n"
        "def detect(trace, events):\n"
        "    return []\n"
    )


@pytest.fixture(scope="module")
def library() -> PatternLibrary:
    lib = PatternLibrary()
    # LLM-written, as discovery writes them: untrusted, checked statically, never run here
    lib.add(detector("push", ["object_a", "object_b"], "DIRECTED = True"), provenance="evolved")
    lib.add(detector("graze", ["object_a", "object_b"]), provenance="evolved")
    lib.add(detector("shove", ["object", "pusher", "note"], 'BODY_PARAMS = ["object", "pusher"]'),
            provenance="hand-written")
    return lib


PUSH = annotation([PatternEvent("push", 5, {"object_a": "red ball", "object_b": "ground"}),
                   PatternEvent("graze", 7, {"object_a": "red ball", "object_b": "ground"})])


def test_an_evolved_pattern_declaring_directed_is_matched_directed(library):
    assert not library.is_trusted("push") and library.declarations()["push"].directed
    for text, success in [
        ('EVENT("push", {"object_a": "red ball", "object_b": "ground"})', True),
        ('EVENT("push", {"object_a": "ground", "object_b": "red ball"})', False),
        ('EVENT("push", {"object_a": "ground"})', False),  # ground is pushed, it does not push
        ('EVENT("push", {"object_b": "ground"})', True),
        ('EVENT("graze", {"object_a": "ground"})', True),  # undeclared: the pair is unordered
    ]:
        prog = RewardProgram.from_text(text, library)
        assert prog.evaluate(PUSH).success is success, text
        assert compile_program(text, library=library).evaluate(PUSH).success is success, text


def test_directed_survives_discovery_into_the_library():
    source = detector("tow", ["object_a", "object_b", "frames"], "DIRECTED = True")
    candidate = check_candidate(source, "tow")  # what the evolver's gate hands on
    lib = PatternLibrary()
    det = lib.add(candidate, provenance="evolved")  # not parsed again, not executed
    assert det.directed and det.duration == "interval" and not det.trusted and det.detect is None
    ann = annotation([PatternEvent("tow", 3, {"object_a": "red ball", "object_b": "green ball", "frames": 4})])
    assert not RewardProgram.from_text('EVENT("tow", {"object_a": "green ball"})', lib).evaluate(ann).success


def test_declared_body_params_are_checked_against_the_scene(library):
    errors = check('EVENT("shove", {"pusher": "blue ball", "note": "blue ball", "object": "red ball"})',
                   library, BODIES)
    assert [(e.code, "pusher" in e.message) for e in errors] == [("unknown-body", True)]
    assert "blue ball" in errors[0].message
    assert check('EVENT("shove", {"pusher": "purple box", "object": ["red ball", "any"]})', library, BODIES) == []
    assert [e.code for e in check('EVENT("shove", {"object": ["red ball", "gray ball"]})', library, BODIES)] == [
        "unknown-body"]
    with pytest.raises(Exception) as err:
        RewardProgram.from_text('EVENT("shove", {"pusher": "blue ball"})', library, BODIES)
    assert "unknown body" in str(err.value)


def test_without_declarations_the_contract_defaults_apply(library):
    sigs = library.signatures()  # a plain mapping: no declarations
    assert check('EVENT("shove", {"pusher": "blue ball"})', sigs, BODIES) == []
    assert [e.code for e in check('EVENT("shove", {"object": "blue ball"})', sigs, BODIES)] == ["unknown-body"]
    assert [e.code for e in check('EVENT("anything", {"object_x": "blue ball", "mover": "blue ball"})', None,
                                  BODIES)] == ["unknown-body"]
    # and no pair is directed without a library
    assert compile_program('EVENT("push", {"object_a": "ground"})').evaluate(PUSH).success


def test_builtin_context_bodies_are_checked():
    lib = PatternLibrary.builtin()
    errors = check('EVENT("bounce", {"surface": "floor"})', lib, BODIES)
    assert [e.code for e in errors] == ["unknown-body"] and '"floor"' in errors[0].message
    assert check('EVENT("bounce", {"surface": "ground"})', lib, BODIES) == []
