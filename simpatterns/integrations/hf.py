"""Traces and annotations as a Hugging Face ``datasets`` folder (``pip install 'simpatterns[hf]'``).

`export_hf(source, out)` writes::

    out/README.md                         the dataset card: configs, features, generation settings, licence
    out/traces/train-00000-of-0000N.parquet   the traces table of `annotate.exchange` (bit-exact state)
    out/events/train-*.parquet            one row per pattern event
    out/annotations/train-*.parquet       one row per annotation (its text included)
    out/frames/train-*.parquet            rendered frames of 2D traces as ``Image`` features

``datasets.load_dataset(out)`` loads the ``traces`` config (the default);
``load_dataset(out, "frames")`` gives PIL images. Every shard carries its
``datasets`` features in the Parquet schema, and the card declares them too.
`import_hf` reads the shards back (pyarrow only) into ``.npz`` traces and
annotations equal to the originals.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simpatterns.annotate.exchange import (
    ExchangeError,
    collect_rows,
    from_rows,
    read_rows,
    write_back,
)
from simpatterns.annotation import Annotation
from simpatterns.files import atomic_open, atomic_write
from simpatterns.trace import Trace

CONFIGS = ("traces", "events", "annotations", "frames")
CARD = "README.md"
WHAT = {
    "traces": "one rollout per row: bodies, per-frame state (time, position, velocity, angle...), contacts, the "
              "JSON header (bodies, raw events, meta)",
    "events": "one pattern event per row: trace_id, frame, time (s), pattern, params (JSON)",
    "annotations": "one annotation per row, with the timeline text an LLM reads",
    "frames": "rendered frames of 2D rollouts (`image`: an Image feature)",
}
SPLIT = "train"


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ExchangeError("--format hf needs Hugging Face datasets: pip install 'simpatterns[hf]'") from None
    return datasets


def frame_rows(trace_id: str, trace: Trace, images: int, size: int) -> list[dict[str, Any]]:
    """``images`` evenly spaced frames (first and last included) of a 2D trace as PNG rows."""
    if images <= 0 or trace.position.shape[-1] != 2:
        return []  # only 2D scenes have a renderer without a GL context
    from simpatterns.simulators.phyre.render import render_frame

    frames = np.unique(np.round(np.linspace(0, trace.num_frames - 1, min(images, trace.num_frames))).astype(int))
    rows = []
    for f in frames.tolist():
        buf = io.BytesIO()
        render_frame(trace, f, size).save(buf, format="PNG", optimize=True)
        rows.append({"trace_id": trace_id, "frame": f, "time": float(trace.time[f] - trace.time[0]),
                     "image": {"bytes": buf.getvalue(), "path": None}})
    return rows


def _features(ds: Any, config: str, rows: list[dict[str, Any]]) -> Any:
    """The declared features of a table: inferred from its Arrow schema, frames' images as ``Image``."""
    import pyarrow as pa

    if config == "frames":
        return ds.Features({"trace_id": ds.Value("string"), "frame": ds.Value("int64"), "time": ds.Value("float64"),
                            "image": ds.Image()})
    return ds.Features.from_arrow_schema(pa.Table.from_pylist(rows).schema)


def _write_shards(folder: Path, rows: list[dict[str, Any]], features: Any, per_shard: int) -> int:
    """``rows`` as ``train-0000K-of-0000N.parquet`` files of at most ``per_shard`` rows (none if no
    rows); the schema carries the ``datasets`` features (its ``huggingface`` metadata). Returns
    the rows' size in memory (the card's ``num_bytes``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = math.ceil(len(rows) / per_shard)
    written = set()
    nbytes = 0
    for k in range(n):
        table = pa.Table.from_pylist(rows[k * per_shard:(k + 1) * per_shard], schema=features.arrow_schema)
        path = folder / f"{SPLIT}-{k:05d}-of-{n:05d}.parquet"
        with atomic_open(path, "wb") as fh:
            pq.write_table(table, fh)
        written.add(path)
        nbytes += table.nbytes
    for stale in set(folder.glob(f"{SPLIT}-*.parquet")) - written:  # an earlier export's shards
        stale.unlink()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return nbytes


def _generation(trace_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the card says about how the traces were made, from their headers."""
    metas = [json.loads(r["header"]).get("meta", {}) for r in trace_rows]
    seeds = sorted({m["seed"] for m in metas if isinstance(m.get("seed"), int)})
    return {
        "simulators": dict(Counter(str(m.get("simulator", "?")) for m in metas)),
        "templates": sorted({str(m["template"]) for m in metas if m.get("template") is not None}),
        "strides": sorted({int(m["stride"]) for m in metas if isinstance(m.get("stride"), int)}),
        "dt": sorted({float(r["dt"]) for r in trace_rows}),
        "seeds": seeds,
        "successes": sum(1 for r in trace_rows if r["success"]),
    }


