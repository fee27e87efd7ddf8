"""The detector contract's declarations (BODY_PARAMS, DIRECTED, DURATION), `Candidate` (one parse),
and how the library records and verifies them."""

from __future__ import annotations

import ast
import json

import pytest

from simpatterns.annotation import normalize_label
from simpatterns.detectors import contract
from simpatterns.detectors.contract import (
    Candidate,
    Declarations,
    Detector,
    DetectorError,
    count_lines,
    declared_names,
    load_detector,
    source_hash,
    untrusted_detector,
    validate_events,
)
from simpatterns.detectors.library import LibraryError, PatternLibrary
from simpatterns.dsl.matching import normalize_text


def src(params: list[str], extra: str = "", pattern: str = "shove") -> str:
    return (
        "import numpy as np\n"
        f"PATTERN = {pattern!r}\n"
        "DESCRIPTION = 'A body is pushed by another.'\n"
        "DEPENDS = []\n"
        f"PARAMS = {params!r}\n"
        f"{extra}"
        "\n\ndef detect(trace, events):\n"
        "    return []\n"
    )


# ------------------------------------------------------------------ valid and defaults
def test_declared_values_are_read_and_carried_by_the_detector():
    s = src(["object_a", "object_b", "pusher", "frames"],
            'BODY_PARAMS = ["object_a", "object_b", "pusher"]\nDIRECTED = True\nDURATION = "interval"\n')
    cand = Candidate.parse(s, "shove.py")
    d = cand.declarations
    assert d == Declarations("shove", "A body is pushed by another.", (), ("object_a", "object_b", "pusher", "frames"),
                             ("object_a", "object_b", "pusher"), True, "interval")
    det = load_detector(s, "shove.py")
    assert det.declarations == d
    assert (det.body_params, det.directed, det.duration) == (["object_a", "object_b", "pusher"], True, "interval")
    assert declared_names(s)["DIRECTED"] is True


@pytest.mark.parametrize("params, body, duration", [
    (["object", "surface"], ("object",), "instant"),
    (["object_a", "object_b", "objects", "frames"], ("object_a", "object_b"), "interval"),
    (["success"], (), "instant"),
])
def test_defaults(params, body, duration):
    d = Candidate.parse(src(params)).declarations
    assert (d.body_params, d.directed, d.duration) == (body, False, duration)
    # an explicit declaration overrides the default
    d = Candidate.parse(src(params, 'DURATION = "instant"\nBODY_PARAMS = []\n')).declarations
    assert d.duration == "instant" and d.body_params == ()


def test_a_detector_built_in_code_gets_defaults_and_checks():
    det = Detector("Shove_It", " pushed ", ["Collision_Start"], ["object", "pusher", "frames"], "", None)
    assert det.pattern == "shove it" and det.depends == ["collision start"]
    assert det.body_params == ["object"] and det.directed is False and det.duration == "interval"
    with pytest.raises(DetectorError) as err:
        Detector("shove", "d", [], ["object"], "", None, filename="mine.py", directed=True)
    assert err.value.field_name == "DIRECTED" and str(err.value).startswith("mine.py: ")


# ------------------------------------------------------------------ invalid, each named by file:line and field
BAD = [
    ('BODY_PARAMS = "object"\n', "BODY_PARAMS", "must be a list of non-empty strings"),
    ('BODY_PARAMS = ["object", "pusher"]\n', "BODY_PARAMS", "BODY_PARAMS names ['pusher'], which is not in PARAMS"),
    ('BODY_PARAMS = ["object", "object"]\n', "BODY_PARAMS", "repeats"),
    ("BODY_PARAMS = PARAMS[:1]\n", "BODY_PARAMS", "must be a literal"),
    ("DIRECTED = 1\n", "DIRECTED", "must be True or False"),
    ("DIRECTED = True\n", "DIRECTED", "DIRECTED = True needs params object_a and object_b"),
    ('DURATION = "forever"\n', "DURATION", "must be one of 'instant', 'interval'"),
    ('DURATION = "interval"\n', "DURATION", "needs the param 'frames'"),
]


