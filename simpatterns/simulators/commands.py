"""CLI: ``simpatterns scenes``, ``simulate`` and ``dataset``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simpatterns.cli_support import (executor_options, fail, interrupted, new_table, out as console,
                                     print_table, warn)
from simpatterns.files import WriteError, check_target
from simpatterns.parallel import LOCAL, Backend



def _parse_action(text: str) -> list[float]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        fail(f"--action {text!r}: expected three numbers x,y,r in [0,1], e.g. 0.5,0.8,0.3")
    if len(values) != 3:
        fail(f"--action {text!r}: expected three numbers x,y,r, got {len(values)}")
    return values


def scenes() -> None:
    """List the 25 PHYRE one-ball templates with their goals and variant counts."""
    from simpatterns.simulators.phyre import TEMPLATES

    table = new_table("PHYRE one-ball templates (pymunk)", ("id", "scene", "goal", "variants"),
                      wrap=("scene", "goal"), right=("variants",))
    for t in TEMPLATES.values():
        table.add_row(t.id, t.title, t.goal, str(t.num_variants))
    print_table(table)


def simulate_cmd(
    template: str = typer.Option(..., "--template", "-t", help="template id, e.g. 7 or 00007"),
    variant: int = typer.Option(0, "--variant", "-v", min=0, help="shipped variant index"),
    action: Optional[str] = typer.Option(None, "--action", "-a", help="x,y,r in [0,1]; default: the variant's solution"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write the trace (.npz; folders are created)"),
    gif: Optional[Path] = typer.Option(None, "--gif", help="write the rollout as a GIF"),
    gif_size: int = typer.Option(256, "--gif-size", min=64, help="side of the GIF in pixels"),
    png: Optional[Path] = typer.Option(None, "--png", help="write the last frame as a PNG"),
    full: bool = typer.Option(False, "--full/--no-full", help="run all 1000 steps even after success"),
    stride: int = typer.Option(1, "--stride", min=1, help="store every k-th frame"),
) -> None:
    """Simulate one action on a template variant and summarise the rollout."""
    from simpatterns.simulators.phyre import get_template, simulate
    from simpatterns.simulators.phyre.render import save_gif, save_png

    try:
        t = get_template(template)
        scene = t.variant_scene(variant)
    except (KeyError, IndexError, LookupError) as exc:
        fail(str(exc.args[0] if exc.args else exc))
    act = _parse_action(action) if action else t.solution(variant)
    try:  # before simulating: a bad path fails now, not after the work
        for target in (out, gif, png):
            if target is not None:
                check_target(target)
    except WriteError as exc:
        fail(str(exc))
    rollout = simulate(scene, act, stop_on_success=not full, stride=stride)
    if rollout.trace is None:
        fail(f"invalid action {act}: {rollout.invalid_reason} (nothing simulated)")  # bad input: exit 2
    tr = rollout.trace
    # prose, wrapped at the terminal's width
    console.print(f"template {t.id} variant {variant}: {t.title}", soft_wrap=False)
    console.print(f"goal: {scene.goal_text()}; action {[round(a, 4) for a in act]}", soft_wrap=False)
    console.print(
        f"{tr.num_frames} frames ({tr.meta['steps']} steps, {tr.time[-1]:.2f} s), {tr.num_contacts} contact rows, "
        f"{len(tr.raw_events('CollisionStart'))} collisions; "
        + ("SOLVED" if tr.success else "not solved")
        + (f" at {tr.meta['solved_frame'] * tr.dt:.2f} s" if tr.success else ""),
        soft_wrap=False,
    )
    try:
        if out:
            tr.save(out)
            console.print(f"trace -> {out}")
        if gif:
            save_gif(tr, gif, stride=max(1, 4 // stride), size=gif_size)
            console.print(f"gif -> {gif}")
        if png:
            save_png(tr, png)
            console.print(f"png -> {png}")
    except OSError as exc:  # a WriteError names the user's path
        fail(str(exc))


def dataset(
    templates: str = typer.Option("all", "--templates", help="'all' or comma-separated ids"),
    variants: int = typer.Option(10, "--variants", min=1, help="variants per template (first N shipped)"),
    actions: str = typer.Option("random:5", "--actions", help="random:N, solution, near-miss[:N], comma-separated"),
    out: Path = typer.Option(..., "--out", "-o", help="output directory (created)"),
    workers: int = typer.Option(1, "--workers", "-j", min=1, help="parallel processes"),
    seed: int = typer.Option(0, "--seed", help="seed of the random and near-miss actions"),
    stride: int = typer.Option(1, "--stride", min=1, help="store every k-th frame"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    backend: Backend = LOCAL,
) -> None:
    """Simulate many rollouts into DIR with an index.jsonl listing every trace.

    Traces are written as they finish; Ctrl-C keeps them (and the index) and a
    re-run of the same command simulates only the rest."""
    from simpatterns.simulators.dataset import INDEX_NAME, build_dataset, plan_jobs
    from simpatterns.simulators.phyre import TEMPLATES

    ids = list(TEMPLATES) if templates == "all" else [t.strip() for t in templates.split(",") if t.strip()]
    try:
        jobs = plan_jobs(ids, variants, actions, seed=seed, stride=stride)
    except (ValueError, KeyError, LookupError) as exc:
        fail(str(exc.args[0] if exc.args else exc))
    if out.exists() and not out.is_dir():
        fail(f"{out}: is a file; --out names the dataset folder")
    finished: list[dict] = []
    try:
        rows = build_dataset(jobs, out, workers=workers, progress=not quiet, on_done=finished.append,
                             backend=backend)
    except WriteError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        kept = sum(1 for r in finished if r.get("file"))
        interrupted(f"{kept} of {len(jobs)} traces kept in {out} (listed in {out / INDEX_NAME})")
    ok = [r for r in rows if r.get("file")]
    solved = sum(r["success"] for r in ok)
    console.print(f"{len(ok)} traces in {out} ({solved} solved); index -> {out / INDEX_NAME}")
    skipped = [r for r in rows if not r.get("file")]
    for r in skipped:
        warn(f"skipped T{r['template']} V{r['variant']} {r['kind']}{r['k']}: {r['error']}")


def register(app: typer.Typer) -> None:
    app.command("scenes")(scenes)
    app.command("simulate")(simulate_cmd)
    app.command("dataset")(executor_options(dataset))
