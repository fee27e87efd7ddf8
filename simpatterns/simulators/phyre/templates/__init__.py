"""The 25 one-ball templates (00000-00024), one module each."""

from __future__ import annotations

import importlib
import pkgutil

from simpatterns.simulators.phyre.template import Template

TEMPLATES: dict[str, Template] = {}
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("t") and _info.name[1:].isdigit():
        _t = importlib.import_module(f"{__name__}.{_info.name}").TEMPLATE
        TEMPLATES[_t.id] = _t


def get_template(template: str | int) -> Template:
    """Template by id: 7, "7" and "00007" all name 00007."""
    key = f"{int(template):05d}" if str(template).strip().isdigit() else str(template)
    if key not in TEMPLATES:
        raise KeyError(f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")
    return TEMPLATES[key]
