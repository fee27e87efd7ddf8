"""`simpatterns.evolve.run.discover`: the discover command's work, from Python."""

from __future__ import annotations

import pytest

from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve.config import ConfigError
from simpatterns.evolve.run import DiscoverError, Overrides, discover, load_settings


def _labels(tmp_path, builtin):
    seed = tmp_path / "mistuned.py"
    seed.write_text(builtin.get("high energy impact").source.replace("HIGH_SPEED = 100.0", "HIGH_SPEED = 40.0"))
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "high energy impact"\ndescription = "a hard collision"\n'
                      'depends = ["collision start"]\nparams = ["object_a", "object_b", "speed"]\n'
                      f'seed = "{seed}"\n\n[evolve]\nsamples_per_label = 50\nseed = 1\n')
    return labels


def test_settings_layer_the_labels_file_a_config_file_and_overrides(tmp_path, builtin):
    labels = _labels(tmp_path, builtin)
    config = tmp_path / "evolve.toml"
    config.write_text("[evolve]\nsamples_per_label = 20\nbatch_size = 2\n")
    specs, cfg = load_settings(labels, config, Overrides(seed=7, fitness="paper", theta=0.5))
    assert [s.label for s in specs] == ["high energy impact"]
    assert (cfg.samples_per_label, cfg.batch_size, cfg.seed) == (20, 2, 7)
    assert (cfg.fitness.kind, cfg.fitness.theta) == ("paper", 0.5)
    with pytest.raises(ConfigError, match="--fitness must be one of"):
        load_settings(labels, None, Overrides(fitness="best"))
    with pytest.raises(ConfigError, match="prompt mode must be auto, full or compact"):
        load_settings(labels, None, Overrides(prompt="terse"))


def test_an_offline_discovery_from_files(trace_dir, builtin, small_library, tmp_path):
    labels = _labels(tmp_path, builtin)
    base = small_library.save(tmp_path / "base")
    seen: list[dict] = []
    report = discover(trace_dir, labels, tmp_path / "lib", base_library=str(base), progress=seen.append,
                      overrides=Overrides(samples_per_label=8, batch_size=4, workers=1, seed=3))
    assert report.traces == 24 and report.run_dir == tmp_path / "lib.run"
    [row] = report.rows
    assert row.label == "high energy impact" and row.samples == 8
    assert seen and seen[-1]["label"] == "high energy impact"
    assert report.stop_reason.startswith("sample budget")
    lib = PatternLibrary.load(tmp_path / "lib")
    assert ("high energy impact" in lib.order()) == row.accepted == (report.accepted == 1)
    if row.fitness is not None:
        assert row.cells()[3] == f"{row.fitness:.5g}" and row.gain is not None


def test_an_unreadable_reasoning_file_stops_it_before_it_runs(trace_dir, builtin, tmp_path):
    with pytest.raises(DiscoverError, match="nothing.txt: cannot read reasoning text"):
        discover(trace_dir, _labels(tmp_path, builtin), tmp_path / "lib", reasoning=[tmp_path / "nothing.txt"])
    assert not (tmp_path / "lib.run").exists()
