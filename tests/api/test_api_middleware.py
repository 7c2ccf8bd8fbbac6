"""Middleware around every JSON-RPC message: ``MCPServer(middleware=[...])`` and
``mcp.middleware``, in both protocol eras, over HTTP and over a message connection (stdio)."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import httpx
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError as OfficialMCPError
from pydantic import BaseModel

from engine import (
    CallNext,
    HandlerResult,
    MCPError,
    MCPServer,
    ServerRequestContext,
)
from engine.errors import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND
from engine.protocol import modern
from engine.testing import Client, ProtocolError
from engine.transports.messages import serve_messages
from examples.bookshop import build as build_bookshop
from tests.conftest import KEY
from tests.http_helpers import (
    asgi_client,
    assert_error,
    call,
    post,
    request,
    serving,
    streaming,
)

pytestmark = pytest.mark.anyio

Middleware = Callable[[ServerRequestContext[Any, Any], CallNext], Any]


def bookshop(*middleware: Middleware) -> MCPServer:
    mcp = MCPServer("Bookshop", keys=[KEY], middleware=list(middleware))

    @mcp.tool()
    def search_books(query: str) -> str:
        return f"Found 3 books matching {query!r}."

    return mcp


def recorder(seen: list[ServerRequestContext[Any, Any]]) -> Middleware:
    async def record(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        seen.append(ctx)
        return await call_next(ctx)

    return record


# --- what a middleware sees, and in which order --------------------------------------------------


async def test_every_request_passes_through_outermost_first() -> None:
    order: list[str] = []

    def named(name: str) -> Middleware:
        async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
            order.append(f"{name} before {ctx.method}")
            result = await call_next(ctx)
            order.append(f"{name} after {ctx.method}")
            return result

        return middleware

    mcp = bookshop(named("outer"))
    mcp.middleware.append(named("inner"))  # appended after the server was made: it counts
    async with Client(mcp) as client:
        result = await client.call_tool("search_books", {"query": "dune"})
    assert result.text == "Found 3 books matching 'dune'."
    assert order == [
        "outer before tools/call",
        "inner before tools/call",
        "inner after tools/call",
        "outer after tools/call",
    ]


async def test_the_context_carries_the_message_and_the_server_state() -> None:
    seen: list[ServerRequestContext[Any, Any]] = []
    async with Client(bookshop(recorder(seen))) as client:
        await client.call_tool("search_books", {"query": "dune"})
    [ctx] = seen
    assert (ctx.method, ctx.request_id) == ("tools/call", 1)
    assert ctx.params is not None and ctx.params["arguments"] == {"query": "dune"}
    assert ctx.meta is not None and ctx.meta["io.modelcontextprotocol/protocolVersion"]
    assert ctx.protocol_version == "2026-07-28"
    assert ctx.lifespan_context == {}
    assert ctx.headers is None and ctx.access_token is None


async def test_over_http_the_context_has_the_request_headers() -> None:
    seen: list[ServerRequestContext[Any, Any]] = []
    async with asgi_client(bookshop(recorder(seen)).streamable_http_app()) as http:
        body = call("search_books", {"query": "dune"})
        response = await post(http, body, headers={"X-Shop": "7"})
    assert response.status_code == 200
    [ctx] = seen
    assert ctx.headers is not None and ctx.headers["x-shop"] == "7"


async def test_each_round_of_a_multi_round_call_is_a_request_of_its_own() -> None:
    seen: list[ServerRequestContext[Any, Any]] = []
    mcp = build_bookshop(keys=[KEY], middleware=[recorder(seen)])

    def confirm(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"confirm": True}}

    async with Client(mcp, elicitation=confirm) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.text == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert [ctx.method for ctx in seen] == ["tools/call", "tools/call"]
    first, second = (ctx.params or {} for ctx in seen)
    assert "requestState" not in first
    assert second["requestState"] and second["inputResponses"]


# --- changing the message, answering in the server's place, refusing -----------------------------


async def test_a_changed_copy_of_the_context_reaches_the_handler() -> None:
    async def shout(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.params is not None:
            arguments = {"query": ctx.params["arguments"]["query"].upper()}
            ctx = dataclasses.replace(ctx, params={**ctx.params, "arguments": arguments})
        return await call_next(ctx)

    async with Client(bookshop(shout)) as client:
        result = await client.call_tool("search_books", {"query": "dune"})
    assert result.text == "Found 3 books matching 'DUNE'."


async def test_the_result_is_a_dict_the_middleware_may_change() -> None:
    async def stamp(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        assert isinstance(result, dict)
        if ctx.method == "tools/call":
            result["content"].append({"type": "text", "text": "(stamped)"})
        return result

    async with Client(bookshop(stamp)) as client:
        result = await client.call_tool("search_books", {"query": "dune"})
    assert [block["text"] for block in result.content] == [
        "Found 3 books matching 'dune'.",
        "(stamped)",
    ]
    assert result.raw["resultType"] == "complete"


class Busy(BaseModel):
    content: list[dict[str, Any]]
    isError: bool


@pytest.mark.parametrize(
    "answer",
    [
        {"content": [{"type": "text", "text": "Busy, try again."}], "isError": True},
        Busy(content=[{"type": "text", "text": "Busy, try again."}], isError=True),
        mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text="Busy, try again.")], is_error=True
        ),
    ],
    ids=["dict", "pydantic model", "official model"],
)
async def test_a_middleware_may_answer_in_the_servers_place(answer: Any) -> None:
    async def busy(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            return answer  # type: ignore[no-any-return]
        return await call_next(ctx)

    async with Client(bookshop(busy)) as client:
        result = await client.call_tool("search_books", {"query": "dune"})
        tools = await client.list_tools()
    assert result.is_error and result.text == "Busy, try again."
    assert result.raw["resultType"] == "complete"
    assert len(tools) == 1


@pytest.mark.parametrize("error_class", [MCPError, OfficialMCPError], ids=["ours", "official"])
async def test_raising_refuses_the_message_with_that_error(error_class: type[Exception]) -> None:
    async def closed(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            raise error_class(INVALID_REQUEST, "No calls on Sundays.")
        return await call_next(ctx)

    async with Client(bookshop(closed)) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("search_books", {"query": "dune"})
        assert len(await client.list_tools()) == 1
    assert (refused.value.code, refused.value.message) == (INVALID_REQUEST, "No calls on Sundays.")
    assert refused.value.status == 400


class Reopening:
    """Data with no JSON form of its own: sent as its string."""

    def __str__(self) -> str:
        return "Monday 9:00"


class LooksLikeAnError(Exception):
    """An int code and a str message, but no MCPError: an ordinary failure."""

    def __init__(self) -> None:
        super().__init__("closed")
        self.code = INVALID_REQUEST
        self.message = "No calls on Sundays."


async def test_an_error_is_taken_by_its_class_and_its_data_made_json() -> None:
    async def closed(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            raise OfficialMCPError(INVALID_REQUEST, "Closed.", {"reopens": Reopening()})
        if ctx.method == "prompts/list":
            raise LooksLikeAnError()
        return await call_next(ctx)

    async with Client(bookshop(closed)) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("search_books", {"query": "dune"})
        with pytest.raises(ProtocolError) as failed:
            await client.send("prompts/list")
    assert refused.value.data == {"reopens": "Monday 9:00"}
    assert failed.value.code == INTERNAL_ERROR


async def test_an_error_of_the_server_rises_out_of_call_next() -> None:
    caught: list[int] = []

    async def spy(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            caught.append(exc.code)
            raise

    async with Client(bookshop(spy)) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.send("no/such/method")
    assert caught == [METHOD_NOT_FOUND] == [refused.value.code]


async def test_a_result_of_another_kind_is_an_internal_error() -> None:
    async def odd(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        return "fine"

    async with Client(bookshop(odd)) as client:
        with pytest.raises(ProtocolError) as failed:
            await client.list_tools()
    assert failed.value.code == INTERNAL_ERROR


# --- without middleware --------------------------------------------------------------------------


async def test_without_middleware_no_context_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a context was made for a server without middleware")

    monkeypatch.setattr(modern, "message_context", refuse)
    async with Client(bookshop()) as client:
        result = await client.call_tool("search_books", {"query": "dune"})
    assert result.text == "Found 3 books matching 'dune'."


def test_asgi_middleware_given_to_the_server_is_refused_with_where_it_goes() -> None:
    class RequireKey:
        def __init__(self, app: Any) -> None:
            self.app = app

    with pytest.raises(TypeError, match=r"streamable_http_app\(middleware="):
        MCPServer("Bookshop", middleware=[RequireKey])  # type: ignore[list-item]


# --- 2025-11-25 over HTTP ------------------------------------------------------------------------


def legacy(method: str, params: dict[str, Any] | None = None, id: int | None = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        body["id"] = id
    return body


INITIALIZE = legacy(
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "v": "1"}},
)


async def test_a_legacy_session_passes_through_too_notifications_included() -> None:
    seen: list[ServerRequestContext[Any, Any]] = []
    async with asgi_client(bookshop(recorder(seen)).streamable_http_app()) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers={"Accept": "application/json"})
        session = {"MCP-Session-Id": opened.headers["mcp-session-id"], "Accept": "application/json"}
        initialized = legacy("notifications/initialized", id=None)
        assert (await http.post("/mcp", json=initialized, headers=session)).status_code == 202
        listed = await http.post("/mcp", json=legacy("tools/list", id=2), headers=session)
    assert len(listed.json()["result"]["tools"]) == 1
    assert [(ctx.method, ctx.request_id) for ctx in seen] == [
        ("initialize", 1),
        ("notifications/initialized", None),
        ("tools/list", 2),
    ]
    assert {ctx.protocol_version for ctx in seen} == {"2025-06-18"}


async def test_a_refused_initialize_opens_no_session() -> None:
    async def invite_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method == "initialize":
            raise MCPError(INVALID_REQUEST, "This shop is invite-only.")
        return await call_next(ctx)

    async with asgi_client(bookshop(invite_only).streamable_http_app()) as http:
        refused = await http.post("/mcp", json=INITIALIZE, headers={"Accept": "application/json"})
    assert refused.json()["error"]["message"] == "This shop is invite-only."
    assert "mcp-session-id" not in refused.headers


# --- subscriptions/listen ------------------------------------------------------------------------


async def refuse_listen(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    if ctx.method == "subscriptions/listen":
        raise MCPError(INVALID_REQUEST, "Not permitted to watch these resources.")
    return await call_next(ctx)


LISTEN = request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=9)


async def test_over_http_a_refused_listen_is_an_error_before_any_stream() -> None:
    async with asgi_client(bookshop(refuse_listen).streamable_http_app()) as http:
        response = await post(http, LISTEN)
    assert_error(response, 400, INVALID_REQUEST, id=9)


async def test_over_http_a_listen_answered_by_a_middleware_is_a_plain_result() -> None:
    async def no_streams(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        return {} if ctx.method == "subscriptions/listen" else await call_next(ctx)

    async with asgi_client(bookshop(no_streams).streamable_http_app()) as http:
        response = await post(http, LISTEN)
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 9, "result": {"resultType": "complete"}}


async def test_over_http_a_listen_let_through_streams_inside_call_next() -> None:
    opened, ended = threading.Event(), threading.Event()  # the server runs in its own thread

    async def watch(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != "subscriptions/listen":
            return await call_next(ctx)
        opened.set()
        try:
            return await call_next(ctx)
        finally:
            ended.set()

    with serving(bookshop(watch).streamable_http_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            async with streaming(client, LISTEN) as (response, events):
                assert response.headers["content-type"] == "text/event-stream"
                ack = await events.next()
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert opened.is_set() and not ended.is_set()
            # the hang-up ends the stream, and so call_next
            assert await anyio.to_thread.run_sync(ended.wait, 5)


# --- a message connection (stdio) ----------------------------------------------------------------


@asynccontextmanager
async def connection(
    server: MCPServer,
) -> AsyncIterator[tuple[Callable[[dict[str, Any]], Any], Callable[[], Any]]]:
    """A connection as stdio carries it: ``send(message)`` and ``receive() -> message``."""
    to_server, lines = anyio.create_memory_object_stream[bytes](16)
    replies, from_server = anyio.create_memory_object_stream[bytes](16)

    async def send(message: dict[str, Any]) -> None:
        await to_server.send(json.dumps(message).encode())

    async def receive() -> dict[str, Any]:
        with anyio.fail_after(5):
            reply: dict[str, Any] = json.loads(await from_server.receive())
            return reply

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_messages, server.core, lines, replies.send)
        async with to_server:
            yield send, receive
        tg.cancel_scope.cancel()


async def test_on_a_connection_a_listen_goes_through_the_middleware() -> None:
    seen: list[ServerRequestContext[Any, Any]] = []
    async with connection(bookshop(recorder(seen), refuse_listen)) as (send, receive):
        await send(LISTEN)
        refused = await receive()
    assert refused["error"] == {
        "code": INVALID_REQUEST,
        "message": "Not permitted to watch these resources.",
    }
    assert [ctx.method for ctx in seen] == ["subscriptions/listen"]


async def test_on_a_connection_a_listen_let_through_streams_until_cancelled() -> None:
    ended = anyio.Event()

    async def watch(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "subscriptions/listen":
                ended.set()

    mcp = bookshop(watch)
    async with connection(mcp) as (send, receive):
        await send(LISTEN)
        acknowledged = await receive()
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        await mcp.core.notify_list_changed("tools")
        assert (await receive())["method"] == "notifications/tools/list_changed"
        cancel = {"requestId": 9, "reason": "done"}
        await send(legacy("notifications/cancelled", cancel, id=None))
        with anyio.fail_after(5):
            await ended.wait()  # the stream ran inside call_next, and the cancel ended it


async def test_on_a_connection_a_cancel_is_applied_then_observed() -> None:
    seen: list[tuple[str, Any]] = []
    started, cancelled = anyio.Event(), anyio.Event()

    async def observe(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        seen.append((ctx.method, ctx.request_id))
        if ctx.method == "notifications/cancelled":
            assert cancelled.is_set()  # the request it names was cancelled first
        return await call_next(ctx)

    mcp = bookshop(observe)

    @mcp.tool()
    async def wait_forever() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "unreachable"

    async with connection(mcp) as (send, receive):
        await send(call("wait_forever", id=3))
        with anyio.fail_after(5):
            await started.wait()
        await send(request("notifications/cancelled", {"requestId": 3}, id=None))
        await send(call("search_books", {"query": "dune"}, id=4))
        answered = await receive()
    assert answered["id"] == 4
    assert ("notifications/cancelled", None) in seen


async def test_a_notification_refused_by_a_middleware_is_logged_and_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def strict(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.request_id is None:
            raise ValueError("no notifications, please")
        return await call_next(ctx)

    with caplog.at_level(logging.ERROR, logger="engine.protocol"):
        async with asgi_client(bookshop(strict).streamable_http_app()) as http:
            note = request("notifications/roots/list_changed", id=None)
            response = await post(http, note)
    assert response.status_code == 202
    assert "notifications/roots/list_changed" in caplog.text


async def test_on_a_connection_a_legacy_session_is_seen_and_reachable() -> None:
    seen: list[tuple[str, Any, str]] = []

    async def announce(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        seen.append((ctx.method, ctx.request_id, ctx.protocol_version))
        if ctx.method == "tools/list":
            await ctx.session.send_tool_list_changed()
        return await call_next(ctx)

    async with connection(bookshop(announce)) as (send, receive):
        await send(INITIALIZE)
        assert (await receive())["result"]["protocolVersion"] == "2025-06-18"
        await send(legacy("notifications/initialized", id=None))
        await send(legacy("tools/list", id=2))
        heard, listed = await receive(), await receive()
    assert heard["method"] == "notifications/tools/list_changed"
    assert len(listed["result"]["tools"]) == 1
    assert seen == [
        ("initialize", 1, "2025-06-18"),
        ("notifications/initialized", None, "2025-06-18"),
        ("tools/list", 2, "2025-06-18"),
    ]