def _card(configs: dict[str, Any], counts: dict[str, int], nbytes: dict[str, int], generation: dict[str, Any],
          settings: dict[str, Any], licence: str, source_files: dict[str, Any]) -> str:
    import yaml

    from simpatterns import __version__

    meta = {
        "license": licence,
        "tags": ["physics", "simulation", "simpatterns"],
        "configs": [{"config_name": c, "default": c == "traces",
                     "data_files": [{"split": SPLIT, "path": f"{c}/{SPLIT}-*.parquet"}]} for c in configs],
        "dataset_info": [{"config_name": c, "features": f._to_yaml_list(),
                          "splits": [{"name": SPLIT, "num_bytes": nbytes[c], "num_examples": counts[c]}]}
                         for c, f in configs.items()],
    }
    seeds = generation["seeds"]
    seed_text = ("none recorded" if not seeds else
                 f"{seeds[0]}..{seeds[-1]} ({len(seeds)} distinct)" if len(seeds) > 8 else ", ".join(map(str, seeds)))
    lines = [
        "---", yaml.safe_dump(meta, sort_keys=False).rstrip(), "---", "",
        "# simpatterns traces", "",
        (f"Physics rollouts and their event annotations, exported by simpatterns {__version__} "
         "(`simpatterns export --format hf`)."), "",
        "| config | rows | what |", "|---|---|---|",
        *(f"| {c} | {counts[c]} | {WHAT[c]} |" for c in configs), "",
        "```python", "from datasets import load_dataset", "",
        "traces = load_dataset(\"PATH\", split=\"train\")            # the default config",
        "frames = load_dataset(\"PATH\", \"frames\", split=\"train\")  # PIL images", "```", "",
        "`simpatterns import PATH` rebuilds the `.npz` traces and `.annotation.jsonl` annotations bit for bit.", "",
        "## Generation settings", "",
        f"- simulators: {', '.join(f'{k} ({v})' for k, v in generation['simulators'].items())}",
        f"- scene templates: {', '.join(generation['templates']) or 'n/a'}",
        f"- seeds: {seed_text}",
        (f"- time step (s): {', '.join(f'{d:g}' for d in generation['dt'])}; recording strides: "
         f"{', '.join(map(str, generation['strides'])) or 'n/a'}"),
        f"- successful rollouts: {generation['successes']} of {counts['traces']}",
        f"- export: {json.dumps(settings, sort_keys=True)}",
    ]
    for name, content in source_files.items():
        lines += ["", f"The source folder's `{name}`:", "", "```json", json.dumps(content, sort_keys=True),
                  "```"]
    lines += ["", "## Licence", "", (f"This export declares the licence `{licence}`. The scenes follow PHYRE's "
                                     "task templates (Apache-2.0); simpatterns (MIT) simulated the rollouts."), ""]
    return "\n".join(lines)


def export_hf(source: str | os.PathLike, out: str | os.PathLike, *, annotations: str | os.PathLike | None = None,
              text: bool = True, images: int = 3, image_size: int = 256, shard_rows: int = 256,
              licence: str = "mit") -> dict[str, int]:
    """Write the Hugging Face folder ``out`` for the traces under ``source`` (and their annotations).
    ``images``: rendered frames per 2D trace (0: none); ``shard_rows``: traces (and frames of as
    many traces) per Parquet shard. Returns counts per config."""
    ds = _datasets()
    if shard_rows < 1:
        raise ValueError("shard_rows must be >= 1")
    src = Path(source)
    trace_rows, event_rows, ann_rows = collect_rows(src, annotations=annotations, text=text)
    root = src if src.is_dir() else src.parent
    pictures = [r for row in trace_rows
                for r in frame_rows(row["trace_id"], _trace_of(row), images, image_size)] if images > 0 else []
    tables = {"traces": trace_rows, "events": event_rows, "annotations": ann_rows, "frames": pictures}
    per_shard = {"traces": shard_rows, "annotations": shard_rows, "frames": shard_rows * max(1, images),
                 "events": shard_rows * 64}
    dest = Path(out)
    configs = {}
    nbytes = {}
    for name, rows in tables.items():
        if not rows:  # `datasets` cannot read an empty shard: an empty table is no config
            _write_shards(dest / name, [], None, 1)
            continue
        configs[name] = _features(ds, name, rows)
        nbytes[name] = _write_shards(dest / name, rows, configs[name], per_shard[name])
    counts = {name: len(rows) for name, rows in tables.items()}
    source_files = {}
    for folder in (root, root.parent):  # `simpatterns qa generate` records its settings beside rollouts/
        path = folder / "dataset.json"
        if path.is_file() and path.name not in source_files:
            try:
                source_files[path.name] = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                pass
    settings = {"text": text, "images": images, "image_size": image_size, "shard_rows": shard_rows}
    atomic_write(dest / CARD, _card(configs, counts, nbytes, _generation(trace_rows), settings, licence,
                                    source_files))
    return counts


def _trace_of(row: dict[str, Any]) -> Trace:
    traces, _ = from_rows([row], [], None, "traces")
    return next(iter(traces.values()))


def is_hf_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / CARD).is_file() and (Path(folder) / "traces").is_dir()


def read_hf(folder: str | os.PathLike) -> tuple[dict[str, Trace], dict[str, Annotation]]:
    """The traces and annotations of a folder written by `export_hf`, by trace id (pyarrow only)."""
    import pyarrow.parquet as pq

    root = Path(folder)

    def shards(config: str) -> list[Path]:
        return sorted((root / config).glob(f"{SPLIT}-*.parquet"))

    if not shards("traces"):
        raise ExchangeError(f"{root / 'traces'}: no {SPLIT}-*.parquet shards (write them with "
                            "`simpatterns export --format hf`)")
    ann = shards("annotations")
    return from_rows(read_rows(pq, shards("traces")), read_rows(pq, shards("events")) if ann else [],
                     read_rows(pq, ann) if ann else None, str(root / "traces"))


def import_hf(folder: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, int]:
    traces, annotations = read_hf(folder)
    return write_back(traces, annotations, Path(out) if out is not None else Path(folder))


__all__: Sequence[str] = ["CONFIGS", "export_hf", "frame_rows", "import_hf", "is_hf_folder", "read_hf"]
