"""CLI: ``simpatterns export`` (Parquet, Hugging Face datasets, Minari) and ``simpatterns import``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simpatterns.cli_support import fail, note

FORMATS = ("parquet", "hf", "minari")


def export_cmd(
    source: Annotated[str, typer.Argument(
        help="parquet, hf: a folder of traces (.npz, searched recursively) and their annotations; minari: an "
        "environment id (see `simpatterns env list`)")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="parquet: where the .parquet files go (default: SOURCE); hf: the dataset folder "
        "(required); minari: the dataset id (default: simpatterns/ENV/random-v0)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet, hf (Hugging Face datasets) or minari")] = "parquet",
    annotations: Annotated[Path | None, typer.Option(
        "--annotations", help="folder of the annotations (default: beside each trace; same layout)")] = None,
    text: Annotated[bool, typer.Option("--text/--no-text", help="include each annotation's text")] = True,
    images: Annotated[int, typer.Option("--images", min=0, help="hf: rendered frames per 2D trace (0: none)")] = 3,
    image_size: Annotated[int, typer.Option("--image-size", min=16, help="hf: image side in pixels")] = 256,
    shard_rows: Annotated[int, typer.Option("--shard-rows", min=1, help="hf: traces per Parquet shard")] = 256,
    licence: Annotated[str, typer.Option("--license", help="hf: the licence the dataset card declares")] = "mit",
    episodes: Annotated[int, typer.Option("--episodes", min=1, help="minari: episodes to record")] = 10,
    seed: Annotated[int, typer.Option(
        "--seed", help="minari: seed of the first episode (then +1 each) and of the policy")] = 0,
    goal: Annotated[Path | None, typer.Option(
        "--goal", help="minari: a reward program (.rwd) recorded as the program reward beside the sparse one "
        "(default: the task's own goal)")] = None,
    env_kwargs: Annotated[str | None, typer.Option(
        "--env-kwargs", help="minari: the environment's keyword arguments as JSON, e.g. '{\"obs_mode\": "
        "\"objects\", \"template\": 0}' (recorded in its spec)")] = None,
    data_path: Annotated[Path | None, typer.Option(
        "--data-path", help="minari: the datasets root (default: MINARI_DATASETS_PATH or ~/.minari/datasets)")]
    = None,
) -> None:
    """Share data: traces and annotations as Parquet or Hugging Face datasets; rollouts as Minari.

    Parquet or a Hugging Face datasets folder: traces and their annotations. Minari: an environment's rollouts."""
    from simpatterns.annotate.exchange import ExchangeError
    from simpatterns.annotation import AnnotationFormatError
    from simpatterns.trace import TraceFormatError

    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: choose from {', '.join(FORMATS)}")
    if fmt == "minari":
        _export_minari(source, out, episodes, seed, goal, env_kwargs, data_path)
        return
    src = Path(source)
    if not src.exists():
        fail(f"{src}: no such file or directory")
    try:
        if fmt == "parquet":
            from simpatterns.annotate.exchange import export_parquet

            counts = export_parquet(src, out, annotations=annotations, text=text)
            where = out if out is not None else (src if src.is_dir() else src.parent)
            note(f"{counts['traces']} traces, {counts['annotations']} annotations, {counts['events']} events -> "
                 f"{where}/{{traces,events,annotations}}.parquet")
            return
        from simpatterns.integrations.hf import export_hf

        if out is None:
            fail("--format hf: give the dataset folder with --out")
        counts = export_hf(src, out, annotations=annotations, text=text, images=images, image_size=image_size,
                           shard_rows=shard_rows, licence=licence)
    except (ExchangeError, TraceFormatError, AnnotationFormatError) as exc:
        fail(str(exc))
    note(f"{counts['traces']} traces, {counts['annotations']} annotations, {counts['events']} events, "
         f"{counts['frames']} frames -> {out} (datasets.load_dataset({str(out)!r}))")


def _export_minari(env_id: str, out: Path | None, episodes: int, seed: int, goal: Path | None,
                   env_kwargs: str | None, data_path: Path | None) -> None:
    import json

    from simpatterns.integrations.minari import MinariExportError, export_minari

    try:
        kwargs = json.loads(env_kwargs) if env_kwargs else {}
    except json.JSONDecodeError as exc:
        fail(f"--env-kwargs: not JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(kwargs, dict):
        fail("--env-kwargs: give a JSON object of keyword arguments")
    try:
        info = export_minari(env_id, str(out) if out is not None else None, episodes=episodes, seed=seed,
                             goal=goal, env_kwargs=kwargs, data_path=data_path)
    except MinariExportError as exc:
        fail(str(exc))
    note(f"{info['episodes']} episodes, {info['steps']} steps of {env_id} -> Minari dataset {info['dataset_id']} "
         f"({info['path']}); minari.load_dataset({info['dataset_id']!r})")


def import_cmd(
    source: Annotated[Path, typer.Argument(help="a folder written by `simpatterns export` (parquet or hf)")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="where traces and annotations go (default: SOURCE)")] = None,
) -> None:
    """Read exported Parquet files or a Hugging Face folder back into traces and annotations.

    Traces come back as .npz and annotations as .annotation.jsonl, bit for bit."""
    from simpatterns.annotate.exchange import ExchangeError, import_parquet
    from simpatterns.integrations.hf import import_hf, is_hf_folder

    try:
        counts = import_hf(source, out) if is_hf_folder(source) else import_parquet(source, out)
    except ExchangeError as exc:
        fail(str(exc))
    note(f"{counts['traces']} traces, {counts['annotations']} annotations -> {out if out is not None else source}")


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
