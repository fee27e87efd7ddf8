"""Gymnasium environments with PHYRE tasks, KnotGym's rope tasks and reward-program rewards.

Importing this module registers ``simpatterns/PhyreOneBall-v0`` (one-step
episodes, ``max_episode_steps=1``) and ``simpatterns/KnotRope-v0`` (rope
manipulation on MuJoCo, ``max_episode_steps=50``). Gymnasium 1.x does not load plugin entry
points by itself, so either import the module first::

    import gymnasium as gym
    import simpatterns.envs  # noqa: F401  (registers the ids)
    env = gym.make("simpatterns/PhyreOneBall-v0", obs_mode="semantic")

or name the module in the id: ``gym.make("simpatterns.envs:simpatterns/PhyreOneBall-v0")``.
"""

from __future__ import annotations

import gymnasium as gym

ENV_IDS = ("simpatterns/PhyreOneBall-v0", "simpatterns/KnotRope-v0")
PHYRE_ONE_BALL, KNOT_ROPE = ENV_IDS


def register_envs() -> None:
    """Register our ids with Gymnasium (idempotent; the ``gymnasium.envs`` entry point)."""
    if PHYRE_ONE_BALL not in gym.registry:
        gym.register(
            id=PHYRE_ONE_BALL,
            entry_point="simpatterns.envs.phyre_env:PhyreOneBallEnv",
            max_episode_steps=1,
        )
    if KNOT_ROPE not in gym.registry:
        gym.register(id=KNOT_ROPE, entry_point="simpatterns.envs.rope_env:KnotRopeEnv", max_episode_steps=50)


register_envs()

_ROPE_OPTIONS = ("RopeTaskOptions", "RopeSimulationOptions", "RopeObservationOptions", "RopeRenderOptions")


def __getattr__(name: str):
    # the env classes import the simulators and the DSL: load them on first use only
    if name in ("PhyreOneBallEnv", "Task"):
        from simpatterns.envs import phyre_env

        return getattr(phyre_env, name)
    if name == "KnotRopeEnv":
        from simpatterns.envs import rope_env

        return rope_env.KnotRopeEnv
    if name in ("TaskOptions", "SimulationOptions", "ObservationOptions", "RenderOptions"):
        from simpatterns.envs import options

        return getattr(options, name)
    if name in _ROPE_OPTIONS:
        from simpatterns.envs import rope_options

        return getattr(rope_options, name)
    if name == "RewardProgramWrapper":
        from simpatterns.envs import reward

        return getattr(reward, name)
    raise AttributeError(f"module 'simpatterns.envs' has no attribute {name!r}")


__all__ = ["ENV_IDS", "KNOT_ROPE", "KnotRopeEnv", "ObservationOptions", "PHYRE_ONE_BALL", "PhyreOneBallEnv",
           "RenderOptions", "RewardProgramWrapper", "RopeObservationOptions", "RopeRenderOptions",
           "RopeSimulationOptions", "RopeTaskOptions", "SimulationOptions", "Task", "TaskOptions", "register_envs"]
