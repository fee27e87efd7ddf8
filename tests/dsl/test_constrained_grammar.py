"""Generated grammars against the parser and the checker.

- The GBNF translation of ``reward.lark`` accepts exactly what `parse` accepts
  over the DSL fuzz corpus (10,000 generated, mutated and garbage inputs) and
  every shipped goal; so does the decoding grammar, under its three
  restrictions (a predicate on top, no comments, bounded whitespace).
- vLLM's guidance backend (llguidance, which converts the GBNF) agrees on a
  part of the corpus.
- Every program the specialised grammar derives parses and checks against
  its library and scene; every shipped goal that checks in its scene is in it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from dsl_builders import SIGNATURES
from test_dsl_fuzz import inputs

from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl import DSLError, check, format_program, parse
from simpatterns.dsl.constrained import MAX_WS, decoding_grammar, specialised_grammar, specialised_lark
from simpatterns.dsl.parser import _parser, grammar_text
from simpatterns.dsl.predicates import PREDICATES
from simpatterns.dsl.synthesize import phyre_scene_bodies, with_agent_ball
from simpatterns.dsl.syntax import Call, Compare, walk
from simpatterns.envs.scenes import three_buckets
from simpatterns.llm.grammars import GBNF, lark_to_gbnf

GOALS = sorted((Path(__file__).resolve().parents[2] / "examples" / "goals").glob("*.rwd"))
# refusals that are limits, not syntax: a grammar cannot say them (numbers that overflow a float,
# nesting deeper than 64, more than 100k characters); the grammars accept such inputs
LIMITS = {"bad-number", "too-deep", "too-long"}


def corpus() -> list[str]:
    return [text for _, text in inputs()] + [p.read_text() for p in GOALS]


def outcome(text: str):
    try:
        return parse(text)
    except DSLError as exc:
        return exc.code


def decodable(text: str, program) -> bool:
    """The decoding grammar's restrictions, read from Lark's own tokens."""
    for tok in _parser().lex(text, dont_ignore=True):
        if tok.type == "COMMENT" or (tok.type == "WS" and len(tok.value) > MAX_WS):
            return False
    root = program.root
    return isinstance(root, Call) or (isinstance(root, Compare) and isinstance(root.left, Call))


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return corpus()


def test_generated_grammars_accept_exactly_what_the_parser_accepts(texts):
    faithful = lark_to_gbnf(grammar_text())
    decoding = GBNF.parse(decoding_grammar())
    counts = {"parsed": 0, "decodable": 0, "limit": 0}
    for text in texts:
        out = outcome(text)
        if isinstance(out, str):
            if out in LIMITS:
                counts["limit"] += 1
                continue
            assert not faithful.accepts(text), f"the grammar accepts what the parser refuses ({out}):\n{text!r}"
            assert not decoding.accepts(text), text
            continue
        counts["parsed"] += 1
        assert faithful.accepts(text), f"the grammar refuses what the parser accepts:\n{text!r}"
        want = decodable(text, out)
        counts["decodable"] += want
        assert decoding.accepts(text) == want, f"decoding grammar: expected {want}:\n{text!r}"
    assert counts["parsed"] > 3000 and counts["decodable"] > 2000, counts  # both sides well exercised


def test_every_shipped_goal_is_decodable_once_canonical():
    decoding = GBNF.parse(decoding_grammar())
    for path in GOALS:
        assert decoding.accepts(format_program(parse(path.read_text()))), path.name


def test_llguidance_agrees_on_the_decoding_grammar(texts):
    """vLLM's guidance backend converts the GBNF it is sent (llguidance.grammar_from);
    fed byte by byte it must accept the same programs."""
    llg = pytest.importorskip("llguidance")
    from llguidance import LLMatcher, LLTokenizer, TokenizerWrapper, grammar_from

    class Bytes:  # one token per byte, then EOS
        eos_token_id, bos_token_id = 256, None
        tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
        special_token_ids = [256]

        def __call__(self, b: bytes) -> list[int]:
            return list(b)

    tok = LLTokenizer(TokenizerWrapper(Bytes()), slices=[])
    text = decoding_grammar()
    grm = grammar_from("grammar", text)
    assert LLMatcher.validate_grammar(grm, tok) == ""
    ours = GBNF.parse(text)
    checked = 0
    for t in texts[::8]:
        m = LLMatcher(tok, grm, log_level=0)
        theirs = m.consume_tokens(list(t.encode())) and m.is_accepting()
        assert theirs == ours.accepts(t), repr(t)
        checked += 1
    assert checked > 1000 and llg


@pytest.fixture(scope="module")
def library() -> PatternLibrary:
    return PatternLibrary.builtin()


SCENES = {"00000:0": lambda: phyre_scene_bodies("00000:0"),
          "buckets": lambda: with_agent_ball(three_buckets().trace_bodies())}


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_specialised_programs_parse_and_check_by_construction(library, scene):
    bodies = SCENES[scene]()
    names = [b.name for b in bodies]
    g = GBNF.parse(specialised_grammar(library, bodies))
    rng = random.Random(7)
    used: set[str] = set()
    for _ in range(150):
        text = g.sample(rng, max_depth=7)
        assert check(text, library, names) == [], text
        used |= {n.name for n in walk(parse(text).root) if isinstance(n, Call)}
    assert used == set(PREDICATES)  # every predicate is reachable


def _names_nothing(text: str, bodies) -> bool:
    """Does the program use a colour/role phrase that names no body of this scene? (Valid, but its
    clauses cannot hold there: the grammar offers only phrases that name something.)"""
    from simpatterns.dsl.references import SceneBodies
    from simpatterns.dsl.syntax import Str, walk

    sc = SceneBodies(bodies)
    return any(sc.reference(n.value) is not None and not sc.resolve_names(n.value)
               for n in walk(parse(text).root) if isinstance(n, Str))


def test_specialised_grammar_takes_every_shipped_goal_that_checks(library):
    """The grammar is no narrower than the programs people write: every shipped goal valid in
    its scene, in canonical form (params in any order, first_params before second_params...)."""
    taken = 0
    for scene, make in SCENES.items():
        bodies = make()
        g = GBNF.parse(specialised_grammar(library, bodies))
        for path in GOALS:
            text = path.read_text()
            if check(text, library, [b.name for b in bodies]) or _names_nothing(text, bodies):
                continue
            assert g.accepts(format_program(parse(text))), (scene, path.name)
            taken += 1
    assert taken >= 12


def test_specialised_to_a_subset_and_without_a_scene(library):
    subset = ["collision start", "near collision"]
    g = GBNF.parse(specialised_grammar(library, phyre_scene_bodies("00000:0"), patterns=subset))
    rng = random.Random(2)
    for _ in range(60):
        text = g.sample(rng, max_depth=6)
        named = {label for label in library.signatures() if f'"{label}"' in text}
        assert named <= set(subset), text
    # a mapping library and no scene: body names are free strings, which the checker then skips
    free = GBNF.parse(specialised_grammar(SIGNATURES))
    for _ in range(60):
        text = free.sample(rng, max_depth=6)
        errors = check(text, SIGNATURES, None)
        assert all(e.code == "argument" and ("cannot touch itself" in e.message or "apart from itself" in e.message)
                   for e in errors), text
    with pytest.raises(ValueError, match="not in the library"):
        specialised_lark(library, None, patterns=["no such pattern"])


def test_specialised_grammar_refuses_what_would_not_check(library):
    bodies = phyre_scene_bodies("00000:0")
    g = GBNF.parse(specialised_grammar(library, bodies))
    good = 'AND(EVENT("collision start", {"object_b": "blue ball", "object_a": "green ball"}))'
    assert g.accepts(good)
    for bad in [
        'AND(EVENT("collision begins", {"object_a": "green ball"}))',  # unknown pattern
        'AND(EVENT("collision start", {"object": "green ball"}))',  # a key of another pattern
        'AND(EVENT("collision start", {"object_a": "green ball", "object_a": "red ball"}))',  # twice
        'AND(EVENT("collision start", {"object_a": "purple ball"}))',  # not in the scene
        'AND(TOUCHING("red ball", "red ball"))',  # a body touching itself
        'AND(EVENT("bounce", window=(0.6, 0.2)))',  # a window that ends before it starts
        'AND(COUNT("bounce"))',  # a number, not a condition
        'AND(NEVER(TOUCHING("red ball", "ground", t=0.5)))',  # a state with a time
        'AND(NEARBY_AT("red ball", x=1, y=2, target="ground"))',  # a point and a target
        'EVENT("bounce")',  # the top level is AND(...)
        'AND(EVENT("bounce")) # done',  # no comments
    ]:
        assert not g.accepts(bad), bad
        # each is wrong for the checker too (or, for the last two, a program the grammar keeps out)
        if "# done" not in bad and not bad.startswith("EVENT"):
            assert check(bad, library, [b.name for b in bodies]), bad


def test_body_params_are_what_the_library_declares(library):
    """A param is a body where the checker checks one: the detector's ``BODY_PARAMS`` (through
    ``library.declarations()``), else the contract's default (``object``, ``object_*``)."""
    names = [b.name for b in phyre_scene_bodies("00000:0")]
    g = GBNF.parse(specialised_grammar(library, names))
    assert "surface" in library.declarations()["bounce"].body_params
    assert g.accepts('AND(EVENT("bounce", {"surface": "green ball"}))')
    assert not g.accepts('AND(EVENT("bounce", {"surface": "the floor"}))')
    assert check('AND(EVENT("bounce", {"surface": "the floor"}))', library, names)  # the checker agrees
    # no declarations (a plain mapping): the default; other keys take any short string or number
    free = GBNF.parse(specialised_grammar({"bounce": ["object", "surface"]}, names))
    assert free.accepts('AND(EVENT("bounce", {"surface": "the floor", "object": "green ball"}))')
    assert not free.accepts('AND(EVENT("bounce", {"object": "the floor"}))')


