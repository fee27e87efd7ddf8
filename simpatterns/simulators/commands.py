"""CLI: ``simpatterns scenes``, ``simulate`` and ``dataset``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from simpatterns.parallel import executor_options

console = Console(soft_wrap=True)  # no hard wraps: output is often piped or grepped


def _fail(message: str) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(2)


def _parse_action(text: str) -> list[float]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        _fail(f"--action {text!r}: expected three numbers x,y,r in [0,1], e.g. 0.5,0.8,0.3")
    if len(values) != 3:
        _fail(f"--action {text!r}: expected three numbers x,y,r, got {len(values)}")
    return values


def scenes() -> None:
    """List the 25 PHYRE one-ball templates with their goals and variant counts."""
    from simpatterns.simulators.phyre import TEMPLATES

    table = Table(title="PHYRE one-ball templates (pymunk)")
    for col in ("id", "scene", "goal", "variants"):
        table.add_column(col)
    for t in TEMPLATES.values():
        table.add_row(t.id, t.title, t.goal, str(t.num_variants))
    console.print(table)


def simulate_cmd(
    template: str = typer.Option(..., "--template", "-t", help="template id, e.g. 7 or 00007"),
    variant: int = typer.Option(0, "--variant", "-v", help="shipped variant index"),
    action: Optional[str] = typer.Option(None, "--action", "-a", help="x,y,r in [0,1]; default: the variant's solution"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the trace (.npz)"),
    gif: Optional[Path] = typer.Option(None, "--gif", help="write the rollout as a GIF"),
    png: Optional[Path] = typer.Option(None, "--png", help="write the last frame as a PNG"),
    full: bool = typer.Option(False, "--full", help="run all 1000 steps even after success"),
    stride: int = typer.Option(1, "--stride", help="store every k-th frame"),
) -> None:
    """Simulate one action on a template variant and summarise the rollout."""
    from simpatterns.simulators.phyre import get_template, simulate
    from simpatterns.simulators.phyre.render import save_gif, save_png

    try:
        t = get_template(template)
        scene = t.variant_scene(variant)
    except (KeyError, IndexError, LookupError) as exc:
        _fail(str(exc.args[0] if exc.args else exc))
    act = _parse_action(action) if action else t.solution(variant)
    rollout = simulate(scene, act, stop_on_success=not full, stride=stride)
    if rollout.trace is None:
        console.print(f"[yellow]invalid action[/yellow] {act}: {rollout.invalid_reason} (nothing simulated)")
        raise typer.Exit(1)
    tr = rollout.trace
    console.print(f"template {t.id} variant {variant}: {t.title}")
    console.print(f"goal: {scene.goal_text()}; action {[round(a, 4) for a in act]}")
    console.print(
        f"{tr.num_frames} frames ({tr.meta['steps']} steps, {tr.time[-1]:.2f} s), {tr.num_contacts} contact rows, "
        f"{len(tr.raw_events('CollisionStart'))} collisions; "
        + ("[green]SOLVED[/green]" if tr.success else "[red]not solved[/red]")
        + (f" at {tr.meta['solved_frame'] * tr.dt:.2f} s" if tr.success else "")
    )
    try:
        if out:
            tr.save(out)
            console.print(f"trace -> {out}")
        if gif:
            save_gif(tr, gif, stride=max(1, 4 // stride))
            console.print(f"gif -> {gif}")
        if png:
            save_png(tr, png)
            console.print(f"png -> {png}")
    except OSError as exc:  # a WriteError names the user's path
        _fail(str(exc))


def dataset(
    templates: str = typer.Option("all", "--templates", help="'all' or comma-separated ids"),
    variants: int = typer.Option(10, "--variants", help="variants per template (first N shipped)"),
    actions: str = typer.Option("random:5", "--actions", help="random:N, solution, near-miss[:N], comma-separated"),
    out: Path = typer.Option(..., "--out", help="output directory"),
    workers: int = typer.Option(1, "--workers", "-j", help="parallel processes"),
    seed: int = typer.Option(0, "--seed"),
    stride: int = typer.Option(1, "--stride", help="store every k-th frame"),
) -> None:
    """Simulate many rollouts into DIR with an index.jsonl listing every trace."""
    from simpatterns.simulators.dataset import build_dataset, plan_jobs
    from simpatterns.simulators.phyre import TEMPLATES

    ids = list(TEMPLATES) if templates == "all" else [t.strip() for t in templates.split(",") if t.strip()]
    try:
        jobs = plan_jobs(ids, variants, actions, seed=seed, stride=stride)
    except (ValueError, KeyError, LookupError) as exc:
        _fail(str(exc.args[0] if exc.args else exc))
    try:
        rows = build_dataset(jobs, out, workers=workers, progress=True)
    except OSError as exc:
        _fail(str(exc))
    ok = [r for r in rows if r.get("file")]
    solved = sum(r["success"] for r in ok)
    console.print(f"{len(ok)} traces in {out} ({solved} solved); index -> {out / 'index.jsonl'}")
    for r in rows:
        if not r.get("file"):
            console.print(f"[yellow]skipped[/yellow] T{r['template']} V{r['variant']} {r['kind']}{r['k']}: {r['error']}")


def register(app: typer.Typer) -> None:
    app.command("scenes")(scenes)
    app.command("simulate")(simulate_cmd)
    app.command("dataset")(executor_options(dataset))
