"""Sharing data: traces and annotations to Parquet and back.

`export_parquet(source, out)` writes, for the traces under ``source`` (and
the annotations beside them, ``NAME.annotation.jsonl``):

- ``traces.parquet``: one row per trace: ``trace_id`` (its path under
  ``source`` without ``.npz``), ``template``, ``variant``, ``action``,
  ``success``, ``frames``, ``dt``, ``bodies`` (names), the per-frame state as
  list columns (``time`` [T], ``position`` [T][N][D], ``angle``, ``velocity``,
  ``angular_velocity``, ``quaternion`` for 3D), the contact rows
  (``contact_*``), and ``header`` (the trace's JSON header: bodies, raw
  events, meta) and ``arrays`` (each array's dtype and shape), so that
  `import_parquet` rebuilds the trace bit for bit;
- ``events.parquet``: one row per pattern event: ``trace_id``, ``frame``,
  ``time`` (s), ``pattern``, ``params`` (JSON text: params differ by pattern);
- ``annotations.parquet``: one row per annotation: ``trace_id``,
  ``patterns`` (library order), ``num_frames``, ``dt``, ``timings`` and
  ``errors`` (JSON text) and ``text``, the annotation text an LLM reads.

The files load with pyarrow, pandas (``pd.read_parquet``) and Hugging Face
``datasets`` (``load_dataset("parquet", data_files=...)``). pyarrow is the
``parquet`` extra.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from simpatterns.annotation import Annotation
from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_open
from simpatterns.trace import ARRAY_FIELDS, OPTIONAL_ARRAY_FIELDS, Trace, TraceFormatError

TRACES, EVENTS, ANNOTATIONS = "traces.parquet", "events.parquet", "annotations.parquet"
ANNOTATION_SUFFIX = ".annotation.jsonl"


class ExchangeError(SimpatternsError, ValueError):
    """Export or import failed; the message names the file."""


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExchangeError("Parquet needs pyarrow: pip install 'simpatterns[parquet]'") from None
    return pa, pq


def trace_id_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return rel[: -len(".npz")] if rel.endswith(".npz") else rel


def _trace_row(trace_id: str, trace: Trace) -> dict[str, Any]:
    meta = trace.meta
    row: dict[str, Any] = {
        "trace_id": trace_id,
        "template": None if meta.get("template") is None else str(meta["template"]),
        "variant": None if meta.get("variant") is None else int(meta["variant"]),
        "action": None if meta.get("action") is None else [float(v) for v in meta["action"]],
        "success": bool(trace.success),
        "frames": int(trace.num_frames),
        "dt": float(trace.dt),
        "bodies": list(trace.names),
        "header": json.dumps(trace.header(), default=_jsonable),
    }
    shapes = {}
    for name in (*ARRAY_FIELDS, *OPTIONAL_ARRAY_FIELDS):
        arr = getattr(trace, name)
        if arr is None:
            row[name] = None
            continue
        shapes[name] = [str(arr.dtype), list(arr.shape)]
        row[name] = arr.tolist()
    row["arrays"] = json.dumps(shapes)
    return row


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _write_table(pa: Any, pq: Any, rows: list[dict[str, Any]], columns: list[str], path: Path) -> None:
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in columns})
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh)


def collect_rows(source: str | os.PathLike, *, annotations: str | os.PathLike | None = None, text: bool = True,
                 budget_chars: int = 6000) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the three tables (traces, events, annotations) for the traces under ``source``;
    annotations are read from ``annotations`` (same layout) or beside each trace."""
    from simpatterns.annotate.annotator import trace_files
    from simpatterns.annotate.text import annotation_text

    src = Path(source)
    root = src if src.is_dir() else src.parent
    ann_root = Path(annotations) if annotations is not None else root
    trace_rows: list[dict[str, Any]] = []
    event_rows: list[dict[str, Any]] = []
    ann_rows: list[dict[str, Any]] = []
    for path in trace_files(src):
        trace = Trace.load(path)
        tid = trace_id_of(path, root)
        trace_rows.append(_trace_row(tid, trace))
        ann_path = ann_root / f"{tid}{ANNOTATION_SUFFIX}"
        if not ann_path.is_file():
            continue
        ann = Annotation.load(ann_path)
        for pattern, events in ann.pattern_events.items():  # stored order: rebuilt exactly
            for frame, params in events:
                event_rows.append({"trace_id": tid, "frame": int(frame), "time": float(frame * ann.dt),
                                   "pattern": pattern, "params": json.dumps(params, default=_jsonable)})
        ann_rows.append({"trace_id": tid, "patterns": list(ann.patterns), "num_frames": int(ann.num_frames),
                         "dt": float(ann.dt), "annotation_trace": ann.trace_id,
                         "timings": json.dumps(ann.timings), "errors": json.dumps(ann.errors),
                         "text": annotation_text(trace, ann, budget_chars=budget_chars) if text else None})
    if not trace_rows:
        raise ExchangeError(f"{src}: no .npz traces found")
    return trace_rows, event_rows, ann_rows


