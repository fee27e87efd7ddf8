from __future__ import annotations

import pytest

from simpatterns.agents.menu import MenuStore

from agent_tasks import BINS


@pytest.fixture(scope="session")
def menu_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("menus")


@pytest.fixture(scope="session")
def store(menu_cache) -> MenuStore:
    return MenuStore(menu_cache, bins=BINS)


@pytest.fixture
def serve():
    from simpatterns.llm.testing import ScriptedLLMServer

    servers = []

    def start(*replies, **kwargs):
        server = ScriptedLLMServer(replies=replies, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()
