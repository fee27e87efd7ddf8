"""Dump PHYRE's own ball-tier action sampling as test data for `simpatterns.agents.phyre_compat`.

Runs under the reference PHYRE install (Python 3.9), never under simpatterns:

    ~/.pyenv/versions/3.9*/bin/python -m venv /work/phyre-venv
    /work/phyre-venv/bin/pip install phyre==0.2.2
    /work/phyre-venv/bin/python scripts/phyre_actions_reference.py tests/data/phyre_actions/ball.npz

Writes one compressed ``.npz``:

- ``discrete_seed42``, ``discrete_seed1``: ``build_discrete_action_space(1000, seed)`` of a
  ball-tier simulator (42 is PHYRE's simulation-cache seed, 1 its default);
- ``raw``: 2,000 draws of ``sample(valid_only=False, rng=RandomState(0))``;
  ``raw_valid``: PHYRE's action mapper's verdict on each (the ball inside the scene);
  ``raw_ball``: the snapped ball PHYRE simulates for each valid one (x, y, radius in
  pixels; NaN where invalid);
- ``valid_seed7``: 1,000 draws of ``sample(valid_only=True, rng=RandomState(7))``;
- ``dtypes``: the dtypes of ``initial_scenes``, ``images`` and featurized objects.
"""

from __future__ import annotations

import sys

import numpy as np

import phyre
import phyre.action_mappers

TASKS = ["00000:000", "00001:000"]


def main(out: str) -> None:
    sim = phyre.initialize_simulator(TASKS, "ball")
    mapper = phyre.action_mappers.get_action_mapper("ball")
    rng = np.random.RandomState(0)
    raw = np.array([sim.sample(valid_only=False, rng=rng) for _ in range(2000)])
    valid = np.zeros(len(raw), dtype=bool)
    ball = np.full((len(raw), 3), np.nan)
    for i, action in enumerate(raw):
        user_input, valid[i] = mapper.action_to_user_input(action)
        if valid[i]:
            (b,) = user_input.balls
            ball[i] = (b.position.x, b.position.y, b.radius)
    rng = np.random.RandomState(7)
    valid_seed7 = np.array([sim.sample(valid_only=True, rng=rng) for _ in range(1000)])
    solution = sim.build_discrete_action_space(200, seed=3)
    result = next(r for r in (sim.simulate_action(0, a, need_images=True, need_featurized_objects=True)
                              for a in solution) if not r.status.is_invalid())
    dtypes = np.array([str(sim.initial_scenes.dtype), str(result.images.dtype),
                       str(result.featurized_objects.features.dtype),
                       str(sim.initial_featurized_objects[0].features.dtype)])
    np.savez_compressed(
        out,
        discrete_seed42=np.array(sim.build_discrete_action_space(1000, seed=42)),
        discrete_seed1=np.array(sim.build_discrete_action_space(1000, seed=1)),
        raw=raw, raw_valid=valid, raw_ball=ball, valid_seed7=valid_seed7,
        dtypes=dtypes, dtype_names=np.array(["initial_scenes", "images", "features", "initial_features"]),
        phyre_version=np.array(getattr(phyre, "__version__", "0.2.2")),
    )


if __name__ == "__main__":
    main(sys.argv[1])
