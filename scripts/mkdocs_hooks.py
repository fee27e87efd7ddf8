"""MkDocs hook: the site's home page is README.md, its links made relative to docs/.

README.md stays the one source of the front page (GitHub shows it; the site
shows it as index.md); the links in it that start with ``docs/`` point into the
site once that prefix is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[1] / "README.md"


def home_page(readme: str) -> str:
    """README.md's text with ``](docs/...)`` links relative to the docs folder."""
    return re.sub(r"\]\(docs/", "](", readme)


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files
