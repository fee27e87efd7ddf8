"""Replay backend: answers from a recorded transcript, keyed by prompt hash.

A run recorded with ``--record run.jsonl`` (any backend) is reproduced bit
for bit, without a server, by ``--llm replay:run.jsonl``: each request gets
the recorded answers of the same prompt hash (messages + sampling
parameters), in recorded order. Asking for a prompt the transcript does not
hold is an `LLMReplayMissing` naming the hash and the start of the prompt.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from simpatterns.llm.client import LLMBackend
from simpatterns.llm.errors import LLMReplayMissing
from simpatterns.llm.request import ChatRequest, Completion, Usage
from simpatterns.llm.transcript import read_transcript


class ReplayBackend(LLMBackend):
    name = "replay"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        records = read_transcript(self.path)
        self._answers: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._errors: dict[str, dict[str, Any]] = {}
        self._served: dict[str, int] = defaultdict(int)
        for rec in records:
            if rec["status"] == "ok":
                self._answers[rec["prompt_hash"]].append(rec)
            else:
                self._errors[rec["prompt_hash"]] = rec
        self._model = next((str(r.get("model")) for r in records if r["status"] == "ok" and r.get("model")), "replay")
        # what answered when recording: prompts that depend on it (compact for local models) come out the same
        self._server = next((str(r["server"]) for r in records if r.get("server")), "unknown")
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self._model

    @property
    def server_kind(self) -> str:
        return self._server

    def recommended_timeout(self) -> float | None:
        return None  # nothing to wait for

    def __len__(self) -> int:
        return sum(len(q) for q in self._answers.values())

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        h = request.prompt_hash
        with self._lock:
            q = self._answers.get(h)
            rec = q.popleft() if q else None
            if rec is not None:
                self._served[h] += 1
            served = self._served.get(h, 0)
        if rec is None:
            where = f"transcript {self.path}"
            if served:
                raise LLMReplayMissing(
                    f"prompt {h[:12]} ({request.preview()!r}) was answered {served} time(s) in {where} "
                    "and is now asked for once more; the replayed run diverged from the recorded one"
                )
            failed = self._errors.get(h)
            if failed is not None:
                err = (failed.get("error") or {}).get("message", "an error")
                raise LLMReplayMissing(
                    f"prompt {h[:12]} ({request.preview()!r}) only failed when recorded in {where}: {err}"
                )
            raise LLMReplayMissing(
                f"prompt {h[:12]} ({request.preview()!r}) is not in {where} "
                f"({len(self._answers)} distinct prompts recorded); re-record the run with --record"
            )
        resp = rec["response"]
        return Completion(
            texts=[str(t) for t in resp["texts"]],
            usage=Usage.from_dict(rec.get("usage")),
            model=str(rec.get("model") or self._model),
            latency_s=float(rec.get("latency_s") or 0.0),
            finish_reasons=[str(r) for r in resp.get("finish_reasons", [])],
            constrained=bool(rec.get("constrained", False)),
        )

    async def acall(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        return self.call(request, timeout_s)  # no I/O: no thread needed
