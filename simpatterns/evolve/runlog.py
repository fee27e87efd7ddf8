"""The run directory: an append-only JSONL log of every sample plus snapshots.

``RUN_DIR/``

- ``job.json``: what the job was started with (config, labels, traces hash, proposer);
- ``samples.jsonl``: one JSON object per line (a record of
  `simpatterns.evolve.records`), appended in groups that end with a commit
  record (``label_start``, ``round_end``, ``label_done``, ``proposed_labels``,
  ``job_done``). A group is written with one ``write`` and fsynced;
  on resume everything after the last commit record (a torn group from a
  ``kill -9``) is cut off, so the log always ends on a consistent state;
- ``quarantine.jsonl``: samples that could not be processed or logged, each
  with the reason (their log record is a rejection with reason ``quarantined``);
- ``timings.jsonl``: what each evaluated sample cost in CPU seconds, as the
  sandbox measured it from outside the child (for reports; it differs between
  runs, so nothing that decides the library reads it);
- ``snapshot.json``: the state after some commit (islands, counters, the
  seed scheme the random streams derive from) and the log offset it
  corresponds to, written atomically; resume loads it and replays the log
  records after that offset.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from simpatterns.errors import SimpatternsError
from simpatterns.evolve.records import COMMITS
from simpatterns.files import atomic_write_json


class RunLogError(SimpatternsError, ValueError):
    """The run directory is inconsistent; the message names the file and line."""


class RunLog:
    def __init__(self, run_dir: str | os.PathLike):
        self.dir = Path(run_dir)
        self.samples_path = self.dir / "samples.jsonl"
        self.snapshot_path = self.dir / "snapshot.json"
        self.job_path = self.dir / "job.json"
        self.quarantine_path = self.dir / "quarantine.jsonl"
        self.timings_path = self.dir / "timings.jsonl"

    # -------------------------------------------------------------- writing
    def append(self, records: list[dict[str, Any]]) -> int:
        """Append a group of records (the last should be a commit); returns the new size."""
        if not records:
            return self.size()
        blob = "".join(json.dumps(r, separators=(",", ":"), allow_nan=False) + "\n" for r in records).encode()
        fd = os.open(self.samples_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(blob)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def quarantine(self, record: dict[str, Any]) -> None:
        """Append one unprocessable item and why (ASCII JSON: any text can be written)."""
        line = json.dumps(record, ensure_ascii=True, default=repr, allow_nan=True) + "\n"
        with open(self.quarantine_path, "a", encoding="ascii", errors="replace") as fh:
            fh.write(line)

    def write_timings(self, rows: list[dict[str, Any]]) -> None:
        """Append measured times (one JSON line each); not part of the reproducible log."""
        if rows:
            with open(self.timings_path, "a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))

    def size(self) -> int:
        try:
            return self.samples_path.stat().st_size
        except FileNotFoundError:
            return 0

    def write_snapshot(self, state: dict[str, Any]) -> None:
        atomic_write_json(self.snapshot_path, state, indent=None, fsync=True)  # survives a power cut

    def write_job(self, job: dict[str, Any]) -> None:
        atomic_write_json(self.job_path, job, indent=None, fsync=True)

    # -------------------------------------------------------------- reading
    def read_job(self) -> dict[str, Any] | None:
        if not self.job_path.is_file():
            return None
        try:
            return json.loads(self.job_path.read_text())
        except json.JSONDecodeError as exc:
            raise RunLogError(f"{self.job_path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from exc

    def read_snapshot(self) -> dict[str, Any] | None:
        if not self.snapshot_path.is_file():
            return None
        try:
            return json.loads(self.snapshot_path.read_text())
        except json.JSONDecodeError:
            return None  # a damaged snapshot: replay the whole log instead

    def records(self, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(end_offset, record)`` for every complete line from byte ``start``."""
        if not self.samples_path.is_file():
            return
        with open(self.samples_path, "rb") as fh:
            fh.seek(start)
            offset = start
            lineno = 0
            for raw in fh:
                lineno += 1
                if not raw.endswith(b"\n"):
                    return  # torn last line
                offset += len(raw)
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise RunLogError(f"{self.samples_path}: record at byte {offset - len(raw)} is not JSON "
                                      f"({exc.msg}); the log is damaged") from exc
                yield offset, rec

    def committed_end(self, start: int = 0) -> int:
        """Byte offset just after the last commit record at or after ``start``."""
        end = start
        for offset, rec in self.records(start):
            if rec.get("type") in COMMITS:
                end = offset
        return end

    def truncate(self, offset: int) -> None:
        """Cut off a torn tail (records after the last commit)."""
        if self.samples_path.is_file() and self.size() > offset:
            with open(self.samples_path, "r+b") as fh:
                fh.truncate(offset)
                fh.flush()
                os.fsync(fh.fileno())
