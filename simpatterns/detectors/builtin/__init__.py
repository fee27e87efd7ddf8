"""The built-in guided pattern library: one detector file per pattern plus ``library.json``.

The detector files are data (detector source text), not Python modules of this
package: load them through the manifest, never import them.
"""

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent
MANIFEST_PATH = BUILTIN_DIR / "library.json"
