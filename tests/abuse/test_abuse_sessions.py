"""A hostile client cannot make a legacy session hold what it sends: ``initialize`` keeps a small,
fixed part of ``clientInfo`` and of the capabilities, on a real replica served over a socket."""

from __future__ import annotations

import gc
import json
import os
from typing import Any

import httpx2
import pytest

from engine import MCPServer
from engine.fleet.sessions import LegacySession
from stores import MemoryStore
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
HUGE = 3_000_000
PAD = 400_000


def hostile_initialize() -> bytes:
    """3 MB of ``clientInfo`` and 0.8 MB of capabilities (under the 4 MiB body limit), with the
    fields a session may keep."""
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "elicitation": {"form": {"pad": "y" * PAD}, "junk": "y" * 1000},
                    "sampling": {"tools": {}},
                    "experimental": {"pad": "z" * PAD},
                },
                "clientInfo": {
                    "name": "n" * HUGE,
                    "version": "1.0",
                    "title": "t" * 1000,
                    "extra": ["x"] * 1000,
                },
            },
        }
    ).encode()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:  # the replica is served in this process
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def initialize(http: httpx2.AsyncClient, url: str, body: bytes) -> str:
    response = await http.post(url, content=body, headers=HEADERS)
    assert response.status_code == 200, response.text
    return str(response.headers["mcp-session-id"])


@pytest.mark.parametrize("with_store", [False, True])
async def test_a_session_keeps_under_1_kib_of_a_3_mb_initialize(with_store: bool) -> None:
    store = MemoryStore() if with_store else None
    mcp = MCPServer("Shelf", keys=[KEY], store=store)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=30) as http,
    ):
        sid = await initialize(http, base + "/mcp", hostile_initialize())
        session = await mcp.core.sessions.get(sid)
    assert session is not None
    assert len(session.encode()) < 1024
    assert session.client_info == {"name": "n" * 256, "version": "1.0", "title": "t" * 256}
    assert session.capabilities == {"elicitation": {"form": {}}, "sampling": {"tools": {}}}
    if store is not None:
        blob = await store.get_blob(f"session-{sid}", "session")
        assert blob is not None and len(blob) < 1024
        assert LegacySession.decode(blob) == session


async def test_many_hostile_initializes_do_not_grow_the_replica() -> None:
    """40 initializes of 3.8 MB each: kept as sent, that is 150 MB; the budget is 40 MiB."""
    n, budget = 40, 40 * 1024 * 1024
    body = hostile_initialize()
    mcp = MCPServer("Shelf", keys=[KEY])
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=30) as http,
    ):
        for _ in range(3):  # warm the allocator and the connection
            await initialize(http, base + "/mcp", body)
        gc.collect()
        before = rss_bytes()
        sids = [await initialize(http, base + "/mcp", body) for _ in range(n)]
        gc.collect()
        grown = rss_bytes() - before
        kept: list[Any] = [await mcp.core.sessions.get(sid) for sid in sids]
    print(f"RSS grew {grown / 2**20:.1f} MiB over {n} hostile initializes")
    assert all(session is not None for session in kept)
    assert grown < budget, f"RSS grew {grown / 2**20:.1f} MiB, budget {budget / 2**20:.0f} MiB"


def test_capabilities_the_engine_does_not_read_are_kept_while_small() -> None:
    from engine.fleet.sessions import OTHER_CAPABILITIES_BYTES, bounded_capabilities

    declared = {
        "elicitation": {"form": {"junk": "x" * 1000}, "unknown": {}},
        "experimental": {"tasks": {"list": {}}},
        "huge": {"blob": "x" * (2 * OTHER_CAPABILITIES_BYTES)},
    }
    kept = bounded_capabilities(declared)
    assert kept == {"elicitation": {"form": {}}, "experimental": {"tasks": {"list": {}}}}
