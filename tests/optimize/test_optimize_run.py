"""`simpatterns.optimize.run.optimize_scene`: the optimize command's work, from Python."""

from __future__ import annotations

import json

import pytest

from simpatterns.optimize.run import (
    OptimizeError,
    Outputs,
    SearchSettings,
    optimize_scene,
    resolve_scene,
)
from simpatterns.trace import Trace

SETTINGS = SearchSettings(method="random", budget=6, seed=2, keep_going=True)


def test_a_search_writes_its_outputs_and_a_second_call_replays_it(tmp_path):
    outputs = Outputs(tmp_path / "res" / "best.json", tmp_path / "best.npz")
    headers: list[str] = []
    seen: list[tuple[int, int]] = []
    report = optimize_scene(template="00000", variant=0, settings=SETTINGS, outputs=outputs,
                            on_start=lambda r: headers.append(r.header(SETTINGS, None)),
                            progress=lambda done, total, best: seen.append((done, total)))
    assert headers == ["random on scene 00000 variant 0: PHYRE task success (sparse 0/1)\n6 rollouts at most, seed 2"]
    assert report.reward == "task" and not report.interrupted and report.replayed == 0
    assert report.result is not None and report.result.samples == 6 and seen[-1] == (6, 6)
    assert [w for w, _ in report.written] == ["result", "best trace"]
    data = json.loads(outputs.json.read_text())
    assert data["best_action"] == report.result.best_action and data["seed"] == 2
    assert Trace.load(outputs.trace).num_frames == report.result.best_trace.num_frames
    assert report.checkpoint == tmp_path / "res" / "best.evaluations.jsonl"

    again = optimize_scene(resolve_scene("00000", 0), settings=SETTINGS, outputs=outputs)
    assert again.replayed == 6 and again.result.best_action == report.result.best_action


@pytest.mark.parametrize("kwargs, message", [
    ({"template": "00000", "settings": SearchSettings(method="hill")}, "--method must be anneal or random"),
    ({"template": "00000", "settings": SearchSettings(budget=0)}, "--rollouts must be >= 1"),
    ({"template": "00000", "settings": SearchSettings(sparse=True)}, "--sparse needs --goal"),
    ({"scene": "buckets", "template": "00000"}, "give --scene or --template, not both"),
    ({"template": "00000", "variant": 10_000}, "has variants 0.."),
    ({"scene": "buckets"}, "this scene has no PHYRE goal"),
    ({"template": "00000", "goal": "missing.rwd"}, "missing.rwd: cannot read"),
])
def test_bad_settings_are_refused_before_the_search(kwargs, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started: list = []
    with pytest.raises(OptimizeError, match=message):
        optimize_scene(on_start=started.append, **kwargs)
    assert not started


def test_an_output_that_cannot_be_written_is_refused_first(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OptimizeError, match="afile"):
        optimize_scene(template="00000", settings=SETTINGS, outputs=Outputs(gif=tmp_path / "afile" / "b.gif"))
