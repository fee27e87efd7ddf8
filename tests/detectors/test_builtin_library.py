"""The built-in library as a whole: manifest, detector form, conventions, robustness."""

from __future__ import annotations

import ast
import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from simpatterns.annotate.annotator import annotate
from simpatterns.detectors.builtin import BUILTIN_DIR, MANIFEST_PATH
from simpatterns.detectors.contract import load_detector, source_hash, validate_events
from simpatterns.simulators.phyre import SceneBuilder, get_template, simulate

ROOT = Path(__file__).resolve().parents[2]
GUIDED = {
    "sliding contact", "rolling over", "grid cell transition", "velocity magnitude change", "opposing motion",
    "moving hits stationary", "post collision induced motion", "near collision", "global rest", "airborne",
    "brief tap", "bounce", "stack formed", "sliding to rolling", "tip over", "lose support",
    "support relationship", "grid cell path",
}
RAW = {"collision start", "collision end", "task complete"}
SELF_DISCOVERED = {
    "collision relay", "wedged between two bodies", "high energy impact", "bonded pair", "side swap",
    "vertical order flip",
}
HAND_WRITTEN = {"touch start", "touch end", "comes to rest"}  # what goals in people's words read (issue 14)
REQUIRED = {"PATTERN", "DESCRIPTION", "DEPENDS", "PARAMS"}
DECLARED = {"BODY_PARAMS", "DIRECTED", "DURATION"}  # optional in the contract; every built-in sets all three


def build_manifest_module():
    script = ROOT / "scripts" / "build_builtin_manifest.py"
    spec = importlib.util.spec_from_file_location("build_builtin_manifest", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def detector_files() -> list[Path]:
    return sorted(p for p in BUILTIN_DIR.glob("*.py") if p.name != "__init__.py")


def test_manifest_is_up_to_date_and_matches_the_files():
    manifest = json.loads(MANIFEST_PATH.read_text())
    assert manifest == build_manifest_module().build_manifest(), "run python scripts/build_builtin_manifest.py"
    assert manifest["format"] == "simpatterns-library" and manifest["version"] == 1
    files = {p["file"] for p in manifest["patterns"]}
    assert files == {p.name for p in detector_files()}
    for rec in manifest["patterns"]:
        source = (BUILTIN_DIR / rec["file"]).read_text()
        assert rec["source_hash"] == source_hash(source)
        assert rec["fitness"] is None
        assert set(rec) == {"label", "file", "description", "depends", "params", "body_params", "directed", "duration",
                            "provenance", "fitness", "source_hash"}


def test_the_library_covers_the_issue_list_with_provenance(builtin_library):
    labels = set(builtin_library.labels)
    assert labels == GUIDED | RAW | SELF_DISCOVERED | HAND_WRITTEN
    prov = {e.label: e.provenance for e in builtin_library.entries()}
    assert {label for label, p in prov.items() if p == "self-discovered"} == SELF_DISCOVERED
    assert {label for label, p in prov.items() if p == "hand-written"} == HAND_WRITTEN
    assert {label for label, p in prov.items() if p == "guided"} == GUIDED | RAW


def test_manifest_check_mode_reports_a_stale_manifest(tmp_path, monkeypatch, capsys):
    mod = build_manifest_module()
    stale = tmp_path / "library.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(mod, "MANIFEST_PATH", stale)
    assert mod.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert mod.main([]) == 0 and mod.main(["--check"]) == 0
    assert json.loads(stale.read_text()) == json.loads(MANIFEST_PATH.read_text())


def test_manifest_builder_rejects_an_unlisted_detector(tmp_path):
    mod = build_manifest_module()
    for p in detector_files():
        (tmp_path / p.name).write_text(p.read_text())
    (tmp_path / "extra_pattern.py").write_text((BUILTIN_DIR / "bounce.py").read_text())
    with pytest.raises(ValueError, match="unlisted \\['extra_pattern.py'\\]"):
        mod.build_manifest(tmp_path)


@pytest.mark.parametrize("path", detector_files(), ids=lambda p: p.stem)
def test_detector_file_form(path):
    """One pattern per file named after it; only numpy/math; every extra module constant is a
    named threshold with a one-line reason (a comment on its line or the line above)."""
    source = path.read_text()
    det = load_detector(source, str(path))
    assert path.stem == det.pattern.replace(" ", "_")
    assert det.pattern == det.pattern.lower() and det.description.endswith(".")
    tree = ast.parse(source)
    lines = source.splitlines()
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert DECLARED <= assigned, f"{path.name} must declare {sorted(DECLARED - assigned)} explicitly"
    for node in tree.body:
        if isinstance(node, ast.Import):
            assert all(a.name in ("numpy", "math") for a in node.names)
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            names = [e.id for e in target.elts] if isinstance(target, ast.Tuple) else [target.id]
            if set(names) <= REQUIRED | DECLARED:
                continue
            name = ", ".join(names)
            assert name.isupper(), f"{path.name}:{node.lineno}: module-level {name} should be a named constant"
            line, above = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
            assert "#" in line or above.lstrip().startswith("#"), f"{path.name}:{node.lineno}: {name} needs a reason"
    assert not any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree))


