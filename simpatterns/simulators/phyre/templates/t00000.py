"""00000: two balls dropped at different x; the green ball must touch the blue ball."""

import numpy as np

from simpatterns.simulators.phyre.template import Template, skip_if


def build(B, ball1_x, ball2_x, ball1_r, ball2_r, height):
    skip_if(ball2_x <= ball1_x)  # symmetric task: keep one ordering
    ball1 = B.add("ball", scale=ball1_r, center_x=ball1_x * B.width, bottom=height * B.height)
    ball2 = B.add("ball", scale=ball2_r, center_x=ball2_x * B.width, bottom=height * B.height)
    skip_if(ball2.left - ball1.right < max(ball1_r, ball2_r) * B.width)
    skip_if(ball1.left <= 0 or ball2.right >= B.width - 1)
    B.set_goal(ball1, ball2)


TEMPLATE = Template(
    id="00000",
    title="Two balls dropped at different heights and x positions",
    goal="make the green ball touch the blue ball",
    grid=dict(
        ball1_x=np.linspace(0.05, 0.95, 19),
        ball2_x=np.linspace(0.05, 0.95, 19),
        ball1_r=np.linspace(0.06, 0.12, 3),
        ball2_r=np.linspace(0.06, 0.12, 3),
        height=np.linspace(0.2, 0.8, 5),
    ),
    build=build,
)
