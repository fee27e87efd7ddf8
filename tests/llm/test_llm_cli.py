"""``simpatterns llm ...`` against the scripted server."""

from __future__ import annotations

from typer.testing import CliRunner

from simpatterns.cli import app
from simpatterns.llm.testing import Reply


def test_complete_models_and_transcript(serve, tmp_path):
    server = serve(Reply(content=["first [bold]answer[/bold]", "second"]), model="Qwen/Qwen3-VL-8B-Thinking",
                   profile="vllm")
    log = tmp_path / "t.jsonl"
    runner = CliRunner()
    res = runner.invoke(app, ["llm", "complete", "Name two colours.", "-n", "2", "--seed", "1",
                              "--base-url", server.base_url, "--record", str(log)])
    assert res.exit_code == 0, res.output
    assert "first [bold]answer[/bold]" in res.output and "second" in res.output  # printed verbatim
    assert server.requests[0]["n"] == 2 and server.requests[0]["seed"] == 1
    res = runner.invoke(app, ["llm", "models", "--base-url", server.base_url])
    assert "Qwen/Qwen3-VL-8B-Thinking" in res.output
    assert "server: vllm 0.12.0; grammar-constrained decoding: yes (GBNF in structured_outputs)" in res.output
    # a server that only says owned_by "vllm": the grammar is sent, but not known to be applied
    bare = serve(owned_by="vllm")
    res = runner.invoke(app, ["llm", "models", "--base-url", bare.base_url])
    assert "server: vllm; grammar-constrained decoding: sent in structured_outputs, not known" in res.output
    assert "note: vLLM did not say its version" in res.output
    res = runner.invoke(app, ["llm", "transcript", str(log)])
    assert res.exit_code == 0 and "1 attempts, 1 answered, 0 failed" in res.output
    res = runner.invoke(app, ["llm", "complete", "x", "--llm", f"replay:{tmp_path / 'missing.jsonl'}"])
    assert res.exit_code == 1 and "does not exist" in res.output


def test_complete_reports_server_failure(serve):
    server = serve(default=Reply(status=500, error="CUDA out of memory"))
    res = CliRunner().invoke(app, ["llm", "complete", "hi", "--model", "m", "--retries", "1",
                                   "--base-url", server.base_url])
    assert res.exit_code == 1 and "CUDA out of memory" in res.output
