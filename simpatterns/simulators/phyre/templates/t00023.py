"""00023: a gray lever rests on a big gray ball on a left step, carrying the green
ball; on a right step stands a jar holding the blue ball; the green ball must
touch the blue ball.

Layout (PHYRE 00023): the left step (0.3) starts at ``left_side`` of the
width; the big pivot ball (0.15) sits on its left end and the lever (0.4)
lies on the ball from x = 5 px, with the green ball (0.05) on the lever at
0.02 of the width. A static ball (0.1) hangs from the ceiling above the
pivot ball. The right step (0.3, tilted ``jar_angle`` degrees) ends at the
right wall; the jar (``jar_scale``) stands on it ending at ``jar_right`` of
the width, with a ball (0.05 + jar/8) 10 px above its bottom. The lower
step is at ``step_base`` of the height and the other step ``step_diff``
higher (positive: the right one).

Skipped as in PHYRE: small jars (scale < 0.19) with step differences over
0.19; large jars (> 0.26) with differences under 0.19 or the left step
more than 0.19 higher.
"""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, step_diff, step_base, jar_scale, jar_right, jar_angle, left_side):
    W, H = B.width, B.height
    if step_diff > 0:
        left_height, right_height = step_base, step_base + step_diff
    else:
        right_height = step_base
        left_height = right_height - step_diff
    skip_if(jar_scale < 0.19 and abs(step_diff) > 0.19)
    skip_if(jar_scale > 0.26 and (abs(step_diff) < 0.19 or step_diff < -0.19))

    left_step = B.add("bar", scale=0.3, dynamic=False, label="left step", bottom=left_height * H, left=left_side * W)
    pivot = B.add("ball", scale=0.15, label="pivot ball", bottom=left_step.top, left=left_step.left)
    lever = B.add("bar", scale=0.4, dynamic=True, label="lever", bottom=pivot.top, left=5)
    ball = B.add("ball", scale=0.05, bottom=lever.top, left=0.02 * W)
    B.add("ball", scale=0.1, dynamic=False, label="ceiling ball", top=H, center_x=pivot.center_x)
    right_step = B.add(
        "bar", scale=0.3, dynamic=False, label="right step", angle=jar_angle, bottom=right_height * H, right=W,
    )
    jar = B.add("jar", scale=jar_scale, bottom=right_step.top, right=W * jar_right)
    target = B.add("ball", scale=0.05 + jar_scale / 8, center_x=jar.center_x, bottom=jar.bottom + 10)
    B.set_goal(ball, target)


TEMPLATE = Template(
    id="00023",
    title="A lever on a big ball carrying a small ball, and a jar with a ball on a right step",
    goal="make the green ball touch the blue ball",
    grid=dict(
        step_diff=np.linspace(-0.3, 0.3, 10),
        step_base=np.linspace(0.01, 0.1, 2),
        jar_scale=np.linspace(0.15, 0.3, 3),
        jar_right=np.linspace(0.9, 0.98, 3),
        jar_angle=np.linspace(-10, 10, 13),
        left_side=np.linspace(0.05, 0.2, 5),
    ),
    build=build,
)
