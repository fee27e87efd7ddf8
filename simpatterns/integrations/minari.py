"""PHYRE-environment rollouts as a Minari dataset (``pip install 'simpatterns[minari]'``).

`export_minari("simpatterns/PhyreOneBall-v0", episodes=N)` plays N episodes with
uniformly random actions (seeded) and writes a
dataset that ``minari.load_dataset(dataset_id)`` opens. Each episode holds the
observations, actions, ``rewards`` (the environment's own sparse reward: 1.0 on
PHYRE success), terminations and truncations, and small ``infos`` per step:

- ``program_reward``: the reward program's score in [0, 1] on the rollout (the
  ``--goal`` program, or the task's own goal as a dense program,
  `envs.scenes.task_program_text`); 0 at reset and after an invalid action;
- ``program_success``, ``task_success``, ``valid`` (0 after an action PHYRE
  rejects), ``template``, ``variant`` and ``num_frames``.

The recorded environment is the plain registered one (its spec, keyword
arguments included), so ``dataset.recover_environment()`` builds it again.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from simpatterns.errors import SimpatternsError

DEFAULT_ENV = "simpatterns/PhyreOneBall-v0"
INFO_KEYS = ("program_reward", "program_success", "task_success", "valid", "template", "variant", "num_frames")


class MinariExportError(SimpatternsError, ValueError):
    """The dataset cannot be written; the message says why."""


def _minari() -> Any:
    try:
        import minari
    except ImportError:
        raise MinariExportError("--format minari needs Minari: pip install 'simpatterns[minari]'") from None
    return minari


def default_dataset_id(env_id: str, policy: str = "random") -> str:
    """``simpatterns/PhyreOneBall-v0`` -> ``simpatterns/PhyreOneBall/random-v0`` (Minari's
    ``namespace/env_name/dataset_name-vN``)."""
    namespace, _, name = env_id.rpartition("/")
    env_name = name.rsplit("-v", 1)[0]
    return f"{namespace or 'simpatterns'}/{env_name}/{policy}-v0"


class ProgramRewards:
    """Scores each step's rollout with a reward program: ``program`` (text or `RewardProgram`) for
    every episode, or each episode's own task goal when None."""

    def __init__(self, program: Any = None):
        self.program = program
        self._own: dict[tuple[int, int], Any] = {}

    def _for(self, env: gym.Env) -> Any:
        from simpatterns.dsl import RewardProgram

        base = env.unwrapped
        if self.program is not None:
            if not isinstance(self.program, RewardProgram):
                self.program = RewardProgram.coerce(self.program, base.library)
            return self.program
        from simpatterns.envs.scenes import task_program_text
        from simpatterns.simulators.phyre import MAX_STEPS

        key = (int(base.task.template), int(base.task.variant))
        if key not in self._own:
            text = task_program_text(base.scene, int(base.sim_kwargs.get("max_steps", MAX_STEPS)))
            self._own[key] = RewardProgram.coerce(text, base.library)
        return self._own[key]

    def infos(self, env: gym.Env, info: dict[str, Any], stepped: bool) -> dict[str, Any]:
        """The small infos of one step (or of the reset when not ``stepped``)."""
        trace = info.get("trace") if stepped else None
        score, success = 0.0, False
        if trace is not None:
            result = self._for(env).evaluate(None, trace)
            score, success = float(result.score), bool(result.success)
        task = env.unwrapped.task
        return {
            "program_reward": np.float64(score),
            "program_success": np.int64(success),
            "task_success": np.int64(bool(info.get("task_success", False))),
            "valid": np.int64(not stepped or not info.get("invalid_reason")),
            "template": np.int64(int(task.template)),
            "variant": np.int64(int(task.variant)),
            "num_frames": np.int64(int(info.get("num_frames", 0))),
        }


def play(env: gym.Env, episodes: int, seed: int, rewards: ProgramRewards) -> list[Any]:
    """``episodes`` episodes of seeded uniformly random actions as Minari `EpisodeBuffer`s (built
    directly: Minari's `DataCollector` needs jax only to append to its buffers)."""
    from minari.data_collector import EpisodeBuffer

    env.action_space.seed(seed)
    out = []
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        observations, actions, rews, terms, truncs = [obs], [], [], [], []
        infos = {key: [value] for key, value in rewards.infos(env, info, stepped=False).items()}
        done = False
        while not done:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs)
            actions.append(action)
            rews.append(float(reward))
            terms.append(bool(terminated))
            truncs.append(bool(truncated))
            for key, value in rewards.infos(env, info, stepped=True).items():
                infos[key].append(value)
            done = terminated or truncated
        out.append(EpisodeBuffer(id=k, seed=seed + k, observations=observations, actions=actions, rewards=rews,
                                 terminations=terms, truncations=truncs, infos=infos))
    return out


