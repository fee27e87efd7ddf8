"""``simpatterns env``: list our Gymnasium ids and check them with Gymnasium's checker."""

from __future__ import annotations

import warnings
from typing import Optional

import typer
from simpatterns.cli_support import out as console

PROGRAM_REWARD = "            or RewardProgramWrapper(env, program, reward=score|success|gain)"  # the list fits 80 columns
env_app = typer.Typer(name="env", help="Gymnasium environments: list them, check them.", no_args_is_help=True)


@env_app.command("list")
def list_cmd() -> None:
    """Registered ids with their observation modes, action spaces and rewards."""
    import gymnasium as gym

    import simpatterns.envs as envs
    from simpatterns.envs.observation import OBS_MODES
    from simpatterns.envs.phyre_env import all_tasks

    for env_id in envs.ENV_IDS:
        spec = gym.spec(env_id)
        console.print(f"{env_id}  (max_episode_steps={spec.max_episode_steps})")
        if env_id == envs.KNOT_ROPE:
            from simpatterns.envs.rope_options import OBS_MODES as ROPE_OBS
            from simpatterns.simulators.mujoco.tasks import TASK_NAMES

            console.print(f"  obs_mode: {', '.join(ROPE_OBS)}")
            console.print("  actions:  Box(-1, 1, (6,)) = point (snapped to the nearest bead), force")
            console.print("  reward:   Gauss code matches the goal's (success_reward=, timeout_penalty=)")
            console.print(PROGRAM_REWARD)
            console.print(f"  tasks:    {', '.join(TASK_NAMES)} with crossings=N, split=train|eval")
            continue
        console.print(f"  obs_mode: {', '.join(OBS_MODES)}"
                      + ("; images (C, H, W), one-hot 255" if env_id == envs.PHYRE_ONE_BALL_V1 else ""))
        low = -1 if env_id == envs.PHYRE_ONE_BALL_V1 else 0
        console.print(f"  actions:  Box({low}, 1, (3,)) = red ball (x, y, radius)")
        console.print("            or action_bins=B: Discrete(B**3)")
        console.print("  reward:   PHYRE task success (or success_fn=...)")
        console.print(PROGRAM_REWARD)
        console.print(f"  tasks:    {len(all_tasks())} shipped template variants, or scene='buckets' / a Scene")
    console.print("usage: import simpatterns.envs")
    console.print('       gym.make("simpatterns/PhyreOneBall-v1", obs_mode="semantic")')


@env_app.command("check")
def check_cmd(
    template: Optional[str] = typer.Option(None, "--template", "-t", help="check on this template's variants"),
    max_steps: int = typer.Option(240, "--max-steps", help="physics steps per rollout during the check"),
) -> None:
    """Run gymnasium.utils.env_checker.check_env on ``gym.make(id)`` for every id, observation
    mode and action space (``--template`` and ``--max-steps`` apply to the PHYRE environment)."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import simpatterns.envs as envs
    from simpatterns.envs.observation import OBS_MODES
    from simpatterns.envs.rope_options import OBS_MODES as ROPE_OBS

    checks = []  # (env id, keyword arguments, label)
    for env_id in (envs.PHYRE_ONE_BALL, envs.PHYRE_ONE_BALL_V1):
        for obs_mode in OBS_MODES:
            for bins in (None, 8):
                kw = dict(obs_mode=obs_mode, action_bins=bins, max_steps=max_steps)
                if template is not None:
                    kw["template"] = template
                checks.append((env_id, kw, f"obs_mode={obs_mode}" + (f" action_bins={bins}" if bins else "")))
    for obs_mode in ROPE_OBS:
        checks.append((envs.KNOT_ROPE, dict(obs_mode=obs_mode), f"obs_mode={obs_mode}"))
    failed = False
    for env_id, kw, what in checks:
        label = f"{env_id} {what}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # checked as users make it (through gym.make's wrappers), which the checker notes;
            # v0 is checked on purpose although v1 exists
            for expected in (".*different from the unwrapped", ".*is out of date"):
                warnings.filterwarnings("ignore", message=expected)
            try:
                check_env(gym.make(env_id, **kw))
                problem = "; ".join(str(w.message) for w in caught)
            except Exception as exc:  # report every configuration, then fail
                problem = f"{type(exc).__name__}: {exc}"
        if problem:
            failed = True
            console.print(f"FAIL {label}: {problem}")
        else:
            console.print(f"ok   {label}")
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