def export_parquet(source: str | os.PathLike, out: str | os.PathLike | None = None, *,
                   annotations: str | os.PathLike | None = None, text: bool = True,
                   budget_chars: int = 6000) -> dict[str, int]:
    """Write ``traces.parquet``, ``events.parquet`` and ``annotations.parquet`` for the
    traces under ``source`` into ``out`` (default ``source``); annotations are read
    from ``annotations`` (same layout) or beside each trace. Returns counts."""
    pa, pq = _pyarrow()
    src = Path(source)
    dest = Path(out) if out is not None else (src if src.is_dir() else src.parent)
    trace_rows, event_rows, ann_rows = collect_rows(src, annotations=annotations, text=text,
                                                    budget_chars=budget_chars)
    _write_table(pa, pq, trace_rows, ["trace_id"], dest / TRACES)
    _write_table(pa, pq, event_rows, ["trace_id", "frame", "time", "pattern", "params"], dest / EVENTS)
    _write_table(pa, pq, ann_rows, ["trace_id", "patterns", "num_frames", "dt", "text"], dest / ANNOTATIONS)
    return {"traces": len(trace_rows), "annotations": len(ann_rows), "events": len(event_rows)}


def _read(pq: Any, path: Path) -> list[dict[str, Any]]:
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:
        raise ExchangeError(f"{path}: cannot read Parquet ({exc})") from None


def read_rows(pq: Any, paths: list[Path]) -> list[dict[str, Any]]:
    """The rows of one table written as one or more Parquet files (shards), in order."""
    return [row for path in paths for row in _read(pq, path)]


def from_rows(trace_rows: list[dict[str, Any]], event_rows: list[dict[str, Any]],
              ann_rows: list[dict[str, Any]] | None, where: str) -> tuple[dict[str, Trace], dict[str, Annotation]]:
    """Traces and annotations (by trace id) from the rows of the three tables; ``where`` names the
    traces table in errors. ``ann_rows`` None: no annotations table."""
    traces: dict[str, Trace] = {}
    for row in trace_rows:
        here = f"{where}: trace {row.get('trace_id')!r}"
        try:
            header = json.loads(row["header"])
            shapes = json.loads(row["arrays"])
            arrays = {name: np.asarray(row[name], dtype=dtype).reshape(shape)
                      for name, (dtype, shape) in shapes.items()}
            trace = Trace.from_header(header, arrays, here)
        except TraceFormatError as exc:
            raise ExchangeError(str(exc)) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise ExchangeError(f"{here}: malformed ({exc})") from None
        traces[row["trace_id"]] = trace
    annotations: dict[str, Annotation] = {}
    grouped: dict[str, dict[str, list]] = {}
    for row in event_rows:
        grouped.setdefault(row["trace_id"], {}).setdefault(row["pattern"], []).append(
            (int(row["frame"]), json.loads(row["params"])))
    for row in ann_rows or []:
        tid = row["trace_id"]
        annotations[tid] = Annotation(pattern_events=grouped.get(tid, {}), num_frames=int(row["num_frames"]),
                                      patterns=list(row["patterns"]), dt=float(row["dt"]),
                                      trace_id=str(row.get("annotation_trace") or ""),
                                      timings=json.loads(row["timings"]), errors=json.loads(row["errors"]))
    return traces, annotations


def read_parquet(folder: str | os.PathLike) -> tuple[dict[str, Trace], dict[str, Annotation]]:
    """The traces and annotations of an exported ``folder``, by trace id."""
    _, pq = _pyarrow()
    root = Path(folder)
    if not (root / TRACES).is_file():
        raise ExchangeError(f"{root}: no {TRACES} (write one with `simpatterns export`)")
    has_ann = (root / ANNOTATIONS).is_file()
    events = read_rows(pq, [root / EVENTS]) if has_ann and (root / EVENTS).is_file() else []
    return from_rows(read_rows(pq, [root / TRACES]), events,
                     read_rows(pq, [root / ANNOTATIONS]) if has_ann else None, str(root / TRACES))


def write_back(traces: dict[str, Trace], annotations: dict[str, Annotation], dest: Path) -> dict[str, int]:
    """Write traces (``ID.npz``) and annotations (``ID.annotation.jsonl``) under ``dest``."""
    for tid, trace in traces.items():
        trace.save(dest / f"{tid}.npz")
    for tid, ann in annotations.items():
        ann.save(dest / f"{tid}{ANNOTATION_SUFFIX}")
    return {"traces": len(traces), "annotations": len(annotations)}


def import_parquet(folder: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, int]:
    """Write the traces (``ID.npz``) and annotations (``ID.annotation.jsonl``) of an
    exported ``folder`` into ``out`` (default ``folder``). Returns counts."""
    traces, annotations = read_parquet(folder)
    return write_back(traces, annotations, Path(out) if out is not None else Path(folder))


__all__ = ["ANNOTATIONS", "EVENTS", "TRACES", "ExchangeError", "collect_rows", "export_parquet", "from_rows",
           "import_parquet", "read_parquet", "read_rows", "write_back"]
