"""Gymnasium environments with PHYRE tasks, KnotGym's rope tasks and reward-program rewards.

Importing this module registers ``simpatterns/PhyreOneBall-v0`` (one-step
episodes that end ``terminated``, never ``truncated``: no time limit is
registered), ``simpatterns/PhyreOneBall-v1`` (the same with the defaults RL
libraries expect: actions in [-1, 1], image observations channel-first with
one-hot channels of 255) and ``simpatterns/KnotRope-v0`` (rope manipulation on
MuJoCo, ``max_episode_steps=50``). Gymnasium 1.x does not load plugin entry
points by itself, so either import the module first::

    import gymnasium as gym
    import simpatterns.envs  # noqa: F401  (registers the ids)
    env = gym.make("simpatterns/PhyreOneBall-v0", obs_mode="semantic")

or name the module in the id: ``gym.make("simpatterns.envs:simpatterns/PhyreOneBall-v0")``.
"""

from __future__ import annotations

import gymnasium as gym

ENV_IDS = ("simpatterns/PhyreOneBall-v0", "simpatterns/PhyreOneBall-v1", "simpatterns/KnotRope-v0")
PHYRE_ONE_BALL, PHYRE_ONE_BALL_V1, KNOT_ROPE = ENV_IDS
# v1: the conventions of Stable-Baselines3 and most RL code (symmetric actions, CnnPolicy images)
V1_DEFAULTS = {"action_range": "symmetric", "channels_first": True, "onehot_value": 255}


def register_envs() -> None:
    """Register our ids with Gymnasium (idempotent; the ``gymnasium.envs`` entry point)."""
    # no max_episode_steps for the one-step task: the episode ends by itself (terminated); a
    # TimeLimit of 1 would mark that same step truncated too, which check_env rejects
    if PHYRE_ONE_BALL not in gym.registry:
        gym.register(id=PHYRE_ONE_BALL, entry_point="simpatterns.envs.phyre_env:PhyreOneBallEnv")
    if PHYRE_ONE_BALL_V1 not in gym.registry:
        gym.register(id=PHYRE_ONE_BALL_V1, entry_point="simpatterns.envs.phyre_env:PhyreOneBallEnv",
                     kwargs=dict(V1_DEFAULTS))
    if KNOT_ROPE not in gym.registry:
        gym.register(id=KNOT_ROPE, entry_point="simpatterns.envs.rope_env:KnotRopeEnv", max_episode_steps=50)


def _preload_in_forkserver() -> None:
    """Have multiprocessing's fork server import this module, so workers it starts (SB3's
    ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv`` with ``context="forkserver"``) know
    our ids by their plain names. Effective until the fork server first starts."""
    try:
        from multiprocessing import forkserver

        preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    except (ImportError, AttributeError):  # no fork server on this platform
        return
    if __name__ not in preload:
        forkserver.set_forkserver_preload([*preload, __name__])


register_envs()
_preload_in_forkserver()

_ROPE_OPTIONS = ("RopeTaskOptions", "RopeSimulationOptions", "RopeObservationOptions", "RopeRenderOptions")


def __getattr__(name: str):
    # the env classes import the simulators and the DSL: load them on first use only
    if name in ("PhyreOneBallEnv", "EpisodeScene"):
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


__all__ = ["ENV_IDS", "KNOT_ROPE", "PHYRE_ONE_BALL_V1", "V1_DEFAULTS", "KnotRopeEnv", "ObservationOptions", "PHYRE_ONE_BALL",
           "PhyreOneBallEnv",
           "RenderOptions", "RewardProgramWrapper", "RopeObservationOptions", "RopeRenderOptions",
           "RopeSimulationOptions", "RopeTaskOptions", "SimulationOptions", "EpisodeScene", "TaskOptions", "register_envs"]
