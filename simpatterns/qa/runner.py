"""Ask a model the questions: concurrency, budget, transcript, checkpoints, resume, replay.

A run directory holds ``run.json`` (what was asked: questions, conditions,
library view, context options, sampling), ``responses.jsonl`` (one line per
answered (question, condition): the raw response, never parsed here, so
scoring re-runs offline), ``summaries.jsonl`` (step 1 of the summary
condition) and, by default, the LLM transcript ``transcript.jsonl``.

Every answer is appended (one write, flushed) as soon as it arrives, so a
killed run loses at most the requests in flight; running the same command
again skips what is answered. Ctrl-C cancels the requests in flight at once.
When the run ends (or stops), ``responses.jsonl`` is rewritten in question
order, so two runs that got the same answers (a replayed transcript) leave
identical files.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write_json, atomic_write_lines
from simpatterns.parallel import Backend
from simpatterns.qa.context import ContextBuilder, ContextOptions, check_conditions
from simpatterns.qa.questions import QUESTIONS_FILE, Question

RUN_FORMAT = "simpatterns-qa-run"
RUN_VERSION = 1
RUN_FILE = "run.json"
MAX_FAILURES_IN_A_ROW = 8  # then the server is down or refuses everything: stop instead of trying every question
RESPONSES_FILE = "responses.jsonl"
SUMMARIES_FILE = "summaries.jsonl"
TRANSCRIPT_FILE = "transcript.jsonl"


class QARunError(SimpatternsError, RuntimeError):
    """The run cannot start or resume; the message says why."""


@dataclass
class EvalSettings:
    conditions: list[str] = field(default_factory=lambda: ["annotation"])
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int = 0
    options: ContextOptions = field(default_factory=ContextOptions)

    def to_json(self) -> dict[str, Any]:
        return {"conditions": list(self.conditions), "temperature": self.temperature, "max_tokens": self.max_tokens,
                "seed": self.seed, "options": self.options.to_json()}


@dataclass
class QAOutcome:
    answered: int = 0  # this run
    already: int = 0  # found in the run directory
    failed: int = 0
    stopped: str | None = None  # why the run stopped early (budget)
    errors: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.stopped is None


def slug(text: str) -> str:
    """A file-name-safe form of a label: 'wall graze' -> 'wall_graze'."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def request_seed(seed: int, qid: str, condition: str) -> int:
    h = hashlib.blake2b(f"{seed}\0{qid}\0{condition}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFF


class JsonlLog:
    """Append-only JSON lines with a key; a torn last line (a kill mid-write) is dropped on reading."""

    def __init__(self, path: Path, key: Callable[[dict[str, Any]], Any]):
        self.path = path
        self.key = key
        self.records: dict[Any, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    if lineno == len(lines):
                        continue  # torn by a kill: that answer is asked again
                    raise QARunError(f"{path}:{lineno}:{exc.colno}: not JSON ({exc.msg})") from None
                self.records[key(rec)] = rec
        self._fh: Any = None

    def __contains__(self, k: Any) -> bool:
        return k in self.records

    def append(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            self._fh.write(line)
            self._fh.flush()
            self.records[self.key(rec)] = rec

    def finalize(self, order: Callable[[dict[str, Any]], Any]) -> None:
        """Close and rewrite the file sorted by ``order`` (atomically)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            if self.records or self.path.exists():
                recs = sorted(self.records.values(), key=order)
                atomic_write_lines(self.path, (json.dumps(r, ensure_ascii=False, sort_keys=True) for r in recs))


def read_responses(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    path = Path(run_dir) / RESPONSES_FILE
    if not path.exists():
        raise QARunError(f"{path}: no responses (run `simpatterns qa eval` first)")
    return list(JsonlLog(path, lambda r: (r["qid"], r["condition"])).records.values())


def read_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise QARunError(f"{path}: not a Q&A run directory (no {RUN_FILE})") from None
    except json.JSONDecodeError as exc:
        raise QARunError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None


def _check_same_run(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    for key, what in (("questions_digest", "questions"), ("library", "library"), ("settings", "settings")):
        a, b = old.get(key), new.get(key)
        if key == "settings" and isinstance(a, dict) and isinstance(b, dict):
            a = {k: v for k, v in a.items() if k != "conditions"}
            b = {k: v for k, v in b.items() if k != "conditions"}
        if a != b:
            raise QARunError(f"{run_dir} holds a run with different {what} (see {run_dir / RUN_FILE}); "
                           "use another --out directory, or delete it to start over")


def questions_digest(questions: Sequence[Question]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for q in questions:
        h.update(json.dumps(q.to_json(), sort_keys=True).encode())
    return h.hexdigest()


def run_eval(
    questions: Sequence[Question],
    builder: ContextBuilder,
    client: Any,
    out_dir: str | os.PathLike,
    settings: EvalSettings | None = None,
    *,
    run_info: dict[str, Any] | None = None,
    progress: bool = False,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> QAOutcome:
    """Answer every (question, condition) not yet in ``out_dir`` with ``client`` (an `LLMClient`).

    ``run_info`` is recorded in run.json (``questions_path`` defaults to the data set's questions file,
    which `report.score_run` reads; ``llm``: what answered)."""
    settings = settings or EvalSettings()
    settings.conditions = check_conditions(settings.conditions)
    out = Path(out_dir)
    default_path = builder.root / QUESTIONS_FILE
    info = {"format": RUN_FORMAT, "version": RUN_VERSION, "questions_digest": questions_digest(questions),
            **({"questions_path": str(default_path.resolve())} if default_path.exists() else {}),
            "questions": len(questions), "library": {"labels": builder.library.order(), "visible": builder.visible},
            "settings": settings.to_json(), **(run_info or {})}
    if (out / RUN_FILE).exists():
        old = read_run(out)
        _check_same_run(old, info, out)
        info["settings"]["conditions"] = list(dict.fromkeys(old["settings"]["conditions"] + settings.conditions))
    atomic_write_json(out / RUN_FILE, info)
    responses = JsonlLog(out / RESPONSES_FILE, lambda r: (r["qid"], r["condition"]))
    summaries = JsonlLog(out / SUMMARIES_FILE, lambda r: r["key"])
    order = {q.id: i for i, q in enumerate(questions)}
    pending = [(q, c) for q in questions for c in settings.conditions if (q.id, c) not in responses]
    outcome = QAOutcome(already=sum(1 for q in questions for c in settings.conditions if (q.id, c) in responses))
    try:
        if pending:
            builder.prepare([q for q, _ in pending], settings.conditions, workers=workers, progress=progress,
                            backend=backend)
            asyncio.run(_ask_all(pending, builder, client, settings, responses, summaries, outcome, progress, log))
    finally:
        cond_rank = {c: i for i, c in enumerate(info["settings"]["conditions"])}
        responses.finalize(lambda r: (order.get(r["qid"], len(order)), cond_rank.get(r["condition"], 99)))
        summaries.finalize(lambda r: r["key"])
    return outcome


async def _ask_all(pending: list[tuple[Question, str]], builder: ContextBuilder, client: Any, settings: EvalSettings,
                   responses: JsonlLog, summaries: JsonlLog, outcome: QAOutcome, progress: bool,
                   log: Callable[[str], None] | None) -> None:
    from simpatterns.llm import ChatRequest, LLMBudgetExceeded, LLMError
    from simpatterns.cli_support import ProgressBar

    sem = asyncio.Semaphore(max(1, int(getattr(client, "concurrency", 1))))
    summary_tasks: dict[str, asyncio.Task] = {}
    in_a_row = [0]  # failures since the last answer

    class Stopped(Exception):
        """The run stopped (budget, failures) while this request waited for its turn."""

    async def complete(messages: list[dict[str, Any]], seed: int, max_tokens: int) -> Any:
        req = ChatRequest(messages, temperature=settings.temperature, seed=seed, max_tokens=max_tokens)
        async with sem:
            if outcome.stopped:
                raise Stopped()
            return req, await client.acomplete_one(req)

    async def summary_of(q: Question) -> tuple[str, str]:
        key = f"{q.rollout}@{q.cut_frame}"
        if key in summaries:
            rec = summaries.records[key]
            return rec["summary"], rec["prompt_hash"]
        if key not in summary_tasks:
            async def make() -> tuple[str, str]:
                req, comp = await complete(builder.summary_request_messages(q), request_seed(settings.seed, key, "summary"),
                                           builder.options.summary_max_tokens)
                summaries.append({"key": key, "summary": comp.text, "prompt_hash": req.prompt_hash,
                                  "finish_reason": (comp.finish_reasons or [""])[0], "usage": comp.usage.to_dict(),
                                  "model": comp.model})
                return comp.text, req.prompt_hash
            summary_tasks[key] = asyncio.ensure_future(make())
        return await summary_tasks[key]

    with ProgressBar("answering", len(pending), enabled=progress) as bar:
        async def one(q: Question, condition: str) -> None:
            if outcome.stopped:
                return
            try:
                extra: dict[str, Any] = {}
                summary = None
                if condition == "summary":
                    summary, h = await summary_of(q)
                    extra = {"summary": summary, "summary_hash": h}
                messages = builder.messages(q, condition, summary)
                req, comp = await complete(messages, request_seed(settings.seed, q.id, condition), settings.max_tokens)
            except Stopped:
                return
            except LLMBudgetExceeded as exc:
                outcome.stopped = outcome.stopped or str(exc)
                return
            except LLMError as exc:
                outcome.failed += 1
                in_a_row[0] += 1
                if len(outcome.errors) < 20:
                    outcome.errors.append(f"{q.id} [{condition}]: {exc}")
                if log:
                    bar.log(f"{q.id} [{condition}]: {exc}")
                if in_a_row[0] >= MAX_FAILURES_IN_A_ROW and not outcome.stopped:
                    outcome.stopped = f"{in_a_row[0]} requests failed in a row, the last with: {exc}"
                return
            in_a_row[0] = 0
            responses.append({"qid": q.id, "condition": condition, "response": comp.text,
                              "finish_reason": (comp.finish_reasons or [""])[0], "prompt_hash": req.prompt_hash,
                              "usage": comp.usage.to_dict(), "model": comp.model, **extra})
            outcome.answered += 1
            bar.advance()

        await asyncio.gather(*(one(q, c) for q, c in pending))
