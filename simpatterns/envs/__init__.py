"""Gymnasium environments with PHYRE tasks and reward-program rewards.

Importing this module registers ``simpatterns/PhyreOneBall-v0`` (one-step
episodes, ``max_episode_steps=1``). Gymnasium 1.x does not load plugin entry
points by itself, so either import the module first::

    import gymnasium as gym
    import simpatterns.envs  # noqa: F401  (registers the ids)
    env = gym.make("simpatterns/PhyreOneBall-v0", obs_mode="semantic")

or name the module in the id: ``gym.make("simpatterns.envs:simpatterns/PhyreOneBall-v0")``.
"""

from __future__ import annotations

import gymnasium as gym

ENV_IDS = ("simpatterns/PhyreOneBall-v0",)
PHYRE_ONE_BALL = ENV_IDS[0]


def register_envs() -> None:
    """Register our ids with Gymnasium (idempotent; the ``gymnasium.envs`` entry point)."""
    if PHYRE_ONE_BALL not in gym.registry:
        gym.register(
            id=PHYRE_ONE_BALL,
            entry_point="simpatterns.envs.phyre_env:PhyreOneBallEnv",
            max_episode_steps=1,
        )


register_envs()


def __getattr__(name: str):
    # the env classes import the simulator and the DSL: load them on first use only
    if name in ("PhyreOneBallEnv", "Task"):
        from simpatterns.envs import phyre_env

        return getattr(phyre_env, name)
    if name in ("TaskOptions", "SimulationOptions", "ObservationOptions", "RenderOptions"):
        from simpatterns.envs import options

        return getattr(options, name)
    if name == "RewardProgramWrapper":
        from simpatterns.envs import reward

        return getattr(reward, name)
    raise AttributeError(f"module 'simpatterns.envs' has no attribute {name!r}")


__all__ = ["ENV_IDS", "PHYRE_ONE_BALL", "ObservationOptions", "PhyreOneBallEnv", "RenderOptions",
           "RewardProgramWrapper", "SimulationOptions", "Task", "TaskOptions", "register_envs"]
