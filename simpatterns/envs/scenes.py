"""Purpose-built scenes for goals that PHYRE's templates do not pose.

`three_buckets` is the scene of the paper's optimisation experiment (§5.2,
Figure 1): a green ball rests at the end of a shelf that a ramp runs down
to; three static jars (the buckets) stand on the ground at increasing
distances. The agent's red ball, dropped on the ramp, rolls down and knocks
the green ball off the shelf: how hard it hits decides which bucket, if
any, the green ball lands in. The jars are named ``black jar 1/2/3`` from
left to right (the builder numbers repeated names left to right).

Measured with uniformly random valid actions (1000 rollouts), the green ball
ends in bucket 1, 2 and 3 about 10%, 3% and 1% of the time, so the three
goals are a ladder of difficulty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from simpatterns.simulators.phyre import MAX_STEPS, SOLVE_STEPS, Scene, SceneBuilder
from simpatterns.trace import Trace

BUCKET_SCENE = "buckets"
BUCKET_NAMES = ("black jar 1", "black jar 2", "black jar 3")
BUCKET_BALL = "green ball"
BUCKET_SUCCESS_PX = 12.0  # a ball inside a jar rests within ~3 px of the jar's centre of mass;
# one lying on the ground beside a jar is >= 16 px away
BUCKET_ORDINALS = ("first", "second", "third")


def three_buckets() -> Scene:
    """The three-bucket scene (see the module docstring). Deterministic."""
    shelf_y, ramp_end, ramp_deg = 150.0, 85.0, 40.0
    B = SceneBuilder()
    ramp_len = ramp_end / math.cos(math.radians(ramp_deg))
    ramp = B.add_bar(ramp_len, dynamic=False, label="ramp", angle=-ramp_deg, right=ramp_end + 2,
                     bottom=shelf_y - 5.12 - 1)
    shelf = B.add("bar", scale=0.14, dynamic=False, label="shelf", left=ramp_end, top=shelf_y)
    ball = B.add_ball(5.5, dynamic=True, right=shelf.right - 2, bottom=shelf_y)
    for spec in (ramp, shelf):
        spec.color = "black"
    ball.color = "green"
    for x in (140.0, 172.0, 204.0):
        B.add("jar", scale=0.12, dynamic=False, center_x=x, bottom=0).color = "black"
    return B.build(
        template=BUCKET_SCENE,
        description="a ramp leads down to a shelf with a green ball; three buckets stand on the ground",
        require_goal=False,
    )


def bucket_goal_text(k: int) -> str:
    """The natural-language goal for bucket ``k`` (1-based)."""
    return f"Get the green ball in the {BUCKET_ORDINALS[k - 1]} bucket"


def bucket_program_text(k: int) -> str:
    """Reward program for bucket ``k``: the red ball reaches the green ball, and
    at the end the green ball is near the jar and touching it.

    The first clause scores how close the red ball ever comes to the green
    ball (it is met whenever they touch: the largest red ball touches at a
    centre distance of 37.5 px), which gives the search a gradient while the
    green ball still sits on its shelf. The same programs ship as
    ``examples/goals/bucket_{first,second,third}.rwd``.
    """
    jar = BUCKET_NAMES[k - 1]
    return (
        f"# {bucket_goal_text(k)} (paper §5.2). Jars are numbered left to right\n"
        f"# (\"{BUCKET_NAMES[0]}\" is the leftmost; scene: simpatterns.envs.scenes.three_buckets).\n"
        "AND(\n"
        "    # the red ball comes within reach of the green ball at some time\n"
        f'    NEARBY_AT("red ball", target="{BUCKET_BALL}", window=(0, 1), radius=40),\n'
        "    # at the end the green ball is at the jar ...\n"
        f'    NEARBY_AT("{BUCKET_BALL}", target="{jar}", t=1.0),\n'
        "    # ... and touching it\n"
        f'    TOUCHING("{BUCKET_BALL}", "{jar}", t=1.0),\n'
        ")\n"
    )


@dataclass(frozen=True)
class FinalDistanceGoal:
    """Success when ``body`` ends within ``threshold`` px of ``target``'s centre
    (the paper's trial criterion for the bucket goals). Picklable."""

    body: str
    target: str
    threshold: float = BUCKET_SUCCESS_PX

    def distance(self, trace: Trace) -> float:
        a, b = trace.body_index(self.body), trace.body_index(self.target)
        return float(np.linalg.norm(trace.position[-1, a] - trace.position[-1, b]))

    def __call__(self, trace: Trace) -> bool:
        return self.distance(trace) < self.threshold

    def describe(self) -> str:
        return f"final distance from {self.body} to {self.target} < {self.threshold:g} px"


def bucket_goal(k: int, threshold: float = BUCKET_SUCCESS_PX) -> FinalDistanceGoal:
    return FinalDistanceGoal(BUCKET_BALL, BUCKET_NAMES[k - 1], threshold)


SCENES: dict[str, Callable[[], Scene]] = {BUCKET_SCENE: three_buckets}


def named_scene(name: str) -> Scene:
    """A purpose-built scene by name (see `SCENES`)."""
    if name not in SCENES:
        raise KeyError(f"unknown scene {name!r}; named scenes are {sorted(SCENES)}")
    return SCENES[name]()


def task_program_text(scene: Scene, max_steps: int = MAX_STEPS) -> str:
    """A dense reward program for a template's own goal, PHYRE's success: the
    goal pair touching for 3 s (`SOLVE_STEPS` steps in a row with a contact)
    within an episode of ``max_steps`` steps (the simulator's, 1000 by default:
    pass the one the rollouts use, since the DSL measures time in fractions of
    the episode).

    One clause, ``TOUCHING(a, b, hold=SOLVE_STEPS / max_steps)``, counts the
    touch as the simulator does (frames in a row with a recorded contact of
    the pair), so the program succeeds exactly when PHYRE does. Its partial
    credit orders failures by how close they came: below 0.5, how near the
    two outlines ever got (``0.5 / (1 + ln(1 + gap / 12.8 px))``); from 0.5,
    how long the longest touch lasted (``0.5 + 0.5 k / 180``).
    """
    if scene.goal is None:
        raise ValueError(f"scene {scene.template or '?'} has no goal pair")
    if not SOLVE_STEPS <= max_steps:
        raise ValueError(f"max_steps {max_steps} is shorter than PHYRE's {SOLVE_STEPS}-step hold: "
                         "no rollout can succeed")
    bodies = scene.trace_bodies()
    a, b = (bodies[i] for i in scene.goal)
    return (
        f"# the template's goal (PHYRE's success): the {a.name} and the {b.name} touch for 3 s\n"
        f'TOUCHING("{a.name}", "{b.name}", hold={SOLVE_STEPS / max_steps:.6g})\n'
    )
