"""The AST gate: every forbidden construct is named by its reason code; the built-ins pass."""

import pytest

from simpatterns.detectors.contract import Candidate
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.gate import check_candidate, check_candidate_tree
from simpatterns.sandbox.reasons import Rejected

HEAD = '''import numpy as np
PATTERN = "probe"
DESCRIPTION = "x"
DEPENDS = []
PARAMS = ["object"]
'''


def body(code: str) -> str:
    return HEAD + "def detect(trace, events):\n" + "\n".join("    " + ln for ln in code.splitlines()) + "\n"


@pytest.mark.parametrize("code,reason", [
    ("import os\nreturn []", R.FORBIDDEN_IMPORT),
    ("from subprocess import run\nreturn []", R.FORBIDDEN_IMPORT),
    ("import ctypes\nreturn []", R.FORBIDDEN_IMPORT),
    ("from . import x\nreturn []", R.FORBIDDEN_IMPORT),
    ("open('/etc/passwd').read()\nreturn []", R.FORBIDDEN_NAME),
    ("exec('1')\nreturn []", R.FORBIDDEN_NAME),
    ("eval('1')\nreturn []", R.FORBIDDEN_NAME),
    ("compile('1', 'f', 'exec')\nreturn []", R.FORBIDDEN_NAME),
    ("__import__('os')\nreturn []", R.FORBIDDEN_NAME),
    ("globals()\nreturn []", R.FORBIDDEN_NAME),
    ("x = ().__class__.__bases__\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("x = trace._index\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("getattr(trace, '__class__')\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("n = 'x'\ngetattr(trace, n)\nreturn []", R.FORBIDDEN_NAME),
    ("np.save('/tmp/x.npy', trace.position)\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("trace.save('/tmp/x.npz')\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("np.ctypeslib\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    # bypasses found by review: format strings walk attributes, aliased getattr takes computed names
    ('s = "{0.lib._datasource.os.environ}".format(np)\nreturn []', R.FORBIDDEN_ATTRIBUTE),
    ('s = "{0.x}".format_map({"0": np})\nreturn []', R.FORBIDDEN_ATTRIBUTE),
    ('g = getattr\ng(np, "sa" + "ve")("/tmp/x", trace.position)\nreturn []', R.FORBIDDEN_NAME),
    ("f = [getattr][0]\nreturn []", R.FORBIDDEN_NAME),
    ("np.lib.format.open_memmap\nreturn []", R.FORBIDDEN_ATTRIBUTE),
    ("return [", R.SYNTAX_ERROR),
])
def test_forbidden(code, reason):
    with pytest.raises(Rejected) as err:
        check_candidate(body(code), "probe")
    assert err.value.reason.code == reason, err.value.reason
    if reason != R.SYNTAX_ERROR:  # the same verdict on an already parsed Candidate
        with pytest.raises(Rejected) as again:
            check_candidate_tree(Candidate.parse(body(code)), "probe")
        assert again.value.reason == err.value.reason


def test_from_numpy_import_private_rejected():
    with pytest.raises(Rejected) as err:
        check_candidate(HEAD.replace("import numpy as np", "from numpy import _core") +
                        "def detect(trace, events):\n    return []\n", "probe")
    assert err.value.reason.code == R.FORBIDDEN_ATTRIBUTE


def test_contract_checks():
    ok = body("return []")
    info = check_candidate(ok, "probe", available=[])
    assert info.pattern == "probe" and info.declarations.params == ("object",) and info.num_lines == 7
    with pytest.raises(Rejected) as err:
        check_candidate(ok, "bounce")
    assert err.value.reason.code == R.WRONG_PATTERN
    with pytest.raises(Rejected) as err:
        check_candidate(ok.replace("DEPENDS = []", 'DEPENDS = ["collision start"]'), "probe", available=["airborne"])
    assert err.value.reason.code == R.UNKNOWN_DEPENDENCY
    with pytest.raises(Rejected) as err:
        check_candidate(ok.replace('PARAMS = ["object"]\n', ""), "probe")
    assert err.value.reason.code == R.CONTRACT
    with pytest.raises(Rejected) as err:
        check_candidate(HEAD + "x = 1\n" * 1200 + "def detect(trace, events):\n    return []\n", "probe")
    assert err.value.reason.code == R.TOO_LONG


def test_builtin_detectors_pass_the_gate(builtin):
    for label in builtin.order():
        info = check_candidate(builtin.get(label).source, label, builtin.order())
        assert info.pattern == label
        assert info.declarations == builtin.get(label).declarations
        assert check_candidate_tree(Candidate.parse(builtin.get(label).source), label, builtin.order()) == info


def test_malformed_declarations_are_contract_rejections():
    with pytest.raises(Rejected) as err:
        check_candidate(HEAD + "DIRECTED = True\n" + "def detect(trace, events):\n    return []\n", "probe")
    assert err.value.reason.code == R.CONTRACT and "<candidate>:6: DIRECTED = True needs" in err.value.reason.detail
    # the safety filter still comes first, as before: a forbidden import is named even in a broken module
    with pytest.raises(Rejected) as err:
        check_candidate("import os\nDIRECTED = 3\n", "probe")
    assert err.value.reason.code == R.FORBIDDEN_IMPORT
