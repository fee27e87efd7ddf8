"""The generic Lark -> GBNF translator, the GBNF parser/validator and the recogniser, against Lark itself."""

from __future__ import annotations

import random

import pytest
from lark import Lark
from lark.exceptions import LarkError

from simpatterns.llm.grammars import GBNF, GrammarError, as_gbnf, is_gbnf, lark_to_gbnf, validate_gbnf

ARITH = r"""
start: sum
?sum: product (ADD product)*
?product: atom (MUL atom)*
?atom: NUMBER | NAME | "(" sum ")" | call
call: NAME "(" [sum ("," sum)*] ")"
ADD: "+" | "-"
MUL: "*" | "/"
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?/
WS: /[ \t\n]+/
%ignore WS
"""

FEATURES = r"""
start: greet~2 item~1..3 KEY? "end"i
greet: "hi" | "HO"
item: LETTERS | DIGIT+
LETTERS: "a".."c"+
DIGIT: /\d/
KEY: /k(ey)?/
%ignore " "
"""


def lark_accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


def mutate(text: str, rng: random.Random) -> str:
    alphabet = "ab c0129()+-*/,_xyzHIOhiokeyEND\n"
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(3)
        if op == 0 and text:
            text = text[:i] + text[i + 1:]
        elif op == 1:
            text = text[:i] + rng.choice(alphabet) + text[i:]
        else:
            text = text[:i]
    return text


@pytest.mark.parametrize("source", [ARITH, FEATURES], ids=["arith", "features"])
def test_translation_accepts_exactly_what_lark_accepts(source):
    """Random sentences of the GBNF and mutations of them: Lark (Earley, dynamic lexer) and
    the GBNF recogniser agree on every one, and the sentences are sentences."""
    gbnf = lark_to_gbnf(source)
    assert GBNF.parse(gbnf.text()).text() == gbnf.text()  # the text round-trips through the parser
    lark = Lark(source, parser="earley", lexer="dynamic")
    rng = random.Random(3)
    agree = accepted = 0
    for _ in range(300):
        s = gbnf.sample(rng, max_depth=6)
        assert lark_accepts(lark, s), s
        m = mutate(s, rng)
        assert gbnf.accepts(m) == lark_accepts(lark, m), repr(m)
        agree += 1
        accepted += gbnf.accepts(m)
    assert 20 < accepted < agree  # the mutations hit both sides


def test_features_translate_to_gbnf_constructs():
    text = lark_to_gbnf(FEATURES).text()
    assert '{2}' in text and '{1,3}' in text  # ~2 and ~1..3
    assert '[Ee] [Nn] [Dd]' in text  # "end"i
    assert "[a-c]+" in text  # "a".."c"+
    g = GBNF.parse(text)
    assert g.accepts("hi HO abc 12 key END") and g.accepts("HOhi9k end")
    assert not g.accepts("hi abc end") and not g.accepts("hi hi d end")


def test_bounded_ignore_caps_whitespace_and_allows_one_token_per_gap():
    g = lark_to_gbnf(ARITH, ignore_bound=3)
    assert g.accepts("f(1,   2)") and not g.accepts("f(1,    2)")
    assert g.accepts("  a + b") and not g.accepts("    a")
    unbounded = lark_to_gbnf(ARITH)
    assert unbounded.accepts("f(1,          2)")
    no_ws = lark_to_gbnf(ARITH, ignore=())
    assert no_ws.accepts("f(1,2)") and not no_ws.accepts("f(1, 2)")


def test_line_comments_run_to_the_end_of_the_line():
    """A comment between tokens takes its newline; the last may end the text (a lexer reads
    comments to the end of the line, so "#x 1" is one comment, not a comment and a number)."""
    src = ARITH + 'COMMENT: /#[^\\n]*/\n%ignore COMMENT\n'
    g = lark_to_gbnf(src)
    lark = Lark(src, parser="lalr")
    for text in ["1 # one\n+ 2", "1 + 2 # end", "#c\n1", "1 #x + 2", "# only a comment"]:
        assert g.accepts(text) == lark_accepts(lark, text), text


def test_names_avoid_what_other_tools_reserve():
    # llguidance renames root to "start" when it converts GBNF; "_" is not allowed in GBNF names
    text = lark_to_gbnf('start: _inner\n_inner: "x" gap\ngap: "y"\n').text()
    rules = [line.split(" ::= ")[0] for line in text.splitlines()]
    assert rules[0] == "root" and "start" not in rules and all("_" not in r for r in rules)
    assert len(set(rules)) == len(rules)


def test_alternatives_are_left_factored():
    # "a b | a c" would make a matcher carry both alternatives through all of a
    text = lark_to_gbnf('start: x | x "," x\nx: "a"\n').text()
    assert 'start-2 ::= x ("," x)?' in text


@pytest.mark.parametrize("bad, message", [
    ('start: "a" undefined_rule\n', "undefined"),
    ('start: /a(?=b)/\n', "not supported"),
    ('start: /^a/\n', "not supported"),
    ('start "a"\n', "invalid Lark grammar"),
])
def test_untranslatable_lark_is_a_clear_error(bad, message):
    with pytest.raises(GrammarError, match=message):
        lark_to_gbnf(bad)


@pytest.mark.parametrize("text, message", [
    ('x ::= "a"\n', "no rule named 'root'"),
    ('root ::= a\n', "undefined rule 'a'"),
    ('root ::= root "a" | "b"\n', "left recursion: root -> root"),
    ('root ::= a\na ::= b? root "x"\nb ::= "y"\n', "left recursion"),
    ('root ::= ("a"?)*\n', "can be empty"),
    ('root ::= "a\n', "line 1, column 10: unterminated string"),
    ('root ::= "\\q"\n', "unknown escape"),
    ('root ::= [ab', "unterminated character class"),
    ('root ::= [z-a]\n', "runs backwards"),
    ('root ::= "a"\nroot ::= "b"\n', "line 2, column 1: rule 'root' is defined twice"),
    ('root ::= "a" {\n', "expected {m}"),
    ('root ::= "a"\n| "b"\n', "line 2"),  # alternatives continue on a new line only inside ( )
])
def test_validation_refuses_what_crashes_llama_cpp(text, message):
    with pytest.raises(GrammarError, match=message):
        validate_gbnf(text)


def test_valid_gbnf_features_parse():
    text = ('root ::= ( item ("," item)* )? [^\\x00-\\x1F] .\n'
            'item ::= [a-zA-Z\\u00e9] "\\"q\\"" [0-9]{1,3} # comment\n')
    g = GBNF.parse(text)
    assert g.accepts('a"q"1,é"q"999xy') and not g.accepts('a"q"1234xy')


def test_is_gbnf_and_as_gbnf():
    assert is_gbnf('root ::= "a"') and not is_gbnf('start: "a"  # x ::= y')
    assert as_gbnf('start: "a"\n') == 'root ::= start-2\nstart-2 ::= "a"\n'
    assert as_gbnf('root ::= "a"\n') == 'root ::= "a"\n'
    with pytest.raises(GrammarError):
        as_gbnf("root ::= b\n")


def test_sampling_always_ends_and_stays_in_the_language():
    g = lark_to_gbnf(ARITH)
    rng = random.Random(0)
    for _ in range(200):
        s = g.sample(rng, max_depth=3)
        assert g.accepts(s) and len(s) < 2000
