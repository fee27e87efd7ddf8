"""`simpatterns.demo.pipeline.run_demo`: the demo's steps from Python, each reported as it is done."""

from __future__ import annotations

import json

import pytest

from simpatterns.demo import pipeline as p


def test_run_demo_reports_each_step_and_writes_the_report(tmp_path):
    events: list = []
    report = p.run_demo(tmp_path / "report", budget=10, trials=0, workers=1, on_event=events.append)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["StepStarted", "DatasetDone", "StepStarted", "AnnotationDone", "StepStarted", "TextDone",
                     "StepStarted", "ProgramDone", "StepStarted", "AnnealDone", "StepStarted"]  # trials=0: no comparison
    starts = [e.seconds for e in events if isinstance(e, p.StepStarted)]
    assert starts == sorted(starts) and [e.title[0] for e in events if isinstance(e, p.StepStarted)] == list("123456")
    data = next(e for e in events if isinstance(e, p.DatasetDone))
    ann = next(e for e in events if isinstance(e, p.AnnotationDone))
    assert len(ann.rollouts) == len(data.rows) and sum(r[2] for r in ann.rollouts) == ann.events
    anneal = next(e for e in events if isinstance(e, p.AnnealDone))
    assert report.summary["anneal"]["samples"] == anneal.dense.samples <= 10
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["anneal"] == report.summary["anneal"]
    text = next(e for e in events if isinstance(e, p.TextDone))
    assert text.text in report.readme.read_text() and "comparison" not in report.summary


def test_run_demo_names_a_folder_it_cannot_create(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(p.DemoError, match="taken/report: cannot create the report folder"):
        p.run_demo(tmp_path / "taken" / "report")
