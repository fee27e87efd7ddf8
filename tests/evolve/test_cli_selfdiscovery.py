"""The command line (discover --offline, evolve report) and the self-discovery round."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.evolve.config import ConfigError, EvolveConfig, load_labels
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.proposers import LLMProposer
from simpatterns.evolve.runlog import RunLog
from simpatterns.evolve.selfdiscovery import parse_proposed_labels
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer


def test_discover_offline_and_report(trace_dir, builtin, tmp_path):
    seed = tmp_path / "seed.py"
    seed.write_text(builtin.get("high energy impact").source.replace("HIGH_SPEED = 100.0", "HIGH_SPEED = 40.0"))
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "high energy impact"\ndescription = "a hard hit"\n'
                      'depends = ["collision start"]\nparams = ["object_a", "object_b", "speed"]\nseed = "seed.py"\n'
                      '[evolve]\nbatch_size = 4\n')
    base = builtin.subset(["collision start"]).save(tmp_path / "base")
    out = tmp_path / "lib"
    runner = CliRunner()
    res = runner.invoke(app, ["discover", "--traces", str(trace_dir), "--labels", str(labels), "--out", str(out),
                              "--base-library", str(base), "--offline", "--samples", "8", "--seed", "1", "-q"])
    assert res.exit_code == 0, res.output
    assert "high energy impact" in res.output and (out / "library.json").is_file()
    manifest = json.loads((out / "library.json").read_text())
    assert [p["label"] for p in manifest["patterns"]] == ["collision start", "high energy impact"]
    res = runner.invoke(app, ["evolve", "report", str(tmp_path / "lib.run")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "lib.run" / "report" / "fitness_high_energy_impact.png").stat().st_size > 1000
    # the same run directory again without --resume is refused with a clear message
    res = runner.invoke(app, ["discover", "--traces", str(trace_dir), "--labels", str(labels), "--out", str(out),
                              "--base-library", str(base), "--offline", "--samples", "8", "--seed", "1", "-q"])
    assert res.exit_code == 2 and "--resume" in res.output


def test_cli_errors_name_the_problem(trace_dir, tmp_path):
    runner = CliRunner()
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "x"\n')
    res = runner.invoke(app, ["discover", "--traces", str(trace_dir), "--labels", str(labels), "--out",
                              str(tmp_path / "o"), "--offline"])
    assert res.exit_code == 2 and "label[0]" in res.output and "description" in res.output
    res = runner.invoke(app, ["discover", "--traces", str(trace_dir), "--labels", str(labels), "--out",
                              str(tmp_path / "o")])
    assert res.exit_code == 2 and "--offline" in res.output


def test_labels_and_config_files(tmp_path):
    p = tmp_path / "l.toml"
    p.write_text('[[label]]\nlabel = "Fast_Mover"\ndescription = " moves\\n fast "\n[evolve]\nseed = 3\n'
                 '[evolve.fitness]\ntheta = 0.01\n')
    specs, table = load_labels(p)
    assert specs[0].label == "fast mover" and specs[0].description == "moves fast"
    cfg = EvolveConfig.from_json(table)
    assert cfg.seed == 3 and cfg.fitness.theta == 0.01
    with pytest.raises(ConfigError, match="unknown field 'tehta'"):
        EvolveConfig.from_json({"fitness": {"tehta": 1}})
    p.write_text('[[label]]\nlabel = "a"\ndescription = "b"\nseed = "missing.py"\n')
    with pytest.raises(ConfigError, match="missing.py"):
        load_labels(p)


def test_parse_proposed_labels():
    text = 'Sure:\n```json\n[{"label": "Wall Graze", "description": "touches a wall briefly"},\n' \
           ' {"label": "bounce", "description": "dup"}, {"label": "", "description": "x"}, 7]\n```'
    specs = parse_proposed_labels(text, {"bounce"}, 5)
    assert [s.label for s in specs] == ["wall graze"] and specs[0].self_discovered


def test_self_discovery_round(traces, builtin, small_library, tmp_path):
    proposal = '[{"label": "airborne", "description": "A dynamic body touches nothing for a while."}]'
    good = "```python\n" + builtin.get("airborne").source + "```"
    rules = [Rule(contains="Propose up to", replies=[Reply(proposal)]),
             Rule(contains="Pattern to detect: 'airborne'", replies=[Reply(good)])]
    cfg = EvolveConfig(samples_per_label=4, batch_size=2, self_discovery=2, seed=5,
                       sandbox=SandboxLimits(timeout_s=5, smoke_timeout_s=2))
    with ScriptedLLMServer(rules=rules) as server:
        client = make_client("openai", base_url=server.base_url)
        job = DiscoveryJob(traces, [], small_library, tmp_path / "run", tmp_path / "lib", LLMProposer(client), cfg,
                           reasoning_texts=["The ball flew through the air before it hit the jar."])
        lib = job.run()
        client.close()
        asked = [r for r in server.requests if "Propose up to" in r["messages"][-1]["content"]]
    assert len(asked) == 1 and "flew through the air" in asked[0]["messages"][-1]["content"]
    assert "airborne" in lib and lib.entry("airborne").provenance == "self-discovered"
    kinds = [r["type"] for _, r in RunLog(tmp_path / "run").records()]
    assert kinds.count("proposed_labels") == 1 and kinds[-1] == "job_done"
    assert isinstance(LabelSpec(**job.state.labels[0].to_json()), LabelSpec)