@pytest.mark.parametrize("extra, field, text", BAD, ids=[b[0].strip() for b in BAD])
def test_invalid_declarations_name_file_line_and_field(extra, field, text):
    s = src(["object", "size"], "\n" + extra)  # the declaration sits on line 7
    line = next(i for i, ln in enumerate(s.splitlines(), start=1) if ln.startswith(field))
    assert line == 7
    for check in (lambda: Candidate.parse(s, "shove.py"), lambda: load_detector(s, "shove.py"),
                  lambda: untrusted_detector(s, "shove.py")):
        with pytest.raises(DetectorError) as err:
            check()
        assert err.value.where == "shove.py:7" and err.value.field_name == field
        assert str(err.value).startswith("shove.py:7: ") and text in str(err.value)


def test_required_names_keep_their_errors():
    with pytest.raises(DetectorError) as err:
        Candidate.parse("PATTERN = 'x'\nDESCRIPTION = 'y'\nDEPENDS = []\n\ndef detect(trace, events):\n    return []\n",
                        "x.py")
    assert err.value.field_name == "PARAMS" and "missing module constant(s) PARAMS" in str(err.value)
    with pytest.raises(DetectorError) as err:
        Candidate.parse(src(["object"]).replace("PARAMS = ['object']", "PARAMS = 'object'"), "x.py")
    assert err.value.where == "x.py:5" and err.value.field_name == "PARAMS"
    with pytest.raises(DetectorError) as err:
        Candidate.parse("def detect(trace, events)\n    return []\n", "x.py")
    assert err.value.where.startswith("x.py:1:") and "syntax error" in str(err.value)


# ------------------------------------------------------------------ Candidate: parsed once
def test_candidate_fields():
    s = src(["object"]) + "\n\n   \n"
    cand = Candidate.parse(s, "c.py")
    assert isinstance(cand.tree, ast.Module) and cand.source == s and cand.filename == "c.py"
    assert cand.num_lines == count_lines(s) == 7 and cand.source_hash == source_hash(s)
    assert cand.pattern == "shove"


@pytest.fixture
def parse_counter(monkeypatch):
    calls = []
    real = ast.parse

    def counting(source, *args, **kwargs):
        calls.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    return calls


@pytest.mark.parametrize("load", [load_detector, untrusted_detector, declared_names, Candidate.parse])
def test_each_load_parses_the_source_once(parse_counter, load):
    s = src(["object_a", "object_b"], "DIRECTED = True\n", pattern=f"once {load.__name__}")
    load(s)
    assert len(parse_counter) == 1


def test_a_candidate_is_not_parsed_again(parse_counter):
    cand = Candidate.parse(src(["object"], pattern="reuse"))
    assert len(parse_counter) == 1
    assert load_detector(cand).pattern == untrusted_detector(cand).pattern == "reuse"
    assert len(parse_counter) == 1


# ------------------------------------------------------------------ events of interval patterns
def test_interval_events_need_whole_frames():
    assert validate_events([(3, {"frames": 2})], "p", 10, interval=True) == [(3, {"frames": 2})]
    for bad in (0, 1.5, None, True):
        with pytest.raises(DetectorError, match="interval event needs an integer 'frames' >= 1"):
            validate_events([(3, {"frames": bad})], "p", 10, interval=True)
    assert validate_events([(3, {"frames": 0})], "p", 10) == [(3, {"frames": 0})]  # an instant pattern: a value


# ------------------------------------------------------------------ the library records and verifies them
def _saved(tmp_path, source: str) -> tuple[PatternLibrary, dict]:
    lib = PatternLibrary.from_detectors([load_detector(source)])
    lib.save(tmp_path / "lib")
    return lib, json.loads((tmp_path / "lib" / "library.json").read_text())


SHOVE = src(["object_a", "object_b", "pusher", "frames"],
            'BODY_PARAMS = ["object_a", "object_b", "pusher"]\nDIRECTED = True\nDURATION = "interval"\n')


def test_manifest_records_declarations_and_library_exposes_them(tmp_path):
    lib, manifest = _saved(tmp_path, SHOVE)
    rec = manifest["patterns"][0]
    assert (rec["body_params"], rec["directed"], rec["duration"]) == (["object_a", "object_b", "pusher"], True,
                                                                      "interval")
    back = PatternLibrary.load(tmp_path / "lib")
    assert back.declarations() == lib.declarations() == {"shove": load_detector(SHOVE).declarations}
    assert back.entry("shove").directed is True and list(back.declarations()) == back.order()


