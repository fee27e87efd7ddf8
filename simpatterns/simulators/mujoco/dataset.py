"""Datasets of MuJoCo traces: jittered rollouts of any MJCF model, and rope episodes.

A dataset directory holds one ``.npz`` trace per rollout and ``index.jsonl``
(one line per trace), like the PHYRE datasets, so ``simpatterns annotate``
and ``simpatterns discover --traces DIR`` read it directly.

`build_model_dataset` varies the model's initial state: every free joint's
body is moved by up to ``jitter`` metres in x and y, turned by a random angle
about z, and given a random horizontal velocity of up to ``speed`` m/s (all
from ``seed``); the rollouts run batched in C (`rollout_traces`).
`build_rope_dataset` plays random KnotGym actions on the rope from the
shipped start configurations of a task.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import mujoco
import numpy as np

from simpatterns.files import atomic_write_lines
from simpatterns.simulators.mujoco.model import load_model
from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld
from simpatterns.simulators.mujoco.tasks import KnotTask, load_configurations
from simpatterns.simulators.mujoco.tracer import rollout_traces

INDEX_NAME = "index.jsonl"


def jittered_states(model: mujoco.MjModel, count: int, rng: np.random.Generator, jitter: float = 0.05,
                    speed: float = 0.2) -> np.ndarray:
    """``count`` full physics states: the model's initial state with every free body
    moved, turned about z and pushed (see the module docstring)."""
    d = mujoco.MjData(model)
    spec = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
    free = [j for j in range(model.njnt) if model.jnt_type[j] == int(mujoco.mjtJoint.mjJNT_FREE)]
    states = np.empty((count, mujoco.mj_stateSize(model, spec)))
    for k in range(count):
        mujoco.mj_resetData(model, d)
        for j in free:
            q, v = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
            d.qpos[q:q + 2] += rng.uniform(-jitter, jitter, 2)
            yaw = rng.uniform(-math.pi, math.pi)
            turn = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
            quat = np.empty(4)
            mujoco.mju_mulQuat(quat, turn, d.qpos[q + 3:q + 7].copy())
            d.qpos[q + 3:q + 7] = quat
            d.qvel[v:v + 2] = rng.uniform(-speed, speed, 2)
        mujoco.mj_getState(model, d, states[k], spec)
    return states


def build_model_dataset(model: Any, out: str | Path, rollouts: int, steps: int, *, stride: int = 10,
                        jitter: float = 0.05, speed: float = 0.2, seed: int = 0, nthread: int = 1,
                        position: str = "xipos") -> list[dict]:
    """Write ``rollouts`` jittered rollouts of ``model`` to ``out``; returns the index rows
    (``position``: centres of mass ``"xipos"`` or frame origins ``"xpos"``)."""
    m = load_model(model)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    states = jittered_states(m, rollouts, rng, jitter, speed)
    name = str(model) if not isinstance(model, mujoco.MjModel) and not str(model).lstrip().startswith("<") else ""
    metas = [{"model": name, "seed": seed, "rollout": k, "jitter": jitter, "speed": speed} for k in range(rollouts)]
    traces = rollout_traces(m, steps, initial_states=states, stride=stride, nthread=nthread, meta=metas,
                            position=position)
    rows = []
    for k, tr in enumerate(traces):
        file = f"rollout_{k:03d}.npz"
        tr.save(out / file)
        rows.append({"file": file, "rollout": k, "frames": tr.num_frames, "contacts": tr.num_contacts,
                     "seed": seed})
    atomic_write_lines(out / INDEX_NAME, [json.dumps(r) for r in rows])
    return rows


def build_rope_dataset(out: str | Path, episodes: int, actions: int, *, task: str = "unknot", crossings: int = 2,
                       split: str = "train", seed: int = 0, stride: int = 8, config: RopeConfig = RopeConfig(),
                       on_done: Callable[[dict], None] | None = None) -> list[dict]:
    """Write ``episodes`` rope episodes of ``actions`` uniformly random KnotGym actions each,
    from the task's start configurations, recorded every ``stride`` physics steps."""
    from simpatterns.simulators.mujoco.knot import diagram

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    configs = load_configurations(split)
    kind = KnotTask.make(task, crossings)
    world = RopeWorld(config)
    rows = []
    for e in range(episodes):
        rng = np.random.default_rng([seed, e])
        start, _ = kind.sample(configs, rng)
        world.set_positions(configs.positions[start])
        world.start_recording(stride, {"simulator": "mujoco rope", "task": task, "start_index": start,
                                       "split": split, "seed": seed, "episode": e})
        for _ in range(actions):
            world.act(rng.uniform(-1.0, 1.0, 6))
        tr = world.trace()
        file = f"rope_{e:03d}.npz"
        tr.save(out / file)
        code = diagram(world.positions()).code
        row = {"file": file, "episode": e, "start_index": start, "start_crossings": int(configs.crossings[start]),
               "end_crossings": code.num_crossings, "end_gauss_code": code.text, "frames": tr.num_frames}
        rows.append(row)
        if on_done is not None:
            on_done(row)
    atomic_write_lines(out / INDEX_NAME, [json.dumps(r) for r in rows])
    return rows
