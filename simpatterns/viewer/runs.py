"""The Q&A and agent records about one trace, for its viewer page.

A Q&A run (``simpatterns qa eval``) contributes each question asked about the
trace: its text, window and cut frame, the messages the model was shown (from
the run's transcript, by prompt hash, with its images), the raw answer, the parsed answer and
the gold answer. An agent run (``simpatterns agent eval``) contributes the
episodes on the trace's task: every attempt with its action and outcome.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simpatterns.errors import SimpatternsError
from simpatterns.trace import Trace


class RunReadError(SimpatternsError, ValueError):
    """A run folder cannot be read; the message names the file."""


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(path.read_text(encoding="utf-8").splitlines()):  # a torn last line (a kill)
                break
            raise RunReadError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _json(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise RunReadError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(d, dict):
        raise RunReadError(f"{path}: expected a JSON object")
    return d


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def qa_data(run_dir: str | os.PathLike, trace_path: Path) -> list[dict[str, Any]]:
    """The questions of a Q&A run about the trace at ``trace_path`` (matched by path, or by
    file name when the data set moved), one entry per (question, condition) answered."""
    from simpatterns.qa.questions import (
        QuestionFormatError,
        dataset_root,
        read_questions,
    )
    from simpatterns.qa.runner import RESPONSES_FILE, RUN_FILE, TRANSCRIPT_FILE

    run = Path(run_dir)
    info = _json(run / RUN_FILE)
    qpath = info.get("questions_path")
    if not isinstance(qpath, str):
        raise RunReadError(f"{run / RUN_FILE}: field 'questions_path' is missing")
    try:
        questions = read_questions(qpath)
    except QuestionFormatError as exc:
        raise RunReadError(str(exc)) from None
    root = dataset_root(qpath)
    mine = {q.id: q for q in questions
            if _same_file(root / q.rollout, trace_path) or Path(q.rollout).name == trace_path.name}
    graded = {(g.get("qid"), g.get("condition")): g for g in _jsonl(run / "graded.jsonl")}
    shown = {}
    for rec in _jsonl(run / TRANSCRIPT_FILE):
        if rec.get("status") == "ok" and isinstance(rec.get("request"), dict):
            shown[rec.get("prompt_hash")] = rec["request"].get("messages") or []
    out = []
    for r in _jsonl(run / RESPONSES_FILE):
        q = mine.get(r.get("qid"))
        if q is None:
            continue
        g = graded.get((q.id, r.get("condition")), {})
        out.append({"id": q.id, "condition": r.get("condition"), "question": q.text, "family": q.family,
                    "window": q.window, "cut_frame": q.cut_frame, "gold": q.answer, "response": r.get("response"),
                    "parsed": g.get("parsed"), "correct": g.get("correct"),
                    "shown": [{"role": m.get("role"), "content": _text(m.get("content")),
                               "images": _images(m.get("content"))}
                              for m in shown.get(r.get("prompt_hash"), []) if isinstance(m, dict)]})
    return out


def _text(content: Any) -> str:
    """Message content as text; image parts become a placeholder naming them."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if p.get("type") == "text" else f"[{p.get('type', 'part')}]"
                         for p in content if isinstance(p, dict))
    return ""


def _images(content: Any) -> list[str]:
    """The inline images (``data:image/...`` URLs) of a message, as the model got them."""
    if not isinstance(content, list):
        return []
    urls = [(p.get("image_url") or {}).get("url") for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return [u for u in urls if isinstance(u, str) and u.startswith("data:image/")]


def agent_data(run_dir: str | os.PathLike, trace: Trace) -> list[dict[str, Any]]:
    """The episodes of an agent run on the trace's task (template and variant from its meta)."""
    from simpatterns.agents.runner import EPISODES_FILE
    from simpatterns.agents.tasks import task_id

    run = Path(run_dir)
    path = run / EPISODES_FILE
    if not path.exists():
        raise RunReadError(f"{path}: no episodes (not an agent run?)")
    meta = trace.meta
    if meta.get("template") is None or meta.get("variant") is None:
        return []
    task = task_id(meta["template"], int(meta["variant"]))
    return [{"condition": e.get("condition"), "seed": e.get("seed"), "task": task,
             "attempts": e.get("attempts") or [], "stopped": e.get("stopped", "")}
            for e in _jsonl(path) if e.get("task") == task]
