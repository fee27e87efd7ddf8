"""`qa eval` with the frames conditions first establishes that the model takes images."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.llm.testing import Reply, ScriptedLLMServer


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("qa") / "data"
    res = CliRunner().invoke(app, ["qa", "generate", "--out", str(out), "--scenes", "1", "--questions-per-rollout",
                                   "2", "--templates", "1-8", "--no-stable", "--seed", "2", "-q"])
    assert res.exit_code == 0, res.output
    return out


def evaluate(data, out, server, conditions="frames"):
    return CliRunner().invoke(app, ["qa", "eval", str(data), "--out", str(out), "--llm", "openai", "--base-url",
                                    server.base_url, "--conditions", conditions, "--max-images", "2",
                                    "--image-size", "32", "-q"])


@pytest.mark.parametrize("profile, said", [
    ("llama-server", "says the model has no vision input"),  # /props modalities.vision false: no request
    ("llama-server-old", "HTTP 500: image input is not supported"),  # one probe, not retried
    ("vllm", "At most 0 image(s)"),
    ("llama-cpp-python", "reach the model as text"),  # the probe: its prompt grows with the bytes
])
def test_frames_are_refused_in_one_line_when_the_model_takes_no_images(data, tmp_path, profile, said):
    with ScriptedLLMServer(default=Reply("ANSWER: yes"), profile=profile) as server:
        res = evaluate(data, tmp_path / "run", server, "annotation,frames")
        probes = len(server.requests)
    assert res.exit_code == 2 and said in res.output and "--conditions frames" in res.output
    assert probes <= 2 and not (tmp_path / "run" / "responses.jsonl").exists()


def test_frames_go_to_a_model_that_takes_images(data, tmp_path):
    with ScriptedLLMServer(default=Reply("ANSWER: yes"), profile="llama-server", vision=True) as server:
        res = evaluate(data, tmp_path / "run", server)
        assert res.exit_code == 0, res.output
        assert "answered 2" in res.output and all(s.images_seen for s in server.log)
