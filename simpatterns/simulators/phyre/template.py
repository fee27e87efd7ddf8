"""Templates: parametrised scene builders and their shipped variant tables.

A template module defines ``TEMPLATE = Template(id, title, goal, grid,
build)``. ``grid`` maps parameter names to the values PHYRE's template
enumerates (or a ``seed`` range for randomly generated layouts); ``build``
receives a `SceneBuilder` plus one value per parameter, places bodies and
calls ``set_goal``; it raises `SkipVariant` for combinations it rejects.

The variants a user sees are the rows of ``data/variants.json``, produced
offline by ``scripts/build_variants.py``: parameter sets that some action
solves and that fewer than 10% of random valid actions solve, each with one
verified solving action.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Iterator

import numpy as np

from simpatterns.simulators.phyre.scene import Scene, SceneBuilder, SkipVariant

VARIANTS_RESOURCE = "variants.json"


@dataclass(frozen=True)
class Template:
    id: str
    title: str
    goal: str
    grid: dict[str, Any]
    build: Callable[..., None]
    notes: str = ""
    tier: str = "BALL"
    extra: dict[str, Any] = field(default_factory=dict)

    def param_sets(self) -> Iterator[dict[str, Any]]:
        """All grid combinations in a fixed order (last key fastest)."""
        keys = list(self.grid)
        values = [list(np.asarray(self.grid[k]).tolist()) for k in keys]
        for combo in itertools.product(*values):
            yield dict(zip(keys, combo))

    @property
    def grid_size(self) -> int:
        n = 1
        for v in self.grid.values():
            n *= len(np.asarray(v))
        return n

    def scene(self, params: dict[str, Any], variant: int | None = None) -> Scene:
        """Build the scene for one parameter set; raises `SkipVariant` if rejected."""
        builder = SceneBuilder()
        missing = set(self.grid) - set(params)
        if missing:
            raise KeyError(f"template {self.id}: missing parameters {sorted(missing)}")
        self.build(builder, **{k: params[k] for k in self.grid})
        scene = builder.build(template=self.id, params=dict(params), description=self.title)
        scene.variant = variant
        return scene

    def valid_param_sets(self) -> Iterator[dict[str, Any]]:
        for params in self.param_sets():
            try:
                self.scene(params)
            except SkipVariant:
                continue
            yield params

    # ------------------------------------------------------------ variants
    def variants(self) -> list[dict[str, Any]]:
        """Shipped variant rows: ``{"params", "solution", "solve_rate", ...}``."""
        return shipped_variants().get(self.id, [])

    @property
    def num_variants(self) -> int:
        return len(self.variants())

    def variant_scene(self, variant: int) -> Scene:
        rows = self.variants()
        if not rows:
            raise LookupError(
                f"template {self.id} has no shipped variants; run scripts/build_variants.py"
            )
        if not 0 <= variant < len(rows):
            raise IndexError(f"template {self.id} has variants 0..{len(rows) - 1}, not {variant}")
        return self.scene(rows[variant]["params"], variant=variant)

    def solution(self, variant: int) -> list[float]:
        return list(self.variants()[variant]["solution"])


@lru_cache(maxsize=1)
def shipped_variants() -> dict[str, list[dict[str, Any]]]:
    path = resources.files("simpatterns.simulators.phyre.data").joinpath(VARIANTS_RESOURCE)
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def skip_if(condition: bool) -> None:
    """Reject the current parameter set (PHYRE's SkipTemplateParams)."""
    if condition:
        raise SkipVariant()