def test_specialised_grammar_bounds_clauses_and_nesting():
    """A small model caught repeating a clause, or opening AND inside AND, must be made to close
    the program: lists hold at most MAX_CLAUSES clauses, AND/OR/NOT nest at most MAX_NESTING deep."""
    from simpatterns.dsl.constrained import MAX_CLAUSES, MAX_NESTING

    spec = GBNF.parse(specialised_grammar(PatternLibrary.builtin(), phyre_scene_bodies("00000:0")))
    clause = 'EVENT("touch start")'
    assert spec.accepts(f"AND({', '.join([clause] * MAX_CLAUSES)})")
    assert not spec.accepts(f"AND({', '.join([clause] * (MAX_CLAUSES + 1))})")
    nested = clause
    for _ in range(MAX_NESTING):
        nested = f"AND({nested}, {clause})"
    assert spec.accepts(f"AND({nested})")
    assert not spec.accepts(f"AND(NOT({nested}))")
    rng = random.Random(1)
    for _ in range(30):  # what it derives stays within both bounds
        text = spec.sample(rng, max_depth=20, max_repeat=MAX_CLAUSES + 4)
        lists = [n for n in walk(parse(text).root) if isinstance(n, Call) and n.name in ("AND", "OR")]
        assert all(len(n.positional) <= MAX_CLAUSES for n in lists), text
