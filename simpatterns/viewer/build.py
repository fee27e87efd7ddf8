"""Build viewer pages from files: one trace (with its annotation, a program, runs) or a dataset folder."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from simpatterns.annotation import Annotation
from simpatterns.files import atomic_write
from simpatterns.trace import Trace
from simpatterns.viewer.page import MAX_DRAW_FRAMES, IndexRow, TracePage, index_html
from simpatterns.viewer.runs import agent_data, qa_data

# what `simpatterns annotate` writes beside a trace, then what `simpatterns demo` writes
ANNOTATION_SUFFIXES = (".annotation.jsonl", ".jsonl")


def annotation_beside(trace_path: Path) -> Path | None:
    stem = trace_path.name.removesuffix(".npz")
    return next((p for s in ANNOTATION_SUFFIXES if (p := trace_path.with_name(stem + s)).exists()), None)


def library_for(trace: Trace) -> Any:
    from simpatterns.dsl.program import builtin_library

    return builtin_library("3d" if trace.dim == 3 else "phyre")


def trace_page(trace_path: str | os.PathLike, annotation: str | os.PathLike | None = None,
               program: str | os.PathLike | None = None, qa_run: str | os.PathLike | None = None,
               agent_run: str | os.PathLike | None = None, max_frames: int = MAX_DRAW_FRAMES,
               back: str | None = None, program_may_not_fit: bool = False) -> TracePage:
    """The page of one trace. The annotation is ``annotation``, else the one `simpatterns
    annotate` wrote beside the trace, else the trace annotated with the built-in library.
    A program naming bodies the scene lacks raises ValueError, or with
    ``program_may_not_fit`` (a dataset of several scenes) leaves the page without it and says so."""
    path = Path(trace_path)
    trace = Trace.load(path)
    ann_path = Path(annotation) if annotation is not None else annotation_beside(path)
    if ann_path is not None:
        ann = Annotation.load(ann_path)
        if ann.num_frames != trace.num_frames:
            raise ValueError(f"{ann_path}: annotates {ann.num_frames} frames, {path} has {trace.num_frames}")
    else:
        from simpatterns.annotate.annotator import annotate

        ann = annotate(trace, library_for(trace), trace_id=path.name)
    prog, notes = None, []
    if program is not None:
        from simpatterns.dsl import RewardProgram

        prog = RewardProgram.coerce(Path(program), library_for(trace))
        if program_may_not_fit and prog.check_bodies(trace.names):
            notes.append(f"{program} names bodies this scene does not have; not evaluated here")
            prog = None
        elif prog is not None:
            prog.require_bodies(trace.names, str(path))
    return TracePage(
        trace=trace, title=path.name, annotation=ann, program=prog,
        qa=qa_data(qa_run, path) if qa_run is not None else [],
        agent=agent_data(agent_run, trace) if agent_run is not None else [],
        max_frames=max_frames, back=back, notes=notes,
    )


def pages_folder(index: Path) -> Path:
    """Where a dataset index keeps its trace pages: ``<index stem>_files`` beside it."""
    return index.with_name(index.stem + "_files")


def dataset_pages(folder: str | os.PathLike, out: str | os.PathLike, max_frames: int = MAX_DRAW_FRAMES,
                  **companions: Any) -> list[Path]:
    """An index page at ``out`` for every trace under ``folder`` (searched recursively), linking
    one page per trace in `pages_folder`. Returns the pages written, index last."""
    root, out = Path(folder), Path(out)
    traces = sorted(root.rglob("*.npz"))
    if not traces:
        raise ValueError(f"{root}: no traces (.npz) in this folder")
    pages = pages_folder(out)
    listed = _index_rows(root)
    rows, written = [], []
    for path in traces:
        rel = path.relative_to(root)
        name = "__".join(rel.with_suffix("").parts) + ".html"
        page = trace_page(path, max_frames=max_frames, back=os.path.relpath(out, pages), program_may_not_fit=True,
                          **companions)
        written.append(page.write(pages / name))
        m = {**page.trace.meta, **listed.get(str(rel), {})}
        counts = Counter(e.pattern for e in page.annotation.events) if page.annotation is not None else Counter()
        rows.append(IndexRow(page=f"{pages.name}/{name}", file=str(rel), template=m.get("template", ""),
                             variant=m.get("variant", ""), kind=_kind(path.name, m), success=bool(page.trace.success),
                             frames=page.trace.num_frames, events=sum(counts.values()), counts=dict(counts)))
    written.append(atomic_write(out, index_html(f"{root.name}: {len(rows)} traces", rows)))
    return written


def _index_rows(root: Path) -> dict[str, dict[str, Any]]:
    """The rows of the folder's ``index.jsonl`` (`simpatterns dataset`) by file; none without one."""
    from simpatterns.simulators.dataset import INDEX_NAME

    path = root / INDEX_NAME
    if not path.exists():
        return {}
    out = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if isinstance(row, dict) and isinstance(row.get("file"), str):
            out[row["file"]] = row
    return out


def _kind(name: str, meta: dict[str, Any]) -> str:
    """The rollout's kind (random, solution, near-miss): the dataset index's, else the file
    name's ``T<template>_V<variant>_<kind><k>.npz``."""
    if meta.get("kind"):
        return str(meta["kind"])
    parts = name.removesuffix(".npz").split("_")
    return parts[2].rstrip("0123456789") if len(parts) >= 3 else ""
