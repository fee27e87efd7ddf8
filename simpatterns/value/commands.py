"""``simpatterns value build-data | train | eval``: value models from reward-program labels."""

from __future__ import annotations

from pathlib import Path

import typer

from simpatterns.cli_support import ProgressBar, executor_options, fail, note, out
from simpatterns.parallel import Backend

value_app = typer.Typer(help="Action-conditioned value models (paper §5.3): data, training, evaluation.",
                        no_args_is_help=True)


@value_app.command("build-data")
@executor_options
def build_data_cmd(
    output: Path = typer.Option(..., "--out", "-o", help="Parquet file to write"),
    tasks: str = typer.Option(..., "--tasks", help="comma list of TTTTT:VVV and/or template ids, or 'all'"),
    per_template: int | None = typer.Option(None, "--per-template", help="tasks (variants) per listed template"),
    actions: int = typer.Option(64, "--action-count", help="sampled valid actions per task"),
    label: str = typer.Option("success", "--label",
                              help="'success' (PHYRE's), a .rwd program or its text, or module:function"),
    seed: int = typer.Option(0, "--seed", help="seed of the sampled actions"),
    workers: int = typer.Option(1, "--workers", "-j", help="simulating processes"),
    backend: Backend | None = None,
) -> None:
    """Simulate sampled actions on tasks and store (task, action, label, clause scores) as Parquet."""
    from simpatterns.value.data import (
        DataError,
        build_dataset,
        select_tasks,
        write_parquet,
    )

    if actions < 1:
        fail("--action-count must be >= 1")
    try:
        ids = select_tasks(tasks, per_template)
        with ProgressBar("simulating", len(ids)) as bar:
            cols = build_dataset(ids, actions, label, seed=seed, workers=workers, backend=backend, progress=bar)
    except DataError as e:
        fail(str(e))
    write_parquet(output, cols, {"label": label, "seed": seed, "actions": actions})
    pos = sum(1 for v in cols["label"] if v >= 0.5)
    out.print(f"{output}: {len(cols['task'])} rows, {len(ids)} tasks, {pos} positive")


@value_app.command("train")
def train_cmd(
    data: Path = typer.Argument(..., help="Parquet dataset from build-data"),
    output: Path = typer.Option(..., "--out", "-o", help="folder for checkpoint.pt and model.pt"),
    steps: int = typer.Option(1000, "--updates", help="gradient updates to train for"),
    batch: int = typer.Option(64, "--batch", help="samples per gradient update (half positive)"),
    lr: float = typer.Option(3e-4, "--lr", help="Adam's learning rate (cosine schedule)"),
    resolution: int = typer.Option(64, "--resolution", help="image side in pixels; divides 256"),
    width: int = typer.Option(16, "--width", help="channels of the first stage"),
    stages: int = typer.Option(4, "--stages", help="residual stages of the network"),
    fusion: str = typer.Option("last", "--fusion", help="first | last | all"),
    val_fraction: float = typer.Option(0.2, "--val-fraction",
                                       help="fraction of the tasks held out for the validation AUC"),
    seed: int = typer.Option(0, "--seed", help="seed of the weights, the split and the batches"),
    checkpoint_every: int = typer.Option(100, "--checkpoint-every", help="updates between checkpoints"),
    log_every: int = typer.Option(50, "--log-every", help="updates between progress lines"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
) -> None:
    """Train (or resume) a FiLM value network; Ctrl-C stops with a checkpoint."""
    import torch

    from simpatterns.value.data import DataError, read_parquet
    from simpatterns.value.model import NetConfig
    from simpatterns.value.train import Examples, TrainConfig, split_by_task, train

    if threads is not None:
        torch.set_num_threads(threads)
    try:
        config = TrainConfig(steps=steps, batch=batch, lr=lr, seed=seed, checkpoint_every=checkpoint_every,
                             log_every=log_every, net=NetConfig(resolution, width, stages, fusion))
        cols, _ = read_parquet(data)
        ex = Examples.from_columns(cols, resolution)
        tr, va = split_by_task(cols, val_fraction, seed)
        result = train(ex.subset(tr), output, config, val_ex=ex.subset(va) if len(va) else None, log=note)
    except (ValueError, DataError) as e:
        fail(str(e))
    if result.stopped:
        raise typer.Exit(130)
    out.print(f"{output / 'model.pt'}: {result.step} steps")


@value_app.command("eval")
def eval_cmd(
    model: Path = typer.Argument(..., help="model.pt from train"),
    data: Path = typer.Argument(..., help="Parquet dataset (held-out tasks)"),
) -> None:
    """AUC of the model on a dataset, and the mean label of its top-ranked action per task."""
    import numpy as np

    from simpatterns.value.data import DataError, read_parquet
    from simpatterns.value.train import Examples, auc, load_model, predict

    try:
        net = load_model(model)
        cols, _ = read_parquet(data)
    except (ValueError, DataError) as e:
        fail(str(e))
    ex = Examples.from_columns(cols, net.config.resolution)
    scores = predict(net, ex)
    labels = ex.labels.numpy()
    tasks = np.asarray(cols["task"])
    top = [labels[tasks == t][np.argmax(scores[tasks == t])] for t in ex.tasks]
    base = [labels[tasks == t].mean() for t in ex.tasks]
    out.print(f"AUC {auc(scores, labels):.3f}  top-1 label {np.mean(top):.3f}  "
              f"(mean label {np.mean(base):.3f})  over {len(ex.tasks)} tasks")


def register(app: typer.Typer) -> None:
    app.add_typer(value_app, name="value")
