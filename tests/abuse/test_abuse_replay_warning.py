"""A server with tools that runs without a store says, once, that its rounds can be replayed."""

import logging

import pytest

from engine import MCPServer
from engine.server_core import REPLAY_WARNING
from stores import MemoryStore
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def server(**options: object) -> MCPServer:
    mcp = MCPServer("Replays", keys=[KEY], **options)  # type: ignore[arg-type]

    @mcp.tool()
    async def echo(text: str) -> str:
        return text

    return mcp


def replay_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage() == REPLAY_WARNING]


async def test_tools_without_a_store_warn_once_at_startup(caplog: pytest.LogCaptureFixture) -> None:
    mcp = server()
    with caplog.at_level(logging.WARNING, logger="engine.app"):
        assert replay_warnings(caplog) == []  # not at construction
        async with mcp.running():
            await mcp.core.health()
            await mcp.core.health()
    assert replay_warnings(caplog) == [REPLAY_WARNING]
    assert "replayed until it expires" in REPLAY_WARNING
    assert "store= (sqlite:///... or redis://...)" in REPLAY_WARNING


async def test_no_warning_without_tools_or_with_a_store(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.app"):
        async with MCPServer("Empty", keys=[KEY]).running():
            pass
        async with server(store=MemoryStore()).running():
            pass
    assert replay_warnings(caplog) == []
