from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simpatterns.detectors.contract import load_detector, source_hash
from simpatterns.detectors.library import LibraryError, PatternLibrary


def src(label: str, depends: list[str] = (), params: list[str] = ("object",)) -> str:
    return (
        f"PATTERN = {label!r}\n"
        f"DESCRIPTION = 'Test pattern {label}.'\n"
        f"DEPENDS = {list(depends)!r}\n"
        f"PARAMS = {list(params)!r}\n\n"
        "def detect(trace, events):\n"
        "    return []\n"
    )


def lib_of(*specs: tuple[str, list[str]]) -> PatternLibrary:
    return PatternLibrary.from_detectors([load_detector(src(label, deps)) for label, deps in specs])


def test_run_order_is_topological_and_stable():
    lib = lib_of(("d", ["b", "c"]), ("c", ["a"]), ("b", ["a"]), ("a", []), ("e", []))
    order = lib.order()
    assert sorted(order) == ["a", "b", "c", "d", "e"]
    for label in order:
        for dep in lib.get(label).depends:
            assert order.index(dep) < order.index(label)
    # independent patterns keep the order they were given in
    assert order.index("c") < order.index("b") and order.index("a") < order.index("e")
    assert lib.labels == order and lib_of(("d", ["b", "c"]), ("c", ["a"]), ("b", ["a"]), ("a", []), ("e", [])).order() == order


def test_missing_dependency_is_reported_by_name():
    with pytest.raises(LibraryError) as err:
        lib_of(("bounce", ["collision start"]), ("roll", []))
    assert "'bounce' depends on 'collision start'" in str(err.value)
    assert err.value.patterns == ["bounce"]


def test_cycles_are_reported_by_name():
    with pytest.raises(LibraryError) as err:
        lib_of(("a", ["b"]), ("b", ["c"]), ("c", ["a"]), ("x", []), ("self", ["self"]))
    msg = str(err.value)
    assert "a -> b -> c -> a" in msg and "self -> self" in msg
    assert err.value.patterns == ["a", "b", "c", "self"]


def test_queries(tmp_path):
    lib = lib_of(("touch", []), ("bounce", ["touch"]), ("double bounce", ["bounce"]))
    assert lib.signatures() == {"touch": ["object"], "bounce": ["object"], "double bounce": ["object"]}
    assert lib.descriptions()["bounce"] == "Test pattern bounce."
    assert lib.dependents("touch") == ["bounce", "double bounce"]
    assert lib.dependents("touch", transitive=False) == ["bounce"]
    assert "Double_Bounce" in lib and lib.get("Double_Bounce").pattern == "double bounce"
    with pytest.raises(KeyError, match="no pattern 'jump'"):
        lib.get("jump")
    assert lib.entry("bounce").provenance == "hand-written"


def test_remove_cascades_to_dependents():
    lib = lib_of(("touch", []), ("bounce", ["touch"]), ("double bounce", ["bounce"]), ("roll", []))
    with pytest.raises(LibraryError, match="'bounce', 'double bounce' depend on it"):
        lib.remove("touch", cascade=False)
    assert len(lib) == 4
    copy = lib.copy()
    assert lib.remove("touch") == ["touch", "bounce", "double bounce"]
    assert lib.labels == ["roll"]
    assert copy.labels == ["touch", "bounce", "double bounce", "roll"]  # the copy is independent
    assert copy.remove("double bounce", cascade=False) == ["double bounce"]


def test_add_checks_labels_and_graph():
    lib = lib_of(("touch", []), ("bounce", ["touch"]))
    with pytest.raises(LibraryError, match="already in the library"):
        lib.add(src("bounce", ["touch"]), provenance="evolved")
    with pytest.raises(LibraryError, match="'slide' depends on 'friction'"):
        lib.add(src("slide", ["friction"]), provenance="evolved")
    assert "slide" not in lib
    # replacing 'touch' with a version that reads 'bounce' would close a cycle: refused, old kept
    with pytest.raises(LibraryError, match="cycle"):
        lib.add(src("touch", ["bounce"]), provenance="evolved", replace=True)
    assert lib.get("touch").depends == [] and lib.entry("touch").provenance == "hand-written"
    lib.add(src("roll", ["touch"]), provenance="evolved", fitness=0.42)
    assert lib.entry("roll").fitness == 0.42 and lib.entry("roll").provenance == "evolved"
    with pytest.raises(LibraryError, match="provenance 'magic'"):
        lib.add(src("fly"), provenance="magic")


def test_save_load_roundtrip(tmp_path):
    lib = lib_of(("touch", []), ("bounce", ["touch"]))
    lib.add(src("roll", ["touch"]), provenance="evolved", fitness=0.5)
    lib.save(tmp_path / "lib")
    manifest = json.loads((tmp_path / "lib" / "library.json").read_text())
    assert manifest["format"] == "simpatterns-library" and manifest["version"] == 1
    for rec in manifest["patterns"]:
        assert rec["source_hash"] == source_hash((tmp_path / "lib" / rec["file"]).read_text())
    back = PatternLibrary.load(tmp_path / "lib")
    assert back.labels == lib.labels
    for label in lib.labels:
        assert back.entry(label).to_json() == lib.entry(label).to_json()
        assert back.get(label).source == lib.get(label).source
    assert PatternLibrary.load(tmp_path / "lib" / "library.json").labels == lib.labels


