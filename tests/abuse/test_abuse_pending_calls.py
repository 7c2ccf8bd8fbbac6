"""A hostile 2025-11-25 client cannot pile up calls that wait for answers it will never send:
past the bound of its session (16 by default) or of the replica, a call is refused with a
JSON-RPC error that says what to do, and a call that ends (cancelled, or out of time) frees
its slot. Against a real replica served over a socket."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import pytest

from engine.errors import TOO_MANY_PENDING_CALLS
from examples.bookshop import build as build_bookshop
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio

TIMEOUT = 20.0
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def order(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "order_book", "arguments": {"title": "Neuromancer"}},
    }


async def open_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    response = await http.post(url, json=INITIALIZE, headers=HEADERS)
    assert response.status_code == 200, response.text
    return {
        **HEADERS,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }


async def call_and_hang_up(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], request_id: int
) -> dict[str, Any]:
    """Call a tool that asks a question; hang up once it is asked (the question), or read the
    JSON answer of a call that asked none (a refusal)."""
    async with http.stream("POST", url, json=order(request_id), headers=headers) as response:
        if not response.headers["content-type"].startswith("text/event-stream"):
            await response.aread()
            answer: dict[str, Any] = response.json()
            return answer
        async for line in response.aiter_lines():
            if line.startswith("data:") and line[5:].strip():
                message: dict[str, Any] = json.loads(line[5:])
                assert message.get("method") == "elicitation/create", message
                return message
    raise AssertionError("the call ended without a question or an answer")


async def wait_until(done: Callable[[], bool]) -> None:
    """Poll ``done`` until it holds (failing after 10 s: a slot that is never freed)."""
    with anyio.fail_after(10):
        while True:
            if done():
                return
            await anyio.sleep(0.05)


def refused(message: dict[str, Any]) -> str:
    """The refusal's message (failing when ``message`` is not one)."""
    assert "error" in message, f"expected a refusal, got {message}"
    assert message["error"]["code"] == TOO_MANY_PENDING_CALLS
    text: str = message["error"]["message"]
    return text


async def test_the_17th_waiting_call_of_a_session_is_refused_until_one_ends() -> None:
    mcp = build_bookshop(keys=[KEY])  # the default bound, and the default 300 s to answer
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        session = await open_session(http, url)
        asked = [await call_and_hang_up(http, url, session, 10 + n) for n in range(16)]
        beyond = await call_and_hang_up(http, url, session, 99)
        text = refused(beyond)
        other_session = await call_and_hang_up(http, url, await open_session(http, url), 2)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 10},
        }
        assert (await http.post(url, json=cancel, headers=session)).status_code == 202
        await wait_until(lambda: mcp.core.backchannel.pending(session["MCP-Session-Id"]) < 16)
        after_one_ended = await call_and_hang_up(http, url, session, 100)
    assert all(message["method"] == "elicitation/create" for message in asked)
    assert "already has 16 calls waiting for an answer" in text
    assert "answer their questions or cancel them" in text
    assert beyond["id"] == 99
    assert other_session["method"] == "elicitation/create"
    assert after_one_ended["method"] == "elicitation/create"


async def test_the_replica_bound_holds_across_sessions_and_frees_when_calls_time_out() -> None:
    mcp = build_bookshop(keys=[KEY], max_pending_calls=3, legacy_answer_timeout=1)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        sessions = [await open_session(http, url) for _ in range(4)]
        asked = [await call_and_hang_up(http, url, s, 2) for s in sessions[:3]]
        beyond = await call_and_hang_up(http, url, sessions[3], 2)
        text = refused(beyond)
        held = mcp.core.backchannel.pending_total
        await wait_until(lambda: mcp.core.backchannel.pending_total == 0)  # by the answer timeout
        after_timeout = await call_and_hang_up(http, url, sessions[3], 3)
    assert all(message["method"] == "elicitation/create" for message in asked)
    assert "already has 3 calls waiting for their clients' answers" in text
    assert held == 3
    assert after_timeout["method"] == "elicitation/create"


def cancel_of(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


async def test_a_cancel_naming_an_id_no_request_can_have_is_accepted_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mcp = build_bookshop(keys=[KEY])
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        session = await open_session(http, url)
        asked = await call_and_hang_up(http, url, session, 10)
        for bad in ({"a": 1}, [10], 10.0, True, None):
            sent = await http.post(url, json=cancel_of(bad), headers=session)
            assert sent.status_code == 202
        await anyio.sleep(0.2)
        still_waiting = mcp.core.backchannel.pending(session["MCP-Session-Id"])
        assert (await http.post(url, json=cancel_of(10), headers=session)).status_code == 202
        await wait_until(lambda: mcp.core.backchannel.pending(session["MCP-Session-Id"]) == 0)
    assert asked["method"] == "elicitation/create"
    assert still_waiting == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_deleting_a_session_ends_its_waiting_call_and_its_stream_at_once() -> None:
    mcp = build_bookshop(keys=[KEY])  # 300 s to answer, were the call left waiting
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        session = await open_session(http, url)
        call_events: list[dict[str, Any]] = []
        stream_ended = anyio.Event()
        asked = anyio.Event()

        async def call() -> None:
            async with http.stream("POST", url, json=order(7), headers=session) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        call_events.append(json.loads(line[5:]))
                        asked.set()

        async def session_stream() -> None:
            async with http.stream("GET", url, headers=session) as response:
                assert response.status_code == 200
                async for _ in response.aiter_lines():
                    pass
            stream_ended.set()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                tg.start_soon(session_stream)
                await asked.wait()
                deleted = await http.delete(url, headers=session)
                await stream_ended.wait()
        waiting = mcp.core.backchannel.pending(session["MCP-Session-Id"])
        after = await http.post(url, json=order(8), headers=session)
    assert deleted.status_code == 200
    question, ended = call_events
    assert question["method"] == "elicitation/create"
    assert ended["id"] == 7
    assert ended["error"]["code"] == -32600
    assert ended["error"]["message"].startswith("Session ended: it was deleted (HTTP DELETE)")
    assert waiting == 0
    assert after.status_code == 404


async def test_a_call_reusing_the_id_of_one_still_waiting_is_refused() -> None:
    mcp = build_bookshop(keys=[KEY])
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        session = await open_session(http, url)
        first = await call_and_hang_up(http, url, session, 10)
        again = await call_and_hang_up(http, url, session, 10)
        other_session = await call_and_hang_up(http, url, await open_session(http, url), 10)
        assert (await http.post(url, json=cancel_of(10), headers=session)).status_code == 202
        await wait_until(lambda: mcp.core.backchannel.pending(session["MCP-Session-Id"]) == 0)
    assert first["method"] == "elicitation/create"
    assert again["id"] == 10
    assert again["error"]["code"] == -32600
    assert "id 10 is that of a request of yours still running" in again["error"]["message"]
    assert other_session["method"] == "elicitation/create"  # ids are each session's own
