"""``simpatterns llm ...``: check an LLM setup, inspect transcripts, serve a scripted server.

The option types here (``LLMSpec``, ``BaseURL``...) are shared with other
commands that talk to a model (``simpatterns reward compile``, defined with
the DSL), so every command spells the LLM flags the same way;
`client_from_options` turns them into an `LLMClient`. Like the whole ``llm``
package, this module imports nothing of simpatterns but its own modules.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer

from simpatterns.llm.client import RetryPolicy
from simpatterns.llm.errors import LLMError
from simpatterns.llm.factory import make_client

LLMSpec = Annotated[str, typer.Option(
    "--llm", envvar="SIMPATTERNS_LLM",
    help="Backend: openai (any OpenAI-compatible server, e.g. `vllm serve`), vllm (in-process), replay:FILE.")]
BaseURL = Annotated[Optional[str], typer.Option(
    "--base-url", envvar="SIMPATTERNS_LLM_BASE_URL", help="Server URL, e.g. http://localhost:8000/v1.")]
Model = Annotated[Optional[str], typer.Option(
    "--model", envvar="SIMPATTERNS_LLM_MODEL", help="Model name; default: the server's only model.")]
APIKey = Annotated[Optional[str], typer.Option(
    "--api-key", help="API key (default: $SIMPATTERNS_LLM_API_KEY or $OPENAI_API_KEY).", show_default=False)]
Grammar = Annotated[str, typer.Option(
    "--grammar", help="Grammar-constrained decoding: auto (when the server is vLLM), on, off.")]
Record = Annotated[Optional[Path], typer.Option(
    "--record", help="Append every request and answer to this JSONL transcript (replay it with --llm replay:FILE).")]
Timeout = Annotated[float, typer.Option("--timeout", help="Seconds per attempt.")]
Retries = Annotated[int, typer.Option("--retries", help="Attempts per request (timeouts, 429 and 5xx are retried).")]
MaxRequests = Annotated[Optional[int], typer.Option("--max-requests", help="Hard cap on requests sent.")]
MaxTotalTokens = Annotated[Optional[int], typer.Option("--max-total-tokens", help="Hard cap on tokens used.")]


def client_from_options(
    llm: str, base_url: str | None, model: str | None, api_key: str | None, grammar: str, record: Path | None,
    timeout: float, retries: int, max_requests: int | None, max_total_tokens: int | None, concurrency: int = 8,
):
    return make_client(
        llm, base_url=base_url, model=model, api_key=api_key, grammar=grammar, transcript=record,
        timeout_s=timeout, retry=RetryPolicy(max_attempts=max(1, retries)), max_requests=max_requests,
        max_total_tokens=max_total_tokens, concurrency=concurrency,
    )


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


llm_app = typer.Typer(help="Check an LLM server, inspect transcripts, serve scripted answers.", no_args_is_help=True)


@llm_app.command("complete")
def complete_cmd(
    prompt: Annotated[str, typer.Argument(help="User message.")],
    system: Annotated[Optional[str], typer.Option("--system", help="System message.")] = None,
    n: Annotated[int, typer.Option("-n", help="Samples.")] = 1,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.7,
    seed: Annotated[Optional[int], typer.Option("--seed")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 512,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    record: Record = None,
    timeout: Timeout = 120.0,
    retries: Retries = 4,
) -> None:
    """Send one prompt and print the answers (checks that a server is reachable)."""
    from simpatterns.llm.request import ChatRequest

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    try:
        with client_from_options(llm, base_url, model, api_key, "off", record, timeout, retries, None, None) as client:
            c = client.complete_one(ChatRequest(messages, n=n, temperature=temperature, seed=seed,
                                                max_tokens=max_tokens))
    except LLMError as exc:
        fail(str(exc))
    for i, (text, reason) in enumerate(zip(c.texts, c.finish_reasons)):
        if len(c.texts) > 1:
            typer.echo(f"--- sample {i} ({reason})")
        typer.echo(text)
    typer.echo(f"[{c.model}: {c.usage.prompt_tokens} prompt + {c.usage.completion_tokens} completion tokens, "
               f"{c.latency_s:.2f} s, finish {','.join(c.finish_reasons)}]", err=True)


@llm_app.command("models")
def models_cmd(base_url: BaseURL = None, api_key: APIKey = None) -> None:
    """List the models a server offers and whether it is vLLM (grammar-constrained decoding)."""
    from simpatterns.llm.openai_backend import OpenAIBackend

    try:
        backend = OpenAIBackend(base_url=base_url, api_key=api_key)
        models = backend.server_models()
    except LLMError as exc:
        fail(str(exc))
    for m in models:
        typer.echo(f"{m.get('id')}\towned_by={m.get('owned_by')}")
    typer.echo(f"grammar-constrained decoding: {'yes (vLLM)' if backend.is_vllm() else 'no (parse + repair only)'}")


@llm_app.command("transcript")
def transcript_cmd(path: Annotated[Path, typer.Argument(help="JSONL transcript.")]) -> None:
    """Summarise a transcript: attempts, failures by kind, tokens, latency."""
    from simpatterns.llm.transcript import read_transcript

    try:
        recs = read_transcript(path)
    except LLMError as exc:
        fail(str(exc))
    ok = [r for r in recs if r["status"] == "ok"]
    errors = Counter((r.get("error") or {}).get("kind", "?") for r in recs if r["status"] != "ok")
    prompt = sum((r.get("usage") or {}).get("prompt_tokens", 0) for r in recs)
    completion = sum((r.get("usage") or {}).get("completion_tokens", 0) for r in recs)
    lat = sorted(float(r.get("latency_s") or 0) for r in ok)
    models = sorted({str(r.get("model")) for r in recs})
    typer.echo(f"{path}: {len(recs)} attempts, {len(ok)} answered, {len(recs) - len(ok)} failed "
               f"{dict(errors) if errors else ''}".rstrip())
    typer.echo(f"models: {', '.join(models)}; distinct prompts: {len({r['prompt_hash'] for r in recs})}")
    typer.echo(f"tokens: {prompt} prompt + {completion} completion")
    if lat:
        typer.echo(f"latency: median {lat[len(lat) // 2]:.3f} s, max {lat[-1]:.3f} s")
    reasons = Counter(fr for r in ok for fr in r["response"].get("finish_reasons", []))
    typer.echo(f"finish reasons: {json.dumps(dict(reasons))}")


@llm_app.command("serve-script")
def serve_script_cmd(
    script: Annotated[Optional[Path], typer.Argument(help="JSON script (see simpatterns.llm.testing).")] = None,
    port: Annotated[int, typer.Option("--port")] = 8000,
    default: Annotated[Optional[str], typer.Option("--default", help="Reply when the script has none.")] = None,
) -> None:
    """Serve scripted answers on 127.0.0.1 as an OpenAI-compatible server (demos, tests; no model)."""
    from simpatterns.llm.testing import main

    main(([str(script)] if script else []) + ["--port", str(port)] + (["--default", default] if default else []))


def register(app: typer.Typer) -> None:
    app.add_typer(llm_app, name="llm")
