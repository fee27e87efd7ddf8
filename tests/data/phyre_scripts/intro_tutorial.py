import phyre

# Written for PHYRE 0.2.2 in the style of its intro tutorial and agents; nothing here knows
# about simpatterns. tests/agents/test_phyre_compat.py runs it with only the line above
# changed. Output lines are "name: values" so a test can check them on any task list.
import os
import random
import sys
import tempfile

import numpy as np

random.seed(0)
eval_setup = "ball_cross_template"
fold_id = 0
train_tasks, dev_tasks, test_tasks = phyre.get_fold(eval_setup, fold_id)
print("folds:", len(train_tasks) > len(dev_tasks) > 0, len(test_tasks) > 0,
      not set(train_tasks) & set(test_tasks))
print("setups:", eval_setup in phyre.list_eval_setups(), eval_setup in phyre.MAIN_EVAL_SETUPS)
action_tier = phyre.eval_setup_to_action_tier(eval_setup)
print("tier:", action_tier, action_tier in phyre.ACTION_TIERS)

tasks = dev_tasks[:3]
simulator = phyre.initialize_simulator(tasks, action_tier)
actions = simulator.build_discrete_action_space(max_actions=100)
print("actions:", len(actions), simulator.action_space_dim, [round(v, 6) for v in actions[0].tolist()])
print("task ids:", list(simulator.task_ids) == list(tasks))

initial_scene = simulator.initial_scenes[0]
print("initial scene:", initial_scene.shape, initial_scene.dtype, int(initial_scene.max()) < phyre.NUM_COLORS)
rgb = phyre.observations_to_float_rgb(initial_scene)
print("rgb:", rgb.shape, rgb.dtype, float(rgb.min()) >= 0.0, float(rgb.max()) <= 1.0)
objects = simulator.initial_featurized_objects[0]
print("initial objects:", objects.features.shape[0], objects.features.shape[2], objects.features.dtype,
      objects.num_user_inputs)

task_index = 0
for action in actions:
    simulation = simulator.simulate_action(task_index, action, need_images=True, need_featurized_objects=True)
    if not simulation.status.is_invalid():
        break
print("status:", simulation.status.is_solved() or simulation.status.is_not_solved())
print("images:", simulation.images.ndim, simulation.images.shape[1:], simulation.images.dtype)
frames = [phyre.vis.observations_to_float_rgb(image) for image in simulation.images]
print("frames:", len(frames) == len(simulation.images), frames[0].shape)
fo = simulation.featurized_objects
print("objects:", fo.features.shape[0] == len(simulation.images), fo.num_user_inputs,
      fo.num_scene_objects == fo.num_objects - 1, fo.colors[-1], fo.shapes[-1])
print("states:", fo.states.shape == fo.features.shape[:2] + (3,), fo.diameters.shape == (fo.num_objects,))
status, images = simulator.simulate_single(task_index, action, need_images=False)
print("single:", status == simulation.status, images is None)

rng = np.random.RandomState(3)
raw = [simulator.sample(valid_only=False, rng=rng) for _ in range(60)]
outside = [a for a in raw if not (a[2] * 30 + 2 <= a[0] * 255 <= 256 - (a[2] * 30 + 2)
                                  and a[2] * 30 + 2 <= a[1] * 255 <= 256 - (a[2] * 30 + 2))]
print("outside invalid:", len(outside) > 0,
      all(simulator.simulate_action(0, a, need_images=False).status.is_invalid() for a in outside))
valid = [simulator.sample(rng=rng) for _ in range(60)]
print("valid inside:", all(a[2] * 30 + 2 <= a[0] * 255 <= 256 - (a[2] * 30 + 2) for a in valid))
print("bad action:", simulator.simulate_action(0, [0.5, 0.5, 1.5], need_images=False).status.is_invalid())

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "rollout.gif")
    phyre.vis.save_observation_series_to_gif([simulation.images, simulation.images[:1]], path,
                                             solved_states=[simulation.status.is_solved(), False])
    print("gif:", os.path.getsize(path) > 0)

evaluator = phyre.Evaluator(tasks)
for task_index in range(len(tasks)):
    while evaluator.get_attempts_for_task(task_index) < 10:
        action = random.choice(actions)
        status = simulator.simulate_action(task_index, action, need_images=False).status
        evaluator.maybe_log_attempt(task_index, status)
auccess = evaluator.get_auccess()
print("evaluator:", len(evaluator), 0.0 <= auccess <= 1.0, evaluator.task_ids == tuple(tasks))
print("metrics:", "independent_solved_by_aucs" in evaluator.compute_all_metrics())
sys.exit(0)
