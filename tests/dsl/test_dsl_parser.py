"""Parsing: the paper's program as written, the value syntax, and syntax errors
with position, caret, expected tokens and suggestions; the grammar file is
accepted by llguidance as well as Lark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simpatterns.dsl import DSLError, DSLSyntaxError, format_program, grammar_text, parse, predicate_names
from simpatterns.dsl.syntax import Call, Compare, DictLit, Keyword, ListLit, Num, Str, TupleLit, literal_value

ROOT = Path(__file__).resolve().parents[2]

# The program printed in paper §3.3, on one line as in the issue.
PAPER = (
    'AND( EVENT("lever launch", {"object": "green ball"}), AFTER("lever_launch", "collision", '
    'first_params={"object": "green ball"}, second_params={"object_a": "green ball", "object_b": "object X"}), '
    'EVENT("grid cell path", {"object": "green ball", "path": [(5,10), (10,10), (12,5), (14,2)]}), '
    'NEARBY_AT("green ball", x=140, y=10, t=1.0), )'
)


def test_paper_program_parses_as_written():
    p = parse(PAPER)
    root = p.root
    assert isinstance(root, Call) and root.name == "AND" and len(root.arguments) == 4
    ev, after, path, near = root.arguments
    assert ev.name == "EVENT" and ev.arguments[0] == Str("lever launch")
    assert literal_value(ev.arguments[1]) == {"object": "green ball"}
    assert after.name == "AFTER"
    kws = {k.name: literal_value(k.value) for k in after.keywords}
    assert kws == {"first_params": {"object": "green ball"},
                   "second_params": {"object_a": "green ball", "object_b": "object X"}}
    assert literal_value(path.arguments[1])["path"] == [(5, 10), (10, 10), (12, 5), (14, 2)]
    assert near.name == "NEARBY_AT"
    assert {k.name: literal_value(k.value) for k in near.keywords} == {"x": 140, "y": 10, "t": 1.0}


def test_paper_program_with_comments_and_line_breaks_parses():
    text = (ROOT / "examples/goals/paper_verbatim.rwd").read_text()
    assert parse(text) == parse(PAPER)


def test_values_and_layout():
    p = parse("""
        # a comment line
        AND(  # trailing comment
            EVENT('bounce', {"object": "red ball", 'n': -2, "f": 1.5e-3, "e": [], "t": (), "d": {},},),
            COUNT("bounce") >= 2,
        )
    """)
    ev, cmp_ = p.root.arguments
    assert literal_value(ev.arguments[1]) == {"object": "red ball", "n": -2, "f": 1.5e-3, "e": [], "t": (), "d": {}}
    assert isinstance(cmp_, Compare) and cmp_.op == ">=" and cmp_.right == Num(2)


def test_string_escapes():
    p = parse(r'EVENT("a \"quoted\" \\ back\nslash", {"k": "tab\there"})')
    assert p.root.arguments[0].value == 'a "quoted" \\ back\nslash'
    assert literal_value(p.root.arguments[1]) == {"k": "tab\there"}


def test_positions_are_one_based_and_point_at_the_node():
    p = parse('AND(\n  EVENT("bounce"),\n  TOUCHING("a", "b"))')
    touching = p.root.arguments[1]
    assert (touching.span.line, touching.span.column) == (3, 3)
    assert (touching.arguments[1].span.line, touching.arguments[1].span.column) == (3, 17)


def test_integers_stay_integers_and_floats_floats():
    p = parse("COUNT(\"x\") == 3")
    assert isinstance(p.root.right.value, int)
    p = parse("COUNT(\"x\") == 3.0")
    assert isinstance(p.root.right.value, float)


@pytest.mark.parametrize(
    "text, code, line, col, expected_contains",
    [
        ('AND(EVENT("a")', "unexpected-end", 1, 15, '")"'),
        ('AND(EVENT("a") EVENT("b"))', "unexpected-token", 1, 16, '","'),
        ('AND(EVENT("a"),\n    EVNT("b"))', "unexpected-character", 2, 5, "a predicate name"),
        ('EVENT("a", window=(0, 0.2)', "unexpected-end", 1, 27, '")"'),
        ('EVENT("a" "b")', "unexpected-token", 1, 11, '","'),
        ("EVENT(green_ball)", "unexpected-token", 1, 7, '"="'),
    ],
)
def test_syntax_errors_have_position_caret_and_expected(text, code, line, col, expected_contains):
    with pytest.raises(DSLSyntaxError) as info:
        parse(text)
    e = info.value
    assert isinstance(e, DSLError)
    assert (e.code, e.line, e.column) == (code, line, col)
    assert expected_contains in e.expected
    # the caret sits under the reported column of the quoted source line
    src_line, caret_line = e.snippet.splitlines()
    gutter = src_line.index("|") + 2
    assert caret_line.index("^") - gutter == col - 1
    assert f":{line}:{col}:" in str(e) and e.code in str(e)


@pytest.mark.parametrize(
    "text, suggestion",
    [('AND(EVNT("a"))', "EVENT"), ('and(EVENT("a"))', "AND"), ('Event("a")', "EVENT"),
     ('NEARBY("green ball", x=1, y=2)', "NEARBY_AT"), ('TOUCHES("a", "b")', "TOUCHING")],
)
def test_misspelled_predicates_get_suggestions(text, suggestion):
    with pytest.raises(DSLSyntaxError) as info:
        parse(text)
    assert suggestion in info.value.suggestions


def test_unquoted_name_hints_at_strings():
    with pytest.raises(DSLSyntaxError) as info:
        parse("EVENT(bounce)")
    assert '"bounce"' in info.value.hint


def test_missing_comma_hint():
    with pytest.raises(DSLSyntaxError) as info:
        parse('AND(EVENT("a") EVENT("b"))')
    assert "','" in info.value.hint


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n"])
def test_empty_programs(text):
    with pytest.raises(DSLSyntaxError) as info:
        parse(text)
    assert info.value.code == "empty"


def test_out_of_range_number_is_a_syntax_error():
    with pytest.raises(DSLSyntaxError) as info:
        parse('COUNT("a") == 1e999')
    assert info.value.code == "bad-number" and info.value.column == 15


def test_deep_nesting_and_huge_input_are_refused_quickly():
    with pytest.raises(DSLSyntaxError) as info:
        parse("NOT(" * 5000 + 'EVENT("a")' + ")" * 5000)
    assert info.value.code == "too-deep"
    with pytest.raises(DSLSyntaxError) as info:
        parse('EVENT("' + "a" * 200_000 + '")')
    assert info.value.code == "too-long"


def test_long_one_line_programs_show_a_window_around_the_caret():
    text = PAPER.replace("NEARBY_AT", "NEARBY_ATT")
    with pytest.raises(DSLSyntaxError) as info:
        parse(text)
    src_line = info.value.snippet.splitlines()[0]
    assert len(src_line) < 130 and "NEARBY_ATT" in src_line


def test_grammar_text_is_the_lark_file():
    assert grammar_text() == (ROOT / "simpatterns/dsl/reward.lark").read_text()
    assert set(predicate_names()) >= {"AND", "OR", "NOT", "EVENT", "AFTER", "BEFORE", "COUNT", "NEARBY_AT",
                                      "NEVER", "ALWAYS", "FIRST", "LAST", "TOUCHING"}


def test_grammar_keeps_to_the_constrained_decoding_subset():
    g = "\n".join(ln for ln in grammar_text().splitlines() if not ln.lstrip().startswith("//"))
    assert not re.search(r"^[A-Z_]+\.\d+\s*:", g, re.M), "no terminal priorities"
    assert "(?=" not in g and "(?!" not in g and "(?<" not in g, "no lookarounds"
    literals_outside_regex = re.sub(r"/(?:[^/\\\n]|\\.)+/", "", g)
    assert "'" not in literals_outside_regex, "literals are double-quoted"
    for name in re.findall(r"^([A-Za-z_]+)\s*:", g, re.M):
        assert name == name.lower() or name == name.upper()


class _ByteTokenizer:
    """One token per byte plus EOS: lets llguidance match text without a model."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, s):
        return list(s.encode() if isinstance(s, str) else s)


