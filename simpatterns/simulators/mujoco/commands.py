"""CLI: ``simpatterns mujoco trace|dataset|rope-dataset|rope-configs|knot``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simpatterns.cli_support import fail, out as console, print_table
from rich.table import Table

mujoco_app = typer.Typer(name="mujoco", help="MuJoCo: trace any MJCF model; the rope-and-knot world.",
                         no_args_is_help=True)


def _fail(message: str) -> None:
    fail(f"{message}")


@mujoco_app.command("trace")
def trace_cmd(
    model: Path = typer.Argument(..., help="MJCF (.xml) or compiled (.mjb) model file"),
    steps: int = typer.Option(1000, "--steps", help="physics steps"),
    stride: int = typer.Option(1, "--stride", help="store every k-th step"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the trace (.npz)"),
    position: str = typer.Option("xipos", "--position", help="xipos: centres of mass; xpos: body frame origins"),
) -> None:
    """Simulate a model from its initial state and summarise (and save) the trace."""
    from simpatterns.simulators.mujoco.tracer import simulate

    if steps < 1 or stride < 1:
        _fail("--steps and --stride must be >= 1")
    try:
        tr = simulate(model, steps, stride=stride, position=position)
    except (ValueError, TypeError) as exc:
        _fail(str(exc))
    console.print(f"{model}: {tr.num_bodies} bodies, {tr.num_frames} frames "
                  f"({tr.time[-1]:.2f} s at {1 / tr.dt:.0f} per second), {tr.num_contacts} contact rows, "
                  f"{len(tr.raw_events('CollisionStart'))} contact starts", soft_wrap=False)
    table = Table(title="bodies")
    for col in ("name", "colour", "shape", "dynamic", "role"):
        table.add_column(col)
    for b in tr.bodies[:40]:
        table.add_row(str(b.name), b.color, b.shape, "yes" if b.dynamic else "no", b.role)
    print_table(table)
    if tr.num_bodies > 40:
        console.print(f"... and {tr.num_bodies - 40} more bodies")
    if out:
        tr.save(out)
        console.print(f"trace -> {out}")


@mujoco_app.command("dataset")
def dataset_cmd(
    model: Path = typer.Argument(..., help="MJCF (.xml) or compiled (.mjb) model file"),
    out: Path = typer.Option(..., "--out", help="output directory"),
    rollouts: int = typer.Option(24, "--rollouts", help="rollouts (initial states jittered from the model's)"),
    steps: int = typer.Option(1000, "--steps", help="physics steps per rollout"),
    stride: int = typer.Option(10, "--stride", help="store every k-th step"),
    jitter: float = typer.Option(0.05, "--jitter", help="metres: free bodies moved up to this far in x and y"),
    speed: float = typer.Option(0.2, "--speed", help="m/s: random horizontal start velocity, up to"),
    seed: int = typer.Option(0, "--seed", help="seed of the random start states"),
    threads: int = typer.Option(1, "--threads", help="threads stepping rollouts in C (mujoco.rollout)"),
    position: str = typer.Option("xipos", "--position", help="xipos: centres of mass; xpos: body frame origins"),
) -> None:
    """Jittered rollouts of any model (batched in C) into DIR with an index.jsonl."""
    from simpatterns.simulators.mujoco.dataset import build_model_dataset

    if rollouts < 1 or steps < 1 or stride < 1:
        _fail("--rollouts, --steps and --stride must be >= 1")
    try:
        rows = build_model_dataset(model, out, rollouts, steps, stride=stride, jitter=jitter, speed=speed,
                                   seed=seed, nthread=threads, position=position)
    except (ValueError, TypeError) as exc:
        _fail(str(exc))
    console.print(f"{len(rows)} traces in {out}; index -> {str(out / 'index.jsonl')}")


@mujoco_app.command("rope-dataset")
def rope_dataset_cmd(
    out: Path = typer.Option(..., "--out", help="output directory"),
    episodes: int = typer.Option(20, "--episodes", help="episodes (one trace each)"),
    actions: int = typer.Option(15, "--actions-per-episode", help="random KnotGym actions per episode"),
    task: str = typer.Option("unknot", "--task", help="unknot, tie or convert: where episodes start"),
    crossings: int = typer.Option(2, "--crossings", help="crossings of the target knot (the task's difficulty)"),
    split: str = typer.Option("train", "--split", help="train or eval configurations"),
    stride: int = typer.Option(8, "--stride", help="store every k-th physics step (24 per action)"),
    seed: int = typer.Option(0, "--seed", help="seed of the random start states"),
) -> None:
    """Rope episodes of random actions from a task's shipped start configurations."""
    from simpatterns.simulators.mujoco.dataset import build_rope_dataset

    try:
        rows = build_rope_dataset(out, episodes, actions, task=task, crossings=crossings, split=split, seed=seed,
                                  stride=stride)
    except ValueError as exc:
        _fail(str(exc))
    ends = [r["end_crossings"] for r in rows]
    console.print(f"{len(rows)} rope traces in {out}; crossings at the end: "
                  f"min {min(ends)}, max {max(ends)}; index -> {str(out / 'index.jsonl')}")


@mujoco_app.command("rope-configs")
def rope_configs_cmd() -> None:
    """The shipped start/goal configurations: how many per crossing count and split."""
    from simpatterns.simulators.mujoco.tasks import SPLITS, load_configurations

    sets = {s: load_configurations(s) for s in SPLITS}
    levels = sorted(set().union(*(set(c.crossings.tolist()) for c in sets.values())))
    table = Table(title="rope configurations (crossings seen from above)")
    table.add_column("split")
    for c in levels:
        table.add_column(str(c), justify="right")
    for s, cfg in sets.items():
        table.add_row(s, *[str(int((cfg.crossings == c).sum())) for c in levels])
    print_table(table)
    meta = sets["train"].meta
    console.print(f"generated by {meta.get('script', '?')} with seed {meta.get('seed')}, "
                  f"{meta.get('episodes')} random-force episodes", soft_wrap=False)


@mujoco_app.command("knot")
def knot_cmd(
    trace: Path = typer.Argument(..., help="a rope trace (.npz)"),
    frame: int = typer.Option(-1, "--frame", help="frame to read (default: the last)"),
) -> None:
    """The knot oracle on a rope trace's frame: crossings, Gauss code, simplified code."""
    from simpatterns.simulators.mujoco.knot import diagram, is_unknot
    from simpatterns.trace import Trace, TraceFormatError

    try:
        tr = Trace.load(trace)
    except TraceFormatError as exc:
        _fail(str(exc))
    ropes = tr.meta.get("ropes") or []
    if not ropes:
        _fail(f"{trace}: the trace has no rope (no 1D flex in its model)")
    if not -tr.num_frames <= frame < tr.num_frames:
        _fail(f"--frame {frame} outside the trace's {tr.num_frames} frames")
    p = tr.position[frame, ropes[0]["bodies"]]
    d = diagram(p)
    console.print(f"crossings: {d.num_crossings}" + (" (re-projected: the top view was degenerate)"
                                                      if d.reprojected else ""))
    console.print(f"Gauss code: {d.code.text or '(none)'}")
    console.print(f"after Reidemeister I/II: {d.code.simplify().text or '(none)'}")
    console.print(f"unknot proven: {'yes' if is_unknot(p) else 'no'}")


def register(app: typer.Typer) -> None:
    app.add_typer(mujoco_app, name="mujoco")
