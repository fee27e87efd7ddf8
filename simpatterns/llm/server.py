"""What an OpenAI-compatible server is, asked once per client, and what it gets.

`probe_server` reads ``/v1/models`` and the documented endpoints of the
servers we know (vLLM ``/version``; llama-server ``/props``; Ollama
``/api/version`` and ``/api/show``; SGLang ``/get_model_info``; LM Studio
``/api/v0/models``; LiteLLM ``/health/liveliness`` and its ``x-litellm-*``
headers; llama-swap ``/running`` and ``/upstream/MODEL/props``) and returns a
`ServerInfo`: the kind, its version where it says one, whether the model
takes images (when the server says), and from that the route
(`ServerInfo.grammar_field`, `ServerInfo.enforces_grammar`...). A
``owned_by`` alone never makes a grammar count as enforced: vLLM must say
its version (before 0.11 it answers 200 to ``structured_outputs`` and
ignores it), a llama.cpp server its ``/props``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

# (status, JSON body or None, lower-cased headers) of a GET/POST; status 0: no answer
Fetch = Callable[[str, str, Any], tuple[int, Any, dict[str, str]]]

# kinds that answer one choice per request (ignore or refuse ``n`` > 1)
SINGLE_CHOICE = frozenset({"llama.cpp", "llama-cpp-python", "llama-swap", "ollama", "lmstudio"})
# kinds that run small local models: short prompts, one request at a time, patient timeouts
LOCAL = frozenset({"llama.cpp", "llama-cpp-python", "llama-swap", "ollama", "lmstudio", "local"})
VLLM_GUIDED = (0, 4)  # the first vLLM with guided_grammar
ONE_AT_A_TIME = frozenset({"llama.cpp", "llama-cpp-python", "llama-swap", "local"})
KINDS = ("vllm", "llama.cpp", "llama-cpp-python", "llama-swap", "litellm", "ollama", "sglang", "lmstudio",
         "openai", "unknown")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"0.10.2"`` / ``"0.11.0rc1"`` / ``"v0.12.0+cu128"`` -> ``(0, 10, 2)`` / ``(0, 11, 0)`` / ``(0, 12, 0)``."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or "").strip())
    return tuple(int(g or 0) for g in m.groups()) if m else None


@dataclass(frozen=True)
class ServerInfo:
    """What answers at a base URL.

    ``kind``: one of `KINDS`; ``version``: as the server says it; ``vision``:
    True/False when the server says whether the model takes images, None when
    it does not say; ``via``: the proxy in front (llama-swap) when the upstream
    was identified through it; ``note``: what was assumed, one line, for the
    user (None when nothing was).
    """

    kind: str
    version: str | None = None
    vision: bool | None = None
    via: str | None = None
    note: str | None = None

    @property
    def grammar_field(self) -> str | None:
        """Where a GBNF grammar goes: ``structured_outputs`` (vLLM >= 0.11, and a vLLM that does
        not say its version), ``guided_grammar`` (vLLM < 0.11; removed in 0.12), ``grammar``
        (llama.cpp servers), None (everything else: unconstrained decoding and repair)."""
        if self.kind == "vllm":
            v = parse_version(self.version)
            return "guided_grammar" if v is not None and VLLM_GUIDED <= v < (0, 11) else "structured_outputs"
        if self.kind in ("llama.cpp", "llama-cpp-python"):
            return "grammar"
        return None

    @property
    def enforces_grammar(self) -> bool:
        """True only where the server is known to apply `grammar_field`."""
        if self.kind == "vllm":  # a version before guided decoding is a build without a real one (0.1.dev...)
            v = parse_version(self.version)
            return v is not None and v >= VLLM_GUIDED
        return self.kind in ("llama.cpp", "llama-cpp-python")

    @property
    def single_choice(self) -> bool:
        return self.kind in SINGLE_CHOICE

    @property
    def llama_server(self) -> bool:
        """llama.cpp's own server (directly or behind llama-swap): takes ``cache_prompt``."""
        return self.kind == "llama.cpp"

    def describe(self) -> str:
        text = self.kind + (f" {self.version}" if self.version else "") + (f" via {self.via}" if self.via else "")
        return text


