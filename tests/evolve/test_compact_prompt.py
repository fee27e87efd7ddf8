"""Compact discovery prompts for small local models."""

from __future__ import annotations

import re

from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.prompt import COMPACT_API, LabelSpec, Version, build_prompt, skeleton
from simpatterns.evolve.proposers import LLMProposer
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.llm import make_client
from simpatterns.llm.testing import ScriptedLLMServer
from simpatterns.trace import Trace

SPEC = LabelSpec("high energy impact", "two bodies collide hard", depends=["collision start"],
                 params=["object_a", "object_b", "speed"])


def test_compact_api_names_real_trace_members():
    for name in re.findall(r"trace\.([a-z_]+)", COMPACT_API):
        assert hasattr(Trace, name) or name in Trace.__dataclass_fields__, name


def test_compact_prompt_keeps_the_best_version_and_drops_the_rest(builtin):
    versions = [Version(skeleton(SPEC), None, 1), Version(builtin.get("high energy impact").source, 0.4, 2)]
    info = {"collision start": {"description": "Two bodies start touching", "params": ["object_a", "object_b"],
                                "source": builtin.get("collision start").source}}
    feedback = [{"code": "syntax_error", "detail": "line 3"}, {"code": "timeout", "detail": "slow"}]
    full = build_prompt(SPEC, versions, 0, 0, info, feedback)
    compact = build_prompt(SPEC, versions, 0, 0, info, feedback, compact=True)
    text = compact.messages[-1]["content"]
    assert COMPACT_API in text and "Detector of" not in text and "Two bodies start touching" not in text
    assert compact.version == 1 and compact.parents == [2] and "detect_v1" in text  # only the best, renumbered
    assert text.count("- timeout") + text.count("- syntax_error") == 1
    assert len(text) * 2 < len(full.messages[-1]["content"])


def test_discovery_against_a_llama_cpp_server_uses_compact_prompts(traces, builtin, small_library, tmp_path):
    answer = "```python\n" + builtin.get("high energy impact").source + "```"
    cfg = EvolveConfig(samples_per_label=2, batch_size=2, seed=3, sandbox=SandboxLimits(timeout_s=5, smoke_timeout_s=2))
    with ScriptedLLMServer(default=answer, owned_by="me") as server:
        with make_client("openai", base_url=server.base_url) as client:
            assert client.concurrency == 1  # the llama.cpp server answers one request at a time
            job = DiscoveryJob(traces, [SPEC], small_library, tmp_path / "run", tmp_path / "lib",
                               LLMProposer(client, max_tokens=256), cfg)
            job.run()
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert len(prompts) == 2 and all(COMPACT_API in p for p in prompts)
    # told to be full, it is full
    cfg.prompt = "full"
    with ScriptedLLMServer(default=answer, owned_by="me") as server:
        with make_client("openai", base_url=server.base_url) as client:
            DiscoveryJob(traces, [SPEC], small_library, tmp_path / "run2", tmp_path / "lib2",
                         LLMProposer(client, max_tokens=256), cfg).run()
        assert all(COMPACT_API not in r["messages"][-1]["content"] for r in server.requests)