def test_builtin_package_does_not_import_the_detectors():
    tree = ast.parse((BUILTIN_DIR / "__init__.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"pathlib"}


def test_every_event_carries_the_declared_params_and_names_real_bodies(builtin_library, scene, scene_names):
    body_keys = {"object", "object_a", "object_b", "surface", "support", "hit_by", "via", "lever", "left", "above"}
    for run in (scene(name) for name in scene_names):
        names = set(run.trace.names)
        for e in run.annotation.events:
            det = builtin_library.get(e.pattern)
            assert set(e.params) == set(det.params), (e.pattern, e.params)
            for key in body_keys & set(e.params):
                assert e.params[key] in names, (e.pattern, key, e.params)
            for name in e.params.get("between", []):
                assert name in names
            for key in det.body_params:  # what the detector declares names bodies does
                value = e.params[key]
                assert all(v in names for v in (value if isinstance(value, list) else [value])), (e.pattern, key)
            assert set(det.body_params) >= body_keys & set(e.params) | ({"between"} & set(e.params))
            if det.duration == "interval":
                assert type(e.params["frames"]) is int and e.params["frames"] >= 1, (e.pattern, e.params)
            if "object_a" in e.params and "object_b" in e.params and e.pattern in SYMMETRIC:
                ia, ib = run.trace.body_index(e.params["object_a"]), run.trace.body_index(e.params["object_b"])
                assert ia < ib, (e.pattern, e.params)


SYMMETRIC = {"collision start", "collision end", "brief tap", "high energy impact", "near collision",
             "bonded pair", "side swap", "vertical order flip"}


def test_library_runs_on_a_phyre_template_trace_without_errors(builtin_library):
    t = get_template("00000")
    sc = t.variant_scene(0) if t.num_variants else t.scene(next(iter(t.valid_param_sets())))
    trace = simulate(sc, [0.5, 0.9, 0.5], max_steps=400, stop_on_success=False).trace
    ann = annotate(trace, builtin_library)
    assert not ann.errors
    assert {e.pattern for e in ann.events} >= {"collision start", "task complete", "airborne", "grid cell transition"}


def test_thinned_traces_annotate_without_numpy_warnings(builtin_library):
    # a stride of 10 keeps no contact row of a touch shorter than 10 frames, while its
    # collision events remain: rolling over took the mean of no normals here
    from simpatterns.simulators.phyre.physics import thin

    scene = get_template("00016").variant_scene(0)
    trace = simulate(scene, [0.395557273104876, 0.9102557662160548, 0.561400767550223], stop_on_success=False).trace
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ann = annotate(thin(trace, 10), builtin_library)
    assert not ann.errors and ann.events


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_tiny_traces_do_not_break_any_detector(builtin_library, steps):
    B = SceneBuilder()
    B.add("ball", scale=0.1, center_x=100, bottom=0).color = "green"
    B.add("box", scale=0.1, center_x=180, bottom=50).color = "gray"
    trace = simulate(B.build(require_goal=False), None, max_steps=steps).trace
    ann = annotate(trace, builtin_library)
    assert not ann.errors
    assert all(0 <= e.frame < trace.num_frames for e in ann.events)


def test_a_scene_without_dynamic_bodies_is_at_rest_and_nothing_else_happens(scene):
    run = scene("empty")
    assert {e.pattern for e in run.annotation.events} == {"global rest", "task complete"}


def test_detectors_do_not_write_to_the_trace(builtin_library, scene):
    """The annotator hands detectors read-only arrays; running them directly on writable arrays must
    leave the trace unchanged too."""
    run = scene("lever")
    before = {n: getattr(run.trace, n).copy() for n in ("position", "velocity", "contact_normal")}
    events: dict[str, list] = {}
    for label in builtin_library.order():
        det = builtin_library.get(label)
        events[label] = validate_events(det.detect(run.trace, {d: events[d] for d in det.depends}), label,
                                        run.trace.num_frames)
    for n, arr in before.items():
        assert np.array_equal(getattr(run.trace, n), arr)
    assert events["opposing motion"]


def test_three_dimensional_traces_do_not_break_any_detector(builtin_library, scene):
    """The library is written for planar (y up) scenes; on a 3-D trace (here a planar rollout lifted
    into 3-D) detectors must still run, and the dimension-free ones still fire."""
    import dataclasses

    flat = scene("relay").trace
    pad = lambda a: np.concatenate([a, np.zeros(a.shape[:-1] + (1,))], axis=-1)  # noqa: E731
    spin = np.zeros(flat.angular_velocity.shape + (3,))
    spin[..., 2] = flat.angular_velocity
    lifted = dataclasses.replace(
        flat, position=pad(flat.position), velocity=pad(flat.velocity), angular_velocity=spin,
        contact_point=pad(flat.contact_point), contact_normal=pad(flat.contact_normal),
    )
    ann = annotate(lifted, builtin_library)
    assert not ann.errors
    fired = {e.pattern for e in ann.events}
    assert {"collision start", "bounce", "moving hits stationary", "collision relay", "airborne"} <= fired