def test_save_replaces_atomically(tmp_path):
    target = tmp_path / "lib"
    lib_of(("touch", []), ("bounce", ["touch"])).save(target)
    lib_of(("roll", [])).save(target)
    assert PatternLibrary.load(target).labels == ["roll"]
    assert sorted(p.name for p in target.iterdir()) == ["library.json", "roll.py"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib"]  # no temp or backup dirs left
    other = tmp_path / "not_a_library"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(LibraryError, match="not a pattern library"):
        lib_of(("roll", [])).save(other)
    assert (other / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "not_a_library"]


def _saved(tmp_path: Path) -> tuple[Path, dict]:
    lib_of(("touch", []), ("bounce", ["touch"])).save(tmp_path / "lib")
    return tmp_path / "lib", json.loads((tmp_path / "lib" / "library.json").read_text())


def _write(path: Path, manifest: dict) -> None:
    (path / "library.json").write_text(json.dumps(manifest))


def test_load_reports_edited_file(tmp_path):
    path, _ = _saved(tmp_path)
    (path / "bounce.py").write_text(src("bounce", ["touch"]) + "# edited\n")
    with pytest.raises(LibraryError, match=r"patterns\[1\] \('bounce', file 'bounce.py'\): field 'source_hash'"):
        PatternLibrary.load(path)


def test_load_reports_missing_file_and_label_mismatch(tmp_path):
    path, manifest = _saved(tmp_path)
    (path / "bounce.py").unlink()
    with pytest.raises(LibraryError, match=r"field 'file': cannot read 'bounce.py'"):
        PatternLibrary.load(path)
    path, manifest = _saved(tmp_path / "again")
    manifest["patterns"][0]["label"] = "contact"
    _write(path, manifest)
    with pytest.raises(LibraryError, match=r"field 'label' is 'contact' but touch.py declares PATTERN = 'touch'"):
        PatternLibrary.load(path)


def test_load_reports_bad_fields(tmp_path):
    path, manifest = _saved(tmp_path)
    manifest["patterns"][1]["depends"] = []
    _write(path, manifest)
    with pytest.raises(LibraryError, match=r"field 'depends' is \[\] but bounce.py declares DEPENDS"):
        PatternLibrary.load(path)
    manifest["patterns"][1]["depends"] = ["touch"]
    manifest["patterns"][1]["provenance"] = "found"
    _write(path, manifest)
    with pytest.raises(LibraryError, match="provenance 'found' is not one of"):
        PatternLibrary.load(path)
    (path / "library.json").write_text('{"format": "simpatterns-library",\n "version": 1,, }')
    with pytest.raises(LibraryError, match=r"library.json:2:\d+: manifest is not JSON"):
        PatternLibrary.load(path)
    (path / "library.json").write_text('{"format": "other", "version": 1, "patterns": []}')
    with pytest.raises(LibraryError, match="field 'format'"):
        PatternLibrary.load(path)


def test_manifest_missing_dependency_names_pattern(tmp_path):
    path, manifest = _saved(tmp_path)
    del manifest["patterns"][0]
    _write(path, manifest)
    with pytest.raises(LibraryError, match="'bounce' depends on 'touch'"):
        PatternLibrary.load(path)


def test_spec_roundtrip_and_subset():
    lib = lib_of(("touch", []), ("bounce", ["touch"]), ("roll", []))
    back = PatternLibrary.from_spec(lib.to_spec())
    assert back.labels == lib.labels and back.signatures() == lib.signatures()
    assert lib.subset(["bounce"]).labels == ["touch", "bounce"]


def test_builtin_library_loads_and_is_ordered():
    lib = PatternLibrary.builtin()
    order = lib.order()
    assert len(order) >= 10
    for label in order:
        entry = lib.entry(label)
        assert entry.provenance in ("guided", "self-discovered", "hand-written", "evolved")
        for dep in entry.depends:
            assert order.index(dep) < order.index(label)
    for raw in ("collision start", "collision end", "task complete"):
        assert raw in lib


def test_cli_library_list_and_show(tmp_path):
    from simpatterns.cli import app

    lib = lib_of(("touch", []), ("bounce", ["touch"]))
    lib.save(tmp_path / "lib")
    runner = CliRunner()
    res = runner.invoke(app, ["library", "list", "--library", str(tmp_path / "lib")])
    assert res.exit_code == 0, res.output
    assert "touch" in res.output and "bounce" in res.output
    res = runner.invoke(app, ["library", "show", "bounce", "--library", str(tmp_path / "lib")])
    assert res.exit_code == 0, res.output
    assert "Test pattern bounce." in res.output and "def detect" in res.output
    res = runner.invoke(app, ["library", "show", "jump", "--library", str(tmp_path / "lib")])
    assert res.exit_code == 2 and "no pattern 'jump'" in " ".join(res.output.split())
    res = runner.invoke(app, ["library", "list", "--library", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no such library directory" in " ".join(res.output.split())
