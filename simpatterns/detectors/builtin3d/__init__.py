"""The built-in 3D pattern library: detectors for any 3D trace (MuJoCo) and for ropes.

Load it with ``PatternLibrary.builtin("3d")`` (CLI: ``--library builtin:3d``).
Like ``detectors/builtin``, the detector files are data (detector source
text), not modules of this package: load them through the manifest
(``library.json``, written by ``scripts/build_builtin_manifest.py --world 3d``).
Thresholds are in metres and seconds (MuJoCo's units); "up" is against
``meta["gravity"]`` (+z without gravity).
"""

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent
MANIFEST_PATH = BUILTIN_DIR / "library.json"