def _llguidance_accepts(text: str) -> bool:
    """llguidance allows %ignore'd text only after the first token (a decoder's
    output starts with the expression), so leading comments are dropped here."""
    text = re.sub(r"\A(\s|#[^\n]*)*", "", text)
    llg = pytest.importorskip("llguidance")
    tok = llg.LLTokenizer(llg.TokenizerWrapper(_ByteTokenizer()))
    m = llg.LLMatcher(tok, llg.LLMatcher.grammar_from_lark(grammar_text()), log_level=0)
    return m.consume_tokens(list(text.encode())) and m.is_accepting() and not m.is_error()


def test_llguidance_validates_the_grammar():
    llg = pytest.importorskip("llguidance")
    is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(llg.LLMatcher.grammar_from_lark(grammar_text()))
    assert not is_error, messages


def test_llguidance_accepts_what_lark_accepts_and_rejects_what_it_rejects():
    good = [PAPER, (ROOT / "examples/goals/paper_verbatim.rwd").read_text(),
            'AND(COUNT("a", {"object_a": "red ball"}) == COUNT("b"), NOT(NEVER(TOUCHING("a", "*"))),)']
    for text in good:
        parse(text)
        assert _llguidance_accepts(text), text
    bad = ['AND(EVNT("a"))', 'AND(EVENT("a")', 'EVENT("a") EVENT("b")', "EVENT(bounce)", 'COUNT("a") == == 1']
    for text in bad:
        with pytest.raises(DSLSyntaxError):
            parse(text)
        assert not _llguidance_accepts(text), text


def test_nodes_compare_by_meaning_not_position():
    a = parse('AND(EVENT("a"),\n\n   EVENT("b"))')
    b = parse('AND(EVENT("a"), EVENT("b"))')
    assert a == b
    assert parse(format_program(a)) == a
    assert isinstance(a.root.arguments[0], Call)
    assert not isinstance(a.root.arguments[0], (Keyword, DictLit, ListLit, TupleLit))
