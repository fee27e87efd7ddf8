"""Tasks: one template × one shipped variant, named as PHYRE names its tasks.

A task id is ``"TTTTT:VVV"`` (template, then variant, zero-padded), e.g.
``"00007:042"``, the form PHYRE uses. Our tasks are *our* variants
(`simpatterns.simulators.phyre`: parameter sets searched offline, each with a
verified solution), not PHYRE's task list: ``"00007:042"`` here and in PHYRE
name different scenes, simulated by different engines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from simpatterns.errors import SimpatternsError
from simpatterns.simulators.phyre import TEMPLATES, Scene, get_template

TIER = "ball"
_ID = re.compile(r"^\s*(\d{1,5})\s*:\s*(\d{1,4})\s*$")


class TaskError(SimpatternsError, ValueError):
    """A task id that does not name a shipped variant; the message says which and why."""


def task_id(template: str | int, variant: int) -> str:
    """``("7", 42)`` -> ``"00007:042"``."""
    return f"{int(template):05d}:{int(variant):03d}"


def parse_task_id(tid: str) -> tuple[str, int]:
    """``"00007:042"`` (or ``"7:42"``) -> ``("00007", 42)``; checks the variant is shipped."""
    m = _ID.match(str(tid))
    if m is None:
        raise TaskError(f"task id {tid!r} is not TEMPLATE:VARIANT (e.g. 00007:042)")
    template, variant = f"{int(m.group(1)):05d}", int(m.group(2))
    try:
        n = get_template(template).num_variants
    except KeyError:
        raise TaskError(f"task {tid!r}: unknown template {template}; known: {', '.join(TEMPLATES)}") from None
    if not 0 <= variant < n:
        raise TaskError(f"task {tid!r}: template {template} has variants 0..{n - 1}")
    return template, variant


def normalize_task_id(tid: str) -> str:
    return task_id(*parse_task_id(tid))


def all_task_ids(tier: str = TIER) -> tuple[str, ...]:
    """Every shipped task of the tier, sorted (25 templates × their variants)."""
    if tier.lower() != TIER:
        raise TaskError(f"only the {TIER!r} tier (one red ball) exists here, not {tier!r}")
    return tuple(task_id(t, v) for t in sorted(TEMPLATES) for v in range(TEMPLATES[t].num_variants))


def template_of(tid: str) -> str:
    return tid.split(":", 1)[0]


@dataclass(frozen=True)
class Task:
    """A task: its id, template and variant; the scene is built on demand (and cached)."""

    id: str
    template: str
    variant: int

    @classmethod
    def from_id(cls, tid: str) -> "Task":
        template, variant = parse_task_id(tid)
        return cls(task_id(template, variant), template, variant)

    @property
    def scene(self) -> Scene:
        return _scene(self.template, self.variant)

    @property
    def stored_solution(self) -> list[float]:
        """The variant's verified solving action (from the variant build)."""
        return get_template(self.template).solution(self.variant)


@lru_cache(maxsize=256)
def _scene(template: str, variant: int) -> Scene:
    return get_template(template).variant_scene(variant)
