"""00008: a staircase of five tilted bars above a static jar; the green ball must touch the purple jar.

Step ``i`` (0..4) is a static bar 14% of the scene width long whose
untilted box has its left edge at ``i/5`` of the width and its top at
``0.8 - i/5 * y_span`` of the height; it is then tilted 5 degrees about its
centre. The jar stands on the ground, aligned with the left or right end of
step ``target_index``, between two upright guards as tall as the jar's
scale. Layouts where the jar reaches above the lowest step, the right guard
leaves the scene, or the ball starts right of the jar are skipped.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if

NUM_STEPS = 5
STEP_SCALE = 0.7 / NUM_STEPS  # leaves gaps between the steps


def build(B, ball_x, ball_scale, y_span, target_index, jar_scale, align):
    steps = []
    for i in range(NUM_STEPS):
        step = B.add("bar", scale=STEP_SCALE, dynamic=False, label="step")
        step.set_top(0.8 * B.height - i / NUM_STEPS * y_span * B.height).set_left(i / NUM_STEPS * B.width)
        steps.append(step.set_angle(-5.0))
    jar = B.add("jar", scale=jar_scale, dynamic=False, bottom=0)
    skip_if(jar.top > steps[-1].bottom)
    if align == "right":
        jar.set_right(steps[target_index].right)
    else:
        jar.set_left(steps[target_index].left)
    B.add("bar", scale=jar_scale, dynamic=False, label="left guard", bottom=0, right=jar.left, angle=90.0)
    guard_r = B.add("bar", scale=jar_scale, dynamic=False, label="right guard", bottom=0, left=jar.right, angle=90.0)
    skip_if(guard_r.right > B.width)
    ball = B.add("ball", scale=ball_scale).set_top(B.height).set_center_x(ball_x * B.width)
    skip_if(ball.left > jar.right)
    B.set_goal(ball, jar)


TEMPLATE = Template(
    id="00008",
    title="A staircase of five tilted bars above a static jar between two guards",
    goal="make the green ball touch the purple jar",
    grid=dict(
        ball_x=np.linspace(0.1, 0.9, 10),
        ball_scale=[0.05],
        y_span=np.linspace(0.4, 0.6, 10),
        target_index=np.arange(1, NUM_STEPS),
        jar_scale=np.linspace(0.3, 0.4, 2),
        align=["left", "right"],
    ),
    build=build,
)
