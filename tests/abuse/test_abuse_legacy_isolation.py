"""A 2025-11-25 session and its streams belong to whoever initialized it: another principal
presenting the session id gets 404, as for an unknown session, on one replica and across
replicas that share a store; and a ``Last-Event-ID`` replays only events of the caller's own
session. Each against real replicas served over sockets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from engine import MCPServer, RequestScope
from examples.bookshop import build as build_bookshop
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio

TIMEOUT = 20.0
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def user_header(scope: RequestScope) -> str | None:
    """Who makes a request: the ``X-User`` header (a stand-in for a verified bearer token)."""
    return (scope.headers or {}).get("x-user")


def initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
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


def accept(question_id: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": question_id,
        "result": {"action": "accept", "content": {"confirm": True}},
    }


async def open_session(http: httpx2.AsyncClient, url: str, user: str | None) -> dict[str, str]:
    """The headers of a fresh session initialized as ``user``."""
    headers = {**HEADERS, **({"X-User": user} if user else {})}
    response = await http.post(url, json=initialize(), headers=headers)
    assert response.status_code == 200, response.text
    return {
        **headers,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }


def as_user(headers: dict[str, str], user: str) -> dict[str, str]:
    return {**headers, "X-User": user}


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


def bookshop(**options: Any) -> MCPServer:
    return build_bookshop(keys=[KEY], principal=user_header, **options)


async def test_another_principal_presenting_a_session_id_gets_404_and_answers_nothing() -> None:
    """Bob with Alice's session id: every request is 404 (a call, an answer to Alice's question,
    the session stream, ``DELETE``), Alice's question stays unanswered by him, and her session
    goes on."""
    async with (
        serve_asgi(bookshop(legacy_answer_timeout=1).streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        alice = await open_session(http, url, "alice")
        bob = as_user(alice, "bob")
        called = await http.post(url, json=order(2, "Dune"), headers=bob)
        streamed = await http.get(url, headers=bob)
        deleted = await http.delete(url, headers=bob)
        answered: list[int] = []
        outcome: Any = None
        async with http.stream("POST", url, json=order(3, "Neuromancer"), headers=alice) as got:
            async for _, data in sse_events(got):
                if data.get("method") == "elicitation/create":
                    posted = await http.post(url, json=accept(data["id"]), headers=bob)
                    answered.append(posted.status_code)
                else:
                    outcome = data
        still = await http.post(url, json=order(4, "Dune"), headers=alice)
    assert [called.status_code, streamed.status_code, deleted.status_code] == [404, 404, 404]
    assert "Session not found" in called.json()["error"]["message"]
    assert answered == [404]
    assert outcome["id"] == 3
    assert "did not answer elicitation/create" in outcome["result"]["content"][0]["text"]
    assert still.json()["result"]["content"][0]["text"] == "Ordered 'Dune'."


async def test_a_session_without_a_principal_is_not_served_to_one() -> None:
    """Initialized anonymously, the session is not anyone's to take over."""
    async with (
        serve_asgi(bookshop().streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        nobody = await open_session(http, url, None)
        taken = await http.post(url, json=order(2, "Dune"), headers=as_user(nobody, "mallory"))
        kept = await http.post(url, json=order(3, "Dune"), headers=nobody)
    assert taken.status_code == 404
    assert kept.status_code == 200


async def test_the_binding_holds_across_replicas_sharing_a_store(tmp_path: Path) -> None:
    """Initialized as Alice on replica A, presented by Bob on replica B (one SQLite store)."""
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a, b = bookshop(store=store), bookshop(store=store)
    async with (
        serve_asgi(a.streamable_http_app()) as base_a,
        serve_asgi(b.streamable_http_app()) as base_b,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, base_a + "/mcp", "alice")
        bob = as_user(alice, "bob")
        on_b = await http.post(base_b + "/mcp", json=order(2, "Dune"), headers=bob)
        deleted_on_b = await http.delete(base_b + "/mcp", headers=bob)
        alice_on_b = await http.post(base_b + "/mcp", json=order(3, "Dune"), headers=alice)
        blob = await a.core.sessions.get(alice["MCP-Session-Id"])
    assert on_b.status_code == 404
    assert deleted_on_b.status_code == 404
    assert alice_on_b.status_code == 200
    assert blob is not None and b"alice" not in blob.encode()  # kept as a digest


async def question_event(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> str:
    """Start a call that asks a question, and hang up once it is asked: its event id."""
    async with http.stream("POST", url, json=order(2, "Neuromancer"), headers=headers) as got:
        async for event_id, data in sse_events(got):
            if data.get("method") == "elicitation/create":
                assert event_id is not None
                return event_id
    raise AssertionError("the call asked no question")


async def resumed(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], last_event_id: str
) -> tuple[int, list[Any]]:
    """The status and events of a ``GET`` resuming after ``last_event_id`` (cut after 3 s: a
    stream of the caller's own would follow the call to its end)."""
    events: list[Any] = []
    with anyio.move_on_after(3):
        async with http.stream(
            "GET", url, headers={**headers, "Last-Event-ID": last_event_id}
        ) as got:
            status = got.status_code
            async for _, data in sse_events(got):
                events.append(data)
    return status, events


@pytest.mark.parametrize("principal", [True, False], ids=["principals", "anonymous"])
async def test_resuming_with_another_sessions_event_id_replays_none_of_its_events(
    principal: bool,
) -> None:
    """Bob, with his own session and Alice's event id, gets 404 and none of her events; Alice
    resumes her own stream from the same id."""
    mcp = bookshop(legacy_answer_timeout=2) if principal else build_bookshop(keys=[KEY])
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        alice = await open_session(http, url, "alice" if principal else None)
        bob = await open_session(http, url, "bob" if principal else None)
        event_id = await question_event(http, url, alice)
        primed = event_id.rpartition(".")[0] + ".0"
        intruded = [await resumed(http, url, bob, last) for last in (primed, event_id)]
        own_status, own = await resumed(http, url, alice, primed)
    for status, events in intruded:
        assert status == 404
        assert events == []
    assert own_status == 200
    assert own and own[0]["method"] == "elicitation/create"


async def test_a_resume_on_another_replica_replays_none_of_another_sessions_events(
    tmp_path: Path,
) -> None:
    """The stream is followed from the store on replica B: still only for its own session."""
    store = f"sqlite:///{tmp_path / 'calls.db'}"
    a = bookshop(store=store, legacy_answer_timeout=2)
    b = bookshop(store=store, legacy_answer_timeout=2)
    async with (
        serve_asgi(a.streamable_http_app()) as base_a,
        serve_asgi(b.streamable_http_app()) as base_b,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        alice = await open_session(http, base_a + "/mcp", "alice")
        bob = await open_session(http, base_b + "/mcp", "bob")
        event_id = await question_event(http, base_a + "/mcp", alice)
        primed = event_id.rpartition(".")[0] + ".0"
        status, events = await resumed(http, base_b + "/mcp", bob, primed)
        own_status, own = await resumed(http, base_b + "/mcp", alice, primed)
    assert status == 404
    assert events == []
    assert own_status == 200
    assert own and own[0]["method"] == "elicitation/create"
