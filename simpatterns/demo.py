"""``simpatterns demo``: a first look on a fresh install, no LLM and no network.

Simulates a few PHYRE template variants (their verified solution and a random
action), renders each rollout to GIF and its last frame to PNG, and writes a
markdown summary into the report folder.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

DEMO_TEMPLATES = ("00000", "00002", "00007", "00012")


def demo(
    out: Path = typer.Option(Path("demo-report"), "--out", help="report folder"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Simulate, render and summarise a few PHYRE scenes into a report folder."""
    from simpatterns.simulators.phyre import TEMPLATES, check_action, get_template, simulate
    from simpatterns.simulators.phyre.render import save_gif, save_png

    console = Console()
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    table = Table(title="simpatterns demo: PHYRE one-ball scenes in pymunk")
    for col in ("template", "action", "frames", "contacts", "collisions", "solved", "gif"):
        table.add_column(col)
    lines = ["# simpatterns demo report", ""]
    for tid in DEMO_TEMPLATES:
        if tid not in TEMPLATES or not get_template(tid).num_variants:
            continue
        t = get_template(tid)
        scene = t.variant_scene(0)
        random_action = next(a for a in (rng.random(3) for _ in range(1000)) if check_action(scene, a) is None)
        for kind, action in (("solution", t.solution(0)), ("random", random_action.tolist())):
            tr = simulate(scene, action).trace
            assert tr is not None
            gif = out / f"T{tid}_{kind}.gif"
            save_gif(tr, gif, stride=4)
            save_png(tr, out / f"T{tid}_{kind}.png")
            collisions = len(tr.raw_events("CollisionStart"))
            table.add_row(
                tid, kind, str(tr.num_frames), str(tr.num_contacts), str(collisions),
                "yes" if tr.success else "no", gif.name,
            )
            lines += [
                f"## {tid} ({kind}): {t.title}",
                f"goal: {scene.goal_text()}; action {[round(a, 3) for a in action]}; "
                f"{tr.num_frames} frames, {collisions} collisions, solved: {tr.success}",
                f"![{tid} {kind}]({gif.name})",
                "",
            ]
    console.print(table)
    tmp = out / ".README.md.tmp"
    tmp.write_text("\n".join(lines))
    tmp.replace(out / "README.md")
    console.print(f"report -> {out}/README.md ({time.perf_counter() - t_start:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
