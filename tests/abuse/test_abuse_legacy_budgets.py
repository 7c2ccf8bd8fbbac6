"""One 2025-11-25 user cannot take what the others need: the calls waiting for answers and the
sessions one principal may hold on a replica are bounded below the replica's own bounds, so
another user's sessions and calls are still served. Against real replicas served over sockets;
here the ``principal`` callback tells users apart by a header (with auth, the token's subject)."""

from __future__ import annotations

import signal
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from engine import MCPServer
from engine.errors import OVER_BUDGET
from engine.scope import RequestScope
from examples.bookshop import build as build_bookshop
from tests.abuse.legacy_waiting import initialize, leave_waiting
from tests.abuse.replica import replica
from tests.abuse.test_abuse_pending_calls import (
    HEADERS,
    INITIALIZE,
    TIMEOUT,
    call_and_hang_up,
    refused,
)
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio


def user_of(scope: RequestScope) -> str | None:
    """Who makes the request: the user its ``X-User`` header names (a stand-in for auth)."""
    return None if scope.headers is None else scope.headers.get("x-user")


def bookshop(**options: Any) -> MCPServer:
    return build_bookshop(keys=[KEY], principal=user_of, **options)


async def _opened(http: httpx2.AsyncClient, url: str, user: str) -> dict[str, str]:
    response = await http.post(url, json=INITIALIZE, headers={**HEADERS, "X-User": user})
    assert response.status_code == 200, response.text
    assert "error" not in response.json(), response.json()
    return {
        **HEADERS,
        "X-User": user,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }


async def ping_p99(http: httpx2.AsyncClient, url: str, session: dict[str, str]) -> float:
    """The 99th percentile of 100 pings of ``session``, in seconds."""
    took = []
    for n in range(100):
        started = time.perf_counter()
        response = await http.post(
            url, json={"jsonrpc": "2.0", "id": n, "method": "ping"}, headers=session
        )
        took.append(time.perf_counter() - started)
        assert response.json()["result"] == {}
    return statistics.quantiles(took, n=100)[98]


async def test_one_user_cannot_hold_the_replicas_waiting_calls() -> None:
    mcp = bookshop(max_pending_calls=30, max_pending_calls_per_principal=20)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        alice = await _opened(http, url, "alice")
        idle = await ping_p99(http, url, alice)
        mallory = [await _opened(http, url, "mallory") for _ in range(3)]
        held = [
            await call_and_hang_up(http, url, session, 10 + n)
            for session in mallory
            for n in range(10)
        ]  # 30 tries: 10 + 10 are asked, the last 10 refused
        busy = await ping_p99(http, url, alice)
        asked = await call_and_hang_up(http, url, alice, 2)
    questions = [message for message in held if message.get("method") == "elicitation/create"]
    refusals = [refused(message) for message in held if "error" in message]
    assert len(questions) == 20
    assert len(refusals) == 10
    assert "Your sessions already have 20 calls waiting for an answer" in refusals[0]
    assert "(limit 20, set by max_pending_calls_per_principal)" in refusals[0]
    assert asked["method"] == "elicitation/create"  # alice is still served
    refused_at = {"budget": "max_pending_calls_per_principal"}
    assert mcp.core.metrics.value("engine_budget_refusals_total", **refused_at) == 10
    print(f"\nalice's ping p99: idle {idle * 1000:.1f} ms, mallory holding {busy * 1000:.1f} ms")
    assert busy < max(2 * idle, 1.0)  # generous: the measurement is in docs/security.md


async def test_one_user_cannot_open_sessions_without_bound() -> None:
    mcp = bookshop(max_sessions_per_principal=5)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        mallory = [await _opened(http, url, "mallory") for _ in range(5)]
        sixth = await http.post(url, json=INITIALIZE, headers={**HEADERS, "X-User": "mallory"})
        alice = await _opened(http, url, "alice")
        closed = await http.delete(url, headers=mallory[0])
        after_one_closed = await _opened(http, url, "mallory")
    error = sixth.json()["error"]
    assert error["code"] == OVER_BUDGET
    assert "You have 5 sessions open on this replica" in error["message"]
    assert "(limit 5, set by max_sessions_per_principal)" in error["message"]
    assert "mcp-session-id" not in sixth.headers
    assert alice["MCP-Session-Id"]
    assert closed.status_code == 200
    assert after_one_closed["MCP-Session-Id"]
    refused_at = {"budget": "max_sessions_per_principal"}
    assert mcp.core.metrics.value("engine_budget_refusals_total", **refused_at) == 1


def test_sigterm_with_many_waiting_calls_logs_one_line(tmp_path: Path) -> None:
    log = tmp_path / "replica.log"
    with replica(log, ENGINE_DRAIN_TIMEOUT="2") as served:
        waiting = []
        for _ in range(3):
            session = initialize(served)
            for n in range(10):
                sock, question = leave_waiting(served, session, 10 + n)
                assert sock is not None, question
                waiting.append(sock)
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(30) == 0
    text = log.read_text()
    assert "Traceback" not in text
    assert text.count("ended 30 calls waiting for their clients' answers") == 1
    for sock in waiting:
        sock.close()


async def test_a_drained_call_that_waited_is_told_to_call_again() -> None:
    mcp = bookshop()
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        alice = await _opened(http, url, "alice")
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "order_book", "arguments": {"title": "Neuromancer"}},
        }
        async with http.stream("POST", url, json=body, headers=alice) as response:
            lines = response.aiter_lines()
            async for line in lines:
                if line.startswith("data:") and "elicitation/create" in line:
                    break
            assert mcp.core.backchannel.end_all("the server is shutting down; call again") == 1
            with anyio.fail_after(10):
                rest = [line async for line in lines if line.startswith("data:")]
    assert "the server is shutting down; call again" in rest[-1]
    assert '"isError":true' in rest[-1].replace(" ", "")
