"""Regenerate the built-in libraries' library.json from their detector files.

Run after every edit of a built-in detector so the manifest's source hashes,
descriptions, dependencies, params and declarations (body params,
directedness, duration) match the files:

    python scripts/build_builtin_manifest.py                # write simpatterns/detectors/builtin/library.json
    python scripts/build_builtin_manifest.py --world 3d     # simpatterns/detectors/builtin3d/library.json
    python scripts/build_builtin_manifest.py --world all --check  # exit 1 if one is out of date

The PHYRE library's order below is the paper's (Appendix B): raw simulator
events, the 18 guided patterns, the self-discovered ones we kept, then the
hand-written ones the reward DSL's goals read (touches as people count them,
coming to rest). The 3D library lists the raw contact events, the generic 3D
patterns, then the rope patterns. Every file in a folder must be listed here
and every listed file must exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simpatterns.detectors.builtin import BUILTIN_DIR, MANIFEST_PATH
from simpatterns.detectors.builtin3d import BUILTIN_DIR as BUILTIN3D_DIR, MANIFEST_PATH as MANIFEST3D_PATH
from simpatterns.detectors.contract import load_detector, normalize_label, source_hash
from simpatterns.files import atomic_write

GUIDED = "guided"
SELF = "self-discovered"
HAND = "hand-written"

ORDER: list[tuple[str, str]] = [
    ("collision_start.py", GUIDED),
    ("collision_end.py", GUIDED),
    ("task_complete.py", GUIDED),
    ("sliding_contact.py", GUIDED),  # A1
    ("rolling_over.py", GUIDED),  # A2
    ("grid_cell_transition.py", GUIDED),  # A3
    ("velocity_magnitude_change.py", GUIDED),  # A4
    ("opposing_motion.py", GUIDED),  # A5
    ("moving_hits_stationary.py", GUIDED),  # A6
    ("post_collision_induced_motion.py", GUIDED),  # A7
    ("near_collision.py", GUIDED),  # A8
    ("global_rest.py", GUIDED),  # A9
    ("airborne.py", GUIDED),  # A10
    ("brief_tap.py", GUIDED),  # A11
    ("bounce.py", GUIDED),  # A12
    ("stack_formed.py", GUIDED),  # A13
    ("sliding_to_rolling.py", GUIDED),  # A14
    ("tip_over.py", GUIDED),  # A15
    ("lose_support.py", GUIDED),  # A16
    ("support_relationship.py", GUIDED),  # A17
    ("grid_cell_path.py", GUIDED),  # A18
    ("collision_relay.py", SELF),  # A9 (red-to-green relay, any bodies)
    ("wedged_between_two_bodies.py", SELF),  # A10
    ("high_energy_impact.py", SELF),  # A11
    ("bonded_pair.py", SELF),  # A5 (co-moving bonded pair)
    ("side_swap.py", SELF),  # A16 (green/blue side swap, any bodies)
    ("vertical_order_flip.py", SELF),  # A18
    # patterns the reward DSL reads for goals in people's words (issue 14)
    ("touch_start.py", HAND),  # touches counted as people count them (debounced contacts)
    ("touch_end.py", HAND),
    ("comes_to_rest.py", HAND),  # "stopped moving"
]

ORDER_3D: list[tuple[str, str]] = [
    ("contact_start.py", GUIDED),
    ("contact_end.py", GUIDED),
    ("bounce.py", GUIDED),
    ("support.py", GUIDED),
    ("at_rest.py", GUIDED),
    ("airborne.py", GUIDED),
    ("crossing_formed.py", GUIDED),  # rope patterns
    ("crossing_removed.py", GUIDED),
    ("loop_tightened.py", GUIDED),
    ("bead_dragged.py", GUIDED),
]


def worlds() -> dict[str, tuple[Path, Path, list[tuple[str, str]]]]:
    """world -> (folder, manifest, order)."""
    return {"phyre": (BUILTIN_DIR, MANIFEST_PATH, ORDER), "3d": (BUILTIN3D_DIR, MANIFEST3D_PATH, ORDER_3D)}


def build_manifest(folder: Path = BUILTIN_DIR, order: list[tuple[str, str]] = ORDER) -> dict:
    """The manifest dict for the detector files in ``folder``; raises ValueError on any inconsistency."""
    listed = [name for name, _ in order]
    present = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    if sorted(listed) != present:
        raise ValueError(
            f"detector files and ORDER disagree: unlisted {sorted(set(present) - set(listed))}, "
            f"missing {sorted(set(listed) - set(present))}"
        )
    patterns = []
    for name, provenance in order:
        source = (folder / name).read_text()
        det = load_detector(source, str(folder / name))
        if det.pattern.replace(" ", "_") + ".py" != name:
            raise ValueError(f"{name}: file name does not match PATTERN {det.pattern!r}")
        patterns.append({
            "label": det.pattern,
            "file": name,
            "description": det.description,
            "depends": det.depends,
            "params": det.params,
            "body_params": det.body_params,
            "directed": det.directed,
            "duration": det.duration,
            "provenance": provenance,
            "fitness": None,
            "source_hash": source_hash(source),
        })
    deps = {p["label"]: [normalize_label(d) for d in p["depends"]] for p in patterns}
    for p in patterns:
        unknown = [d for d in deps[p["label"]] if d not in deps]
        if unknown:
            raise ValueError(f"{p['file']}: depends on {unknown}, which no built-in detector emits")
    done: set[str] = set()
    while len(done) < len(deps):  # topological sweep: fails only on a dependency cycle
        ready = {label for label, ds in deps.items() if label not in done and set(ds) <= done}
        if not ready:
            raise ValueError(f"dependency cycle among {sorted(set(deps) - done)}")
        done |= ready
    return {"format": "simpatterns-library", "version": 1, "patterns": patterns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether library.json is up to date")
    parser.add_argument("--world", choices=["phyre", "3d", "all"], default="phyre",
                        help="which built-in library (default: the PHYRE one)")
    args = parser.parse_args(argv)
    status = 0
    libraries = worlds()
    for world in list(libraries) if args.world == "all" else [args.world]:
        folder, manifest_path, order = libraries[world]
        text = json.dumps(build_manifest(folder, order), indent=2) + "\n"
        if args.check:
            current = manifest_path.read_text() if manifest_path.exists() else ""
            if current != text:
                print(f"{manifest_path} is out of date; run python scripts/build_builtin_manifest.py", file=sys.stderr)
                status = 1
            else:
                print(f"{manifest_path} is up to date")
            continue
        atomic_write(manifest_path, text)
        print(f"wrote {manifest_path} ({len(order)} patterns)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