def root_url(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000`` (the non-OpenAI endpoints live at the root)."""
    base = base_url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def _llama_server_props(props: Any) -> bool:
    return isinstance(props, dict) and ("default_generation_settings" in props or "build_info" in props)


def _vision_from_props(props: dict) -> bool | None:
    modalities = props.get("modalities")
    if isinstance(modalities, dict) and isinstance(modalities.get("vision"), bool):
        return modalities["vision"]
    return None  # builds before the field: not said


def probe_server(fetch: Fetch, base_url: str, models: list[dict[str, Any]], headers: dict[str, str],
                 model: str | None) -> ServerInfo:
    """Identify the server (see the module docstring). ``fetch(method, path, json)`` asks the
    server root; ``models``/``headers`` are ``/v1/models``' entries and response headers."""
    owners = {str(m.get("owned_by", "")).lower() for m in models}

    def get(path: str, method: str = "GET", body: Any = None) -> Any:
        status, data, _ = fetch(method, path, body)
        return data if status == 200 else None

    if any(h.startswith("x-litellm") for h in headers):
        return _litellm()
    if "llama-swap" in owners:
        return _llama_swap(get, model)
    if "vllm" in owners:
        return _vllm(get)
    if "sglang" in owners:
        return _sglang(get)
    if "llamacpp" in owners or "llama.cpp" in owners:
        return _llama_cpp(get("/props"))
    if "me" in owners:  # llama-cpp-python's server; it has no endpoint that says more
        return ServerInfo("llama-cpp-python")
    if "library" in owners:
        return _ollama(get, model)
    if "organization_owner" in owners:
        return _lmstudio(get, model)
    # owned_by says nothing we know: ask the endpoints each server documents
    alive = get("/health/liveliness")
    if isinstance(alive, str) and "alive" in alive.lower():
        return _litellm()
    if isinstance(get("/running"), dict):
        return _llama_swap(get, model)
    if isinstance(get("/api/version"), dict):
        return _ollama(get, model)
    if isinstance(get("/get_model_info"), dict):
        return _sglang(get)
    props = get("/props")
    if _llama_server_props(props):
        return _llama_cpp(props)
    host = urlsplit(base_url).hostname or ""
    if host.endswith("openai.com") or "openai-organization" in headers or owners & {"openai", "system"}:
        return ServerInfo("openai", vision=True if model and OPENAI_VISION.match(model) else None)
    return ServerInfo("unknown", note=(
        f"the server at {base_url} is not one we recognise (/v1/models owned_by {sorted(owners)}); assumed an "
        "OpenAI-compatible API: no grammar, answers checked against what was asked"))


def _litellm() -> ServerInfo:
    return ServerInfo("litellm", note="LiteLLM proxy: the backend behind it is not known, so no grammar is sent "
                                      "(unconstrained decoding and repair)")


def _vllm(get: Callable[..., Any]) -> ServerInfo:
    data = get("/version")
    version = str(data["version"]) if isinstance(data, dict) and data.get("version") else None
    v = parse_version(version)
    if v is None or v < VLLM_GUIDED:
        said = f"said version {version!r} (a development build?)" if version else "did not say its version (/version)"
        return ServerInfo("vllm", version=version, note=f"vLLM {said}: the grammar goes in structured_outputs but "
                                                        "is not counted as enforced")
    return ServerInfo("vllm", version=version)


def _llama_cpp(props: Any, via: str | None = None) -> ServerInfo:
    if not _llama_server_props(props):  # owned_by "llamacpp" is llama-server's own; every build applies `grammar`
        return ServerInfo("llama.cpp", via=via, note="llama-server did not answer /props: its build and whether "
                                                     "the model takes images are not known")
    return ServerInfo("llama.cpp", version=str(props.get("build_info") or "") or None,
                      vision=_vision_from_props(props), via=via)


def _llama_swap(get: Callable[..., Any], model: str | None) -> ServerInfo:
    props = get(f"/upstream/{model}/props") if model else None
    if _llama_server_props(props):
        return _llama_cpp(props, via="llama-swap")
    return ServerInfo("llama-swap", note="llama-swap: the upstream server did not answer /props, so no grammar "
                                         "is sent")


def _ollama(get: Callable[..., Any], model: str | None) -> ServerInfo:
    data = get("/api/version")
    version = str(data.get("version")) if isinstance(data, dict) and data.get("version") else None
    vision = None
    show = get("/api/show", "POST", {"model": model}) if model else None
    if isinstance(show, dict) and isinstance(show.get("capabilities"), list):
        vision = "vision" in show["capabilities"]
    return ServerInfo("ollama", version=version, vision=vision)


def _sglang(get: Callable[..., Any]) -> ServerInfo:
    info = get("/get_server_info")
    version = str(info.get("version")) if isinstance(info, dict) and info.get("version") else None
    return ServerInfo("sglang", version=version)


def _lmstudio(get: Callable[..., Any], model: str | None) -> ServerInfo:
    data = get("/api/v0/models")
    vision = None
    if isinstance(data, dict):
        for m in data.get("data") or []:
            if isinstance(m, dict) and m.get("id") == model and m.get("type") in ("llm", "vlm"):
                vision = m["type"] == "vlm"
    return ServerInfo("lmstudio", vision=vision)


# OpenAI's models that take images (its documentation's vision guide); others are probed
OPENAI_VISION = re.compile(r"(gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-4\.5|gpt-5|o1(?!-mini|-preview)|o3(?!-mini)|o4-mini)",
                           re.IGNORECASE)
REASONING_MODEL = re.compile(r"(^|/)(o1|o3|o4|gpt-5)(?!-chat)([-.\w]*)$", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """OpenAI's reasoning families (o1, o3, o4-mini, gpt-5...; not ``gpt-5-chat``): they take
    ``max_completion_tokens`` instead of ``max_tokens`` and only the default temperature."""
    return bool(REASONING_MODEL.search(model.strip()))
