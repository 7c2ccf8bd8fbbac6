"""2025-11-25 clients on the same endpoint: sessions, questions on the back-channel, replicas.

The official ``mcp`` client in ``mode="legacy"`` (``initialize``, ``MCP-Session-Id``, questions
sent to it as server→client requests mid-call) completes calls against one server, and against
two replicas behind a plain round-robin proxy that share only a Redis store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Context, MCPServer
from examples.bookshop import build as build_bookshop
from examples.seeds import recommend_book
from stores import MemoryStore
from tests.conftest import KEY, redis_for_tests
from tests.fleet_helpers import RoundRobinProxy, engine_fleet, serve_asgi

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


async def backorder(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def legacy_client(url: str, http: httpx2.AsyncClient, **callbacks: Any) -> Client:
    return Client(
        streamable_http_client(url, http_client=http),
        mode="legacy",
        read_timeout_seconds=TIMEOUT,
        **callbacks,
    )


async def test_a_legacy_client_gets_asked_mid_call() -> None:
    app = build_bookshop(keys=[KEY]).streamable_http_app()
    async with (
        serve_asgi(app) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base.rstrip("/") + "/mcp"
        async with legacy_client(url, http, elicitation_callback=backorder) as client:
            ordered = await client.call_tool("order_book", {"title": "Neuromancer"})
        async with legacy_client(url, http, elicitation_callback=decline) as client:
            declined = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert text_of(ordered) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert declined.is_error
    assert text_of(declined) == (
        "Error executing tool order_book: Resolver for parameter 'backorder' could not "
        "resolve: elicitation was decline"
    )


async def test_a_legacy_client_is_sampled_mid_call() -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Hyperion"), model="m"
        )

    async with (
        serve_asgi(recommend_book.mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
        legacy_client(base.rstrip("/") + "/mcp", http, sampling_callback=sample) as client,
    ):
        result = await client.call_tool("recommend_book", {"genre": "sci-fi"})
    assert text_of(result) == "Today's sci-fi pick: Hyperion"


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    import redis.asyncio

    prefix = f"engine-legacy-{os.urandom(4).hex()}"
    yield prefix
    client = redis.asyncio.Redis.from_url(redis_for_tests())
    async for key in client.scan_iter(match=f"{prefix}:*"):
        await client.delete(key)
    await client.aclose()


async def test_two_replicas_behind_round_robin_serve_one_legacy_session(
    tmp_path: Path, redis_prefix: str
) -> None:
    store = {"ENGINE_STORE": f"{redis_for_tests()}?prefix={redis_prefix}"}
    keys = {"replica-a": KEY, "replica-b": KEY}
    with engine_fleet("examples/bookshop_server.py", keys, tmp_path, extra_env=store) as fleet:
        proxy = RoundRobinProxy([fleet["replica-a"].base_url, fleet["replica-b"].base_url])
        async with serve_asgi(proxy) as proxy_url:
            url = proxy_url.rstrip("/") + "/mcp"
            async with (
                httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
                legacy_client(url, http, elicitation_callback=backorder) as client,
            ):
                with anyio.fail_after(TIMEOUT):
                    first = await client.call_tool("order_book", {"title": "Neuromancer"})
                    second = await client.call_tool("order_book", {"title": "Dune"})
    assert text_of(first) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert text_of(second) == "Ordered 'Dune'."
    served = {f.replica for f in proxy.forwarded if f.replica}
    assert served == {"replica-a", "replica-b"}
    responses = [f for f in proxy.forwarded if f.http_method == "POST" and f.rpc_method is None]
    assert responses, "the elicitation answer travelled as its own POST"


def test_a_legacy_client_on_stdio() -> None:
    env = {
        "PYTHONPATH": str(ROOT),
        "ENGINE_KEYS": KEY,
        "ENGINE_STORE": "none",
        "PATH": "/usr/bin:/bin",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "examples/bookshop_server.py", "--stdio"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin and process.stdout

    def send(message: dict[str, Any]) -> None:
        assert process.stdin
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()

    def receive() -> dict[str, Any]:
        assert process.stdout
        return json.loads(process.stdout.readline())  # type: ignore[no-any-return]

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
    )
    initialized = receive()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "order_book", "arguments": {"title": "Neuromancer"}},
        }
    )
    question = receive()
    send(
        {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"confirm": True}},
        }
    )
    result = receive()
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert "resultType" not in initialized["result"]
    assert question["method"] == "elicitation/create"
    assert question["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert result["id"] == 2
    assert result["result"]["content"][0]["text"] == (
        "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    )


LEGACY_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


def initialize(request_id: int = 1, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}} if capabilities is None else capabilities,
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


def order(request_id: int, title: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "order_book", "arguments": {"title": title}},
    }


async def open_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    response = await http.post(url, json=initialize(), headers=LEGACY_HEADERS)
    assert response.status_code == 200, response.text
    headers = {
        **LEGACY_HEADERS,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    return headers


async def sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, Any]]:
    """``(event id, parsed data)`` for each event with data."""
    event_id, data = None, ""
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line and data:
            yield event_id, json.loads(data)
            event_id, data = None, ""


async def test_an_unknown_session_is_404() -> None:
    async with (
        serve_asgi(build_bookshop(keys=[KEY]).streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        headers = {**LEGACY_HEADERS, "MCP-Session-Id": "nope", "MCP-Protocol-Version": "2025-11-25"}
        response = await http.post(base + "/mcp", json=order(2, "Dune"), headers=headers)
        ended = await open_session(http, base + "/mcp")
        deleted = await http.delete(base + "/mcp", headers=ended)
        after = await http.post(base + "/mcp", json=order(3, "Dune"), headers=ended)
    assert response.status_code == 404
    assert deleted.status_code == 200
    assert after.status_code == 404


async def test_a_client_that_never_answers_gets_a_clear_error() -> None:
    mcp = build_bookshop(keys=[KEY], legacy_answer_timeout=0.5)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        headers = await open_session(http, base + "/mcp")
        seen: list[Any] = []
        async with http.stream(
            "POST", base + "/mcp", json=order(2, "Neuromancer"), headers=headers
        ) as response:
            async for _, data in sse_events(response):
                seen.append(data)
    assert seen[0]["method"] == "elicitation/create"
    assert seen[-1]["id"] == 2
    assert seen[-1]["result"]["isError"] is True
    assert (
        "did not answer elicitation/create within 0.5 s"
        in (seen[-1]["result"]["content"][0]["text"])
    )


async def test_when_the_replica_holding_a_call_dies_the_client_gets_an_error_not_a_hang(
    tmp_path: Path, redis_prefix: str
) -> None:
    store = {"ENGINE_STORE": f"{redis_for_tests()}?prefix={redis_prefix}"}
    keys = {"replica-a": KEY, "replica-b": KEY}
    with engine_fleet("examples/bookshop_server.py", keys, tmp_path, extra_env=store) as fleet:
        a, b = fleet["replica-a"].url, fleet["replica-b"].url
        async with httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
            headers = await open_session(http, a)
            question_event = None
            async with http.stream(
                "POST", a, json=order(2, "Neuromancer"), headers=headers
            ) as response:
                async for event_id, data in sse_events(response):
                    if data.get("method") == "elicitation/create":
                        question_event = (event_id, data)
                        break
            assert question_event is not None
            fleet["replica-a"].process.kill()
            fleet["replica-a"].process.wait()
            event_id, question = question_event
            answer = {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"confirm": True}},
            }
            posted = await http.post(b, json=answer, headers=headers)
            resumed: list[Any] = []
            with anyio.fail_after(15):
                async with http.stream(
                    "GET", b, headers={**headers, "Last-Event-ID": str(event_id)}
                ) as stream:
                    async for _, data in sse_events(stream):
                        resumed.append(data)
            still = await http.post(b, json=order(3, "Dune"), headers=headers)
    assert posted.status_code == 202
    assert resumed[-1]["id"] == 2
    assert resumed[-1]["error"]["code"] == -32603
    assert "stopped before it answered" in resumed[-1]["error"]["message"]
    assert still.status_code == 200
    assert still.json()["result"]["content"][0]["text"] == "Ordered 'Dune'."


async def test_a_malformed_answer_is_asked_again_then_the_call_ends_clearly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = build_bookshop(keys=[KEY]).streamable_http_app()
    async with (
        serve_asgi(app) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        headers = await open_session(http, url)
        asked = 0
        last: Any = None
        async with http.stream(
            "POST", url, json=order(2, "Neuromancer"), headers=headers
        ) as response:
            async for _, data in sse_events(response):
                if data.get("method") == "elicitation/create":
                    asked += 1
                    bad = {
                        "jsonrpc": "2.0",
                        "id": data["id"],
                        "result": {"action": "accept", "content": {"confirm": "maybe"}},
                    }
                    assert (await http.post(url, json=bad, headers=headers)).status_code == 202
                else:
                    last = data
    assert asked == 3
    assert last["id"] == 2
    assert last["result"]["isError"] is True
    assert last["result"]["content"][0]["text"] == "Error executing tool order_book"
    [failure] = [r for r in caplog.records if r.name == "engine.calls"]
    assert "3 unusable answers to elicitation/create" in str(failure.exc_info[1])


async def test_a_list_change_raised_on_one_replica_reaches_a_session_stream_on_another() -> None:

    store = MemoryStore()

    def replica() -> MCPServer:
        mcp = MCPServer("Shelf", keys=[KEY], store=store)

        @mcp.tool()
        async def restock(ctx: Context) -> str:
            await ctx.notify_tools_changed()
            return "restocked"

        return mcp

    a, b = replica(), replica()
    async with (
        serve_asgi(a.streamable_http_app()) as base_a,
        serve_asgi(b.streamable_http_app()) as base_b,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        headers = await open_session(http, base_a + "/mcp")
        heard: list[str] = []
        async with http.stream("GET", base_a + "/mcp", headers=headers) as stream:
            call = {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "restock", "arguments": {}},
            }
            done = await http.post(base_b + "/mcp", json=call, headers=headers)
            with anyio.fail_after(5):
                async for _, data in sse_events(stream):
                    heard.append(data["method"])
                    break
    assert done.json()["result"]["content"][0]["text"] == "restocked"
    assert heard == ["notifications/tools/list_changed"]


async def test_only_the_session_asked_can_answer() -> None:
    app = build_bookshop(keys=[KEY], legacy_answer_timeout=1).streamable_http_app()
    async with (
        serve_asgi(app) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        asked = await open_session(http, url)
        intruder = await open_session(http, url)
        outcome: Any = None
        async with http.stream(
            "POST", url, json=order(2, "Neuromancer"), headers=asked
        ) as response:
            async for _, data in sse_events(response):
                if data.get("method") == "elicitation/create":
                    answer = {
                        "jsonrpc": "2.0",
                        "id": data["id"],
                        "result": {"action": "accept", "content": {"confirm": True}},
                    }
                    no_session = {k: v for k, v in intruder.items() if k != "MCP-Session-Id"}
                    refused = await http.post(url, json=answer, headers=no_session)
                    await http.post(url, json=answer, headers=intruder)  # ignored
                else:
                    outcome = data
    assert refused.status_code == 400
    assert outcome["result"]["isError"] is True
    assert "did not answer elicitation/create" in outcome["result"]["content"][0]["text"]


async def test_a_session_request_with_a_version_header_of_no_session_era_is_refused() -> None:
    app = build_bookshop(keys=[KEY]).streamable_http_app()
    async with (
        serve_asgi(app) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        headers = await open_session(http, url)
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        refused = await http.post(
            url, json=listing, headers={**headers, "MCP-Protocol-Version": "zzz"}
        )
        older = await http.post(
            url, json=listing, headers={**headers, "MCP-Protocol-Version": "2025-06-18"}
        )
    assert refused.status_code == 400
    assert refused.json()["id"] == 3
    assert refused.json()["error"] == {
        "code": -32600,
        "message": "Bad Request: unsupported MCP-Protocol-Version 'zzz'; send '2025-11-25', the"
        " version initialize negotiated",
    }
    assert (
        older.status_code == 200
    )  # a version of the session era: served, as the official server does
