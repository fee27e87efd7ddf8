"""PHYRE's one-ball world in pymunk: scenes, templates, simulation, rendering."""

from simpatterns.simulators.phyre.physics import (
    DT,
    MAX_STEPS,
    SOLVE_STEPS,
    InvalidAction,
    Rollout,
    action_to_ball,
    action_to_index,
    check_action,
    quantize_action,
    simulate,
)
from simpatterns.simulators.phyre.scene import Scene, SceneBuilder, SkipVariant
from simpatterns.simulators.phyre.template import Template
from simpatterns.simulators.phyre.templates import TEMPLATES, get_template


def load_scene(template: str | int, variant: int) -> Scene:
    """The scene of a shipped variant."""
    return get_template(template).variant_scene(variant)


def simulate_variant(template: str | int, variant: int, action, **kwargs) -> Rollout:
    """Simulate ``action`` on a shipped variant (see `simulate` for keywords)."""
    return simulate(load_scene(template, variant), action, **kwargs)


__all__ = [
    "DT", "MAX_STEPS", "SOLVE_STEPS", "InvalidAction", "Rollout", "Scene", "SceneBuilder",
    "SkipVariant", "TEMPLATES", "Template", "action_to_ball", "action_to_index", "check_action",
    "get_template", "load_scene", "quantize_action", "simulate", "simulate_variant",
]
