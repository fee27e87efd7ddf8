"""A ``phyre``-shaped package on our simulator, for code written against PHYRE 0.2.2.

Replace ``import phyre`` by ``import simpatterns.agents.phyre_compat as phyre``
and code like this runs on our tasks::

    train, dev, test = phyre.get_fold("ball_within_template", 0)
    simulator = phyre.initialize_simulator(test, "ball")
    evaluator = phyre.Evaluator(test)
    for i in range(len(test)):
        for action in simulator.build_discrete_action_space(max_actions=100):
            sim = simulator.simulate_action(i, action, need_images=False)
            evaluator.maybe_log_attempt(i, sim.status)
            if sim.status.is_solved() or evaluator.get_attempts_for_task(i) >= phyre.MAX_TEST_ATTEMPTS:
                break
    print(evaluator.get_auccess())

The same as PHYRE: the names and signatures (top level and the submodules
``action_mappers``, ``action_simulator``, ``metrics``, ``objects_util``, ``simulation``,
``simulation_cache``, ``vis``), task ids ``TTTTT:VVV``, folds (PHYRE's fold code on
our task list), `Evaluator` and AUCCESS, `SimulationStatus` codes, the action
space and its sampling (``sample``, ``build_discrete_action_space``: PHYRE's actions
for a seed, bit for bit), the ball snapped to whole pixels before it is simulated,
the ``stable`` neighbourhood (the snapped ball moved by half a pixel), dtypes
(``initial_scenes`` int64, ``images`` uint8, features float32), colour codes and
PHYRE's 14 object features. What differs is listed in docs/guide/agents.md ("Code written
for PHYRE"): our tasks and physics, the ball tier only, our renderer, and a
simulation cache built here rather than downloaded.
"""

from __future__ import annotations

from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS, SimulationStatus
from simpatterns.agents.phyre_compat import (
    action_mappers,
    action_simulator,
    metrics,
    objects_util,
    simulation,
    simulation_cache,
    vis,
)
from simpatterns.agents.phyre_compat.action_simulator import ActionSimulator, initialize_simulator
from simpatterns.agents.phyre_compat.metrics import (
    MAIN_EVAL_SETUPS,
    Evaluator,
    eval_setup_to_action_tier,
    get_fold,
    list_eval_setups,
)
from simpatterns.agents.phyre_compat.objects_util import featurized_objects_vector_to_raster
from simpatterns.agents.phyre_compat.simulation import FeaturizedObjects, Simulation
from simpatterns.agents.phyre_compat.simulation_cache import SimulationCache, get_default_100k_cache
from simpatterns.agents.phyre_compat.vis import observations_to_float_rgb, observations_to_uint8_rgb

ACTION_TIERS: tuple[str, ...] = tuple(sorted(action_mappers.MAIN_ACITON_MAPPERS))
SCENE_WIDTH = action_mappers.SCENE_WIDTH
SCENE_HEIGHT = action_mappers.SCENE_HEIGHT
NUM_COLORS = 7

__all__ = [
    "ACTION_TIERS", "ActionSimulator", "Evaluator", "FeaturizedObjects", "MAIN_EVAL_SETUPS", "MAX_TEST_ATTEMPTS",
    "NUM_COLORS", "SCENE_HEIGHT", "SCENE_WIDTH", "Simulation", "SimulationCache", "SimulationStatus",
    "action_mappers", "action_simulator", "eval_setup_to_action_tier", "featurized_objects_vector_to_raster",
    "get_default_100k_cache", "get_fold", "initialize_simulator", "list_eval_setups", "metrics", "objects_util",
    "observations_to_float_rgb",
    "observations_to_uint8_rgb", "simulation", "simulation_cache", "vis",
]