def export_minari(env_id: str = DEFAULT_ENV, dataset_id: str | None = None, *, episodes: int = 10, seed: int = 0,
                  goal: str | os.PathLike | None = None, env_kwargs: dict[str, Any] | None = None,
                  data_path: str | os.PathLike | None = None, author: str | None = None) -> dict[str, Any]:
    """Record ``episodes`` random-action episodes of ``env_id`` (one of our PHYRE environments) as
    the Minari dataset ``dataset_id`` (default `default_dataset_id`). ``goal``: a ``.rwd`` file
    whose score is recorded as ``program_reward`` (default: each task's own goal);
    ``data_path``: Minari's datasets root (default ``MINARI_DATASETS_PATH``). Returns the
    dataset id, its path, episodes and steps."""
    minari = _minari()
    import simpatterns.envs  # noqa: F401  (registers our ids)

    if episodes < 1:
        raise MinariExportError("episodes must be >= 1")
    try:
        env = gym.make(env_id, **(env_kwargs or {}))
    except (gym.error.Error, TypeError, ValueError) as exc:  # an unknown id, a bad keyword argument
        raise MinariExportError(f"environment {env_id!r}: {exc}") from None
    if not hasattr(env.unwrapped, "scene") or not hasattr(env.unwrapped, "info_trace"):
        env.close()
        raise MinariExportError(f"environment {env_id!r}: not one of simpatterns' PHYRE environments "
                                "(simpatterns/PhyreOneBall-v0 or -v1)")
    program = None
    if goal is not None:
        from simpatterns.dsl import RewardProgram
        from simpatterns.dsl.errors import DSLError, DSLErrors

        try:
            program = RewardProgram.coerce(Path(goal).read_text(encoding="utf-8"), env.unwrapped.library)
        except OSError as exc:
            env.close()
            raise MinariExportError(f"{goal}: cannot read the goal program ({exc.strerror or exc})") from None
        except (DSLError, DSLErrors) as exc:
            env.close()
            raise MinariExportError(f"{goal}: {' '.join(str(exc).split())}") from None
    env.unwrapped.info_trace = True  # the program reward reads the rollout; not part of the recorded spec
    dataset_id = dataset_id or default_dataset_id(env_id)
    old_root = os.environ.get("MINARI_DATASETS_PATH")
    if data_path is not None:
        os.environ["MINARI_DATASETS_PATH"] = str(Path(data_path).resolve())
    try:
        buffers = play(env, episodes, seed, ProgramRewards(program))
        program_name = f"reward program {Path(goal).name}" if goal else "task's own goal as a dense reward program"
        description = (f"{episodes} episodes of {env_id} with uniformly random actions, seeds {seed}.."
                       f"{seed + episodes - 1}. rewards: the environment's sparse reward; infos['program_reward']: "
                       f"the {program_name} (simpatterns export --format minari).")
        try:
            with warnings.catch_warnings():  # Minari's advice to give an e-mail and an evaluation env
                warnings.simplefilter("ignore", UserWarning)
                dataset = minari.create_dataset_from_buffers(
                    dataset_id=dataset_id, buffer=buffers, env=env, data_format="arrow",  # hdf5 would need h5py
                    algorithm_name="uniformly random actions (seeded)", author=author or "simpatterns",
                    description=description, requirements=["simpatterns"])
        except ValueError as exc:  # a bad id, or one that exists already
            raise MinariExportError(f"dataset {dataset_id!r}: {exc}") from None
        steps = sum(len(b) for b in buffers)
        return {"dataset_id": dataset_id, "path": str(Path(dataset.spec.data_path).parent), "episodes": episodes,
                "steps": steps}
    finally:
        env.close()
        if data_path is not None:
            if old_root is None:
                os.environ.pop("MINARI_DATASETS_PATH", None)
            else:
                os.environ["MINARI_DATASETS_PATH"] = old_root


__all__ = ["DEFAULT_ENV", "INFO_KEYS", "MinariExportError", "ProgramRewards", "default_dataset_id", "export_minari"]
