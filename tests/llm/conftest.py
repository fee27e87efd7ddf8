from __future__ import annotations

import pytest

from simpatterns.llm import RetryPolicy
from simpatterns.llm.testing import ScriptedLLMServer


@pytest.fixture
def serve():
    """Start scripted servers on ephemeral ports; all are stopped at teardown."""
    servers: list[ScriptedLLMServer] = []

    def start(*replies, **kwargs) -> ScriptedLLMServer:
        server = ScriptedLLMServer(replies=replies, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def fast_retry() -> RetryPolicy:
    # real backoff code, tiny delays: tests stay fast
    return RetryPolicy(max_attempts=3, base_delay_s=0.005, max_delay_s=0.02, jitter=0.0)
