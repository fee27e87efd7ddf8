"""The discovery log's typed records against a run written before they were typed
(tests/data/discovery_run_v1: a scripted-LLM job with a guided label, a self-discovered
one, rejected, duplicate and registered samples)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.records import (
    COMMITS,
    KINDS,
    LabelDone,
    ProposedLabels,
    RecordError,
    Sample,
    record_from_json,
)
from simpatterns.evolve.report import build_report
from simpatterns.evolve.runlog import RunLog
from simpatterns.evolve.state import JobState, open_job, replay

RUN = Path(__file__).resolve().parents[1] / "data" / "discovery_run_v1"


def lines() -> list[str]:
    return (RUN / "samples.jsonl").read_text().splitlines()


def test_every_record_reads_and_writes_back_byte_for_byte():
    kinds = set()
    for line in lines():
        d = json.loads(line)
        rec = record_from_json(d)
        kinds.add(rec.KIND)
        assert rec.KIND == d["type"]
        assert json.dumps(rec.to_json(), separators=(",", ":"), allow_nan=False) == line
    assert kinds == set(KINDS) and COMMITS == set(KINDS) - {"sample"}


def test_records_are_typed():
    recs = [record_from_json(json.loads(line)) for line in lines()]
    samples = [r for r in recs if isinstance(r, Sample)]
    assert {r.status for r in samples} == {"registered", "rejected", "duplicate"}
    scored = [r for r in samples if r.scored]
    assert all(r.fitness is not None and r.signature for r in scored)
    assert all(r.reason is not None for r in samples if r.status != "registered")
    [proposed] = [r for r in recs if isinstance(r, ProposedLabels)]
    assert [s.label for s in proposed.labels] == ["airborne"] and all(s.self_discovered for s in proposed.labels)
    done = [r for r in recs if isinstance(r, LabelDone)]
    assert [r.accepted for r in done] == [True, True] and all(r.program and r.provenance for r in done)
    for bad, what in (({"type": "nope"}, "unknown record type"), ({"type": "round_end"}, "malformed 'round_end'")):
        with pytest.raises(RecordError, match=what):
            record_from_json(bad)


def test_the_log_replays_to_the_state_its_job_saved():
    job = json.loads((RUN / "job.json").read_text())
    snapshot = json.loads((RUN / "snapshot.json").read_text())
    state = replay(JobState(job["seed"], [LabelSpec(**s) for s in job["labels"]]), RunLog(RUN))
    assert state.to_json() == snapshot["state"]
    assert JobState.from_json(snapshot["state"]).to_json() == snapshot["state"]
    assert state.finished and [r.label for r in state.done] == ["brief tap", "airborne"]


def test_a_half_replayed_state_round_trips(tmp_path):
    job = json.loads((RUN / "job.json").read_text())
    state = JobState(job["seed"], [LabelSpec(**s) for s in job["labels"]])
    for line in lines()[:6]:  # inside the first label's run: a database with programs
        state.apply(record_from_json(json.loads(line)))
    assert state.current is not None and state.current.samples > 0
    again = JobState.from_json(json.loads(json.dumps(state.to_json())))
    assert again.to_json() == state.to_json()
    best = state.current.db.best()  # replayed: what it declares is read from its source when asked
    assert best is not None and best.declared()["PATTERN"] == "brief tap"


@pytest.mark.parametrize("snapshot", [True, False])
def test_resuming_the_finished_run_changes_nothing(tmp_path, snapshot):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    if not snapshot:
        (run / "snapshot.json").unlink()  # replay the whole log instead
    job = json.loads((run / "job.json").read_text())
    before = (run / "samples.jsonl").read_bytes()
    state, base_steps = open_job(RunLog(run), job["seed"], [LabelSpec(**s) for s in job["labels"]],
                                 job["traces"]["hash"], job["base_library"]["labels"], resume=True)
    # a run from before issue 12 logged the base library's times, not steps: they are counted again
    assert state.finished and "base_steps" not in job and base_steps == {}
    assert state.to_json() == json.loads((RUN / "snapshot.json").read_text())["state"]
    assert (run / "samples.jsonl").read_bytes() == before
    report = build_report(run)
    assert [lab.label for lab in report.labels] == ["brief tap", "airborne"] and all(lab.accepted for lab in report.labels)
