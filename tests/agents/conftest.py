from __future__ import annotations

import pytest

from simpatterns.agents.menu import MenuStore

# Small 3^3 grids keep menus cheap (about 25 valid cells, well under a second each).
# 00002:002 has solving cells (A7 and A15); 00000:000 has none, so its stored solution is added.
SOLVABLE = "00002:002"
ADDED = "00000:000"
BINS = 3


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
