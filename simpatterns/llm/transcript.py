"""JSONL transcripts: one line per attempt sent to a model.

Each line is a JSON object::

    {"v": 1, "time": "2025-01-01T12:00:00.000Z", "backend": "openai",
     "model": "Qwen/Qwen3-Coder-30B-A3B-Instruct", "prompt_hash": "<sha256>",
     "attempt": 1, "status": "ok" | "error",
     "request": {"messages": [...], "n": 1, "temperature": 0.7, "seed": 0,
                 "max_tokens": 1024, "stop": null, "grammar": null},
     "response": {"texts": [...], "finish_reasons": [...]} | null,
     "usage": {"prompt_tokens": 812, "completion_tokens": 95},
     "latency_s": 1.93, "constrained": false,
     "error": {"kind": "server", "status": 500, "message": "..."} | null}

The file is append-only and each record is written with one ``write`` and
flushed, so a run that stops (budget, crash, Ctrl-C) leaves every finished
record intact; a torn last line is reported, not silently dropped.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from simpatterns.llm.errors import LLMTranscriptError

TRANSCRIPT_VERSION = 1
REQUIRED_KEYS = ("v", "prompt_hash", "status", "request")


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class TranscriptWriter:
    """Appends records to a JSONL file; safe to share between threads."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        record = {"v": TRANSCRIPT_VERSION, "time": _now(), **record}
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            if self._fh.closed:
                raise LLMTranscriptError(f"transcript {self.path} is closed")
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> "TranscriptWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_transcript(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Records of a transcript, checked; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise LLMTranscriptError(f"transcript {path} does not exist")
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            torn = lineno == len(lines) and not line.endswith("\n")
            what = "a torn last line (the run was interrupted while writing)" if torn else "invalid JSON"
            raise LLMTranscriptError(f"{path}:{lineno}: {what}: {exc.msg} at column {exc.colno}") from None
        if not isinstance(record, dict):
            raise LLMTranscriptError(f"{path}:{lineno}: a record must be a JSON object")
        missing = [k for k in REQUIRED_KEYS if k not in record]
        if missing:
            raise LLMTranscriptError(f"{path}:{lineno}: record lacks field(s) {missing}")
        if record["v"] != TRANSCRIPT_VERSION:
            raise LLMTranscriptError(
                f"{path}:{lineno}: transcript version {record['v']!r} is not supported "
                f"(this simpatterns reads version {TRANSCRIPT_VERSION})"
            )
        if record["status"] == "ok":
            resp = record.get("response")
            if not isinstance(resp, dict) or not isinstance(resp.get("texts"), list):
                raise LLMTranscriptError(f"{path}:{lineno}: an 'ok' record needs response.texts (a list)")
        yield record


def read_transcript(path: str | os.PathLike) -> list[dict[str, Any]]:
    return list(iter_transcript(path))