@pytest.mark.parametrize("key, value", [("body_params", ["object_a"]), ("directed", False), ("directed", 1),
                                        ("duration", "instant")])
def test_manifest_disagreeing_with_the_file_is_refused(tmp_path, key, value):
    _, manifest = _saved(tmp_path, SHOVE)
    manifest["patterns"][0][key] = value
    (tmp_path / "lib" / "library.json").write_text(json.dumps(manifest))
    with pytest.raises(LibraryError) as err:
        PatternLibrary.load(tmp_path / "lib")
    assert f"field {key!r} is {value!r} but shove.py declares {key.upper()}" in str(err.value)
    assert err.value.patterns == ["shove"]


def test_an_older_manifest_without_declarations_loads_with_the_files(tmp_path):
    _, manifest = _saved(tmp_path, SHOVE)
    for key in ("body_params", "directed", "duration"):
        del manifest["patterns"][0][key]
    (tmp_path / "lib" / "library.json").write_text(json.dumps(manifest))
    lib = PatternLibrary.load(tmp_path / "lib")
    d = lib.declarations()["shove"]
    assert d.directed is True and d.duration == "interval" and d.body_params == ("object_a", "object_b", "pusher")
    assert lib.to_spec()[0][0]["directed"] is True  # and a save writes them again


def test_evolved_declarations_survive_the_trip_through_a_worker_spec():
    lib = PatternLibrary.builtin()
    lib.add(SHOVE, provenance="evolved")
    assert not lib.is_trusted("shove")
    again = PatternLibrary.from_spec(lib.to_spec())
    assert again.declarations()["shove"] == lib.declarations()["shove"] and again.declarations()["shove"].directed


# ------------------------------------------------------------------ built-ins
DIRECTED_BUILTINS = {"sliding contact", "rolling over", "opposing motion", "moving hits stationary", "stack formed",
                     "support relationship", "collision relay"}
INTERVAL_BUILTINS = {"airborne", "bonded pair", "brief tap", "comes to rest", "global rest", "sliding contact",
                     "support relationship"}


def test_builtin_declarations():
    decl = PatternLibrary.builtin().declarations()
    assert {k for k, d in decl.items() if d.directed} == DIRECTED_BUILTINS
    assert {k for k, d in decl.items() if d.duration == "interval"} == INTERVAL_BUILTINS
    context = {"bounce": "surface", "sliding to rolling": "surface", "lose support": "support", "tip over": "hit_by",
               "collision relay": "via", "opposing motion": "lever", "wedged between two bodies": "between",
               "side swap": "left", "vertical order flip": "above"}
    for label, key in context.items():
        assert key in decl[label].body_params, label
    assert set(decl["post collision induced motion"].body_params) == {"object", "object_a", "object_b"}
    for label, d in decl.items():  # names every body-valued param, nothing else
        assert set(d.body_params) <= set(d.params) - {"frames", "speed", "gap", "distance", "path", "directions",
                                                      "magnitude", "speed_before", "speed_after", "from_cell",
                                                      "to_cell", "success"}, label


def test_one_label_normaliser():
    assert contract.normalize_label is normalize_label
    for s in ("Lever_Launch ", "GREEN  ball", "a_b_c", ""):
        assert normalize_text(s) == normalize_label(s)


def test_an_import_anywhere_among_the_statements_is_refused_the_first_as_a_full_walk_finds_it():
    """`check_imports` looks only at statements (expressions cannot hold an import): nested
    in a function, a ``try``'s handler or a ``match`` case it is still found, and with two
    the one `ast.walk` meets first is named."""
    nested = ("def helper(x):\n    try:\n        pass\n    except ValueError:\n        import os\n"
              "    match x:\n        case 1:\n            from subprocess import run\n    return x\n"
              "import json\n")
    source = src([], nested)
    with pytest.raises(DetectorError, match=r"'json' is not allowed") as err:
        load_detector(source, "nested.py")
    line = source.splitlines().index("import json") + 1
    assert f"nested.py:{line}:" in str(err.value)  # the top-level import comes first breadth-first
    with pytest.raises(DetectorError, match=r"'os' is not allowed"):
        untrusted_detector(src([], nested.replace("import json\n", "")), "nested.py")
    for mod in ("math", "numpy.linalg"):
        load_detector(src([], f"def helper(x):\n    import {mod}\n    return x\n"), "ok.py")
