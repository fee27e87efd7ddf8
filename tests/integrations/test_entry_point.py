"""`inspect eval simpatterns/qa` finds our task through the ``inspect_ai`` entry point that
pyproject.toml declares (installed here as a bare dist-info on the path, as pip would write it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")
tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

def reply(messages, tools, tool_choice, config):
    out = ModelOutput.from_content("mockllm", "ANSWER: yes")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out

(log,) = inspect_eval("simpatterns/qa", task_args={"questions": sys.argv[1], "condition": "objects"},
                      model=get_model("mockllm/model", custom_outputs=reply), log_dir=sys.argv[2], display="none")
print(log.status, log.eval.task, len(log.samples))
"""


def test_inspect_finds_simpatterns_qa_by_name(qa_dataset, tmp_path):
    root, questions = qa_dataset
    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    from importlib.metadata import entry_points

    installed = {(e.name, e.value) for e in entry_points(group="inspect_ai")}
    env = dict(os.environ)
    if not set(points.items()) <= installed:  # not pip-installed with this pyproject: declare it here
        dist = tmp_path / "site" / "simpatterns_entry-0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: simpatterns-entry\nVersion: 0\n")
        (dist / "entry_points.txt").write_text("[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path / "site")])
    # run from a folder of its own: in the source tree "simpatterns/qa" is also a directory,
    # which inspect takes for a path to search for tasks
    script = tmp_path / "run_task.py"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(script), str(root), str(tmp_path / "logs")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["success", "simpatterns/qa", str(len(questions))]


def test_the_lm_eval_task_files_ship_with_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["simpatterns"]
    from simpatterns.integrations.lmeval import include_path

    shipped = {p.name for p in include_path().iterdir() if p.suffix in (".yaml", ".py")}
    assert {"utils.py", "simpatterns_qa.yaml", "simpatterns_qa_annotation.yaml"} <= shipped
    assert "integrations/lmeval/tasks/*.yaml" in data and "integrations/lmeval/tasks/*.py" in data
