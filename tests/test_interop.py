"""Interop with the official MCP Python SDK (``mcp`` 2.3.0) over real streamable HTTP.

The SDK's ``Client`` speaks 2026-07-28 and drives ``input_required`` rounds itself: it hands each
embedded question to its elicitation / sampling / roots callback and retries the call with the
answers and the echoed ``requestState``. These tests run our servers on loopback sockets (uvicorn
in-process, or ``python -m engine serve`` subprocesses sharing ``ENGINE_KEYS``) and check that the
SDK's automatic loop completes every kind of multi-round call, including when a round-robin proxy
sends each round of one call to a different replica.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from examples.bookshop import build as build_bookshop
from examples.seeds import recommend_book, reserve_book
from tests.conftest import KEY, OTHER_KEY
from tests.fleet_helpers import (
    EngineProcess,
    Forwarded,
    RoundRobinProxy,
    engine_fleet,
    serve_asgi,
)

pytestmark = pytest.mark.anyio

MODE = "2026-07-28"
"""Adopt 2026-07-28 directly: no ``server/discover`` probe, no ``initialize`` handshake."""

CALL_TIMEOUT = 20.0
READ_TIMEOUT = 10.0

RESERVE_BOOK_SCHEMA = {
    "type": "object",
    "properties": {"title": {"title": "Title", "type": "string"}},
    "required": ["title"],
    "title": "reserve_bookArguments",
}

WORKSPACE_SERVER = textwrap.dedent(
    '''
    """The bookshop plus a roots question and a chain of two dependent questions."""

    from typing import Annotated

    from pydantic import BaseModel

    from engine import Context, Elicit, ListRoots, Resolve
    from engine.types import ListRootsResult
    from examples.bookshop import build

    mcp = build()  # keys from ENGINE_KEYS, replica id from --replica


    def client_roots() -> ListRoots:
        return ListRoots()


    @mcp.tool()
    def list_workspace(roots: Annotated[ListRootsResult, Resolve(client_roots)]) -> str:
        """Name the client's roots."""
        return "Roots: " + ", ".join(f"{root.name}={root.uri}" for root in roots.roots)


    class Name(BaseModel):
        name: str


    class Colour(BaseModel):
        colour: str


    async def ask_name(ctx: Context) -> Elicit[Name]:
        await ctx.report_progress(0, 2, "asking for a name")  # streams when asked to
        return Elicit("What is your name?", Name)


    def ask_colour(who: Annotated[Name, Resolve(ask_name)]) -> Elicit[Colour]:
        return Elicit(f"What is your favourite colour, {who.name}?", Colour)


    @mcp.tool()
    def favourite_colour(
        who: Annotated[Name, Resolve(ask_name)],
        colour: Annotated[Colour, Resolve(ask_colour)],
    ) -> str:
        """Two dependent questions: three rounds in all."""
        return f"{who.name} likes {colour.colour}"
    '''
)


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EngineProcess]]:
    """Three ``python -m engine serve`` replicas of the workspace server, started in parallel:
    ``replica-a`` and ``replica-b`` share ``KEY``; ``rogue`` has ``OTHER_KEY``."""
    root = tmp_path_factory.mktemp("interop")
    server_file = root / "workspace_server.py"
    server_file.write_text(WORKSPACE_SERVER)
    replicas = {"replica-a": KEY, "replica-b": KEY, "rogue": OTHER_KEY}
    with engine_fleet(str(server_file), replicas, root / "logs") as started:
        yield started


@contextlib.asynccontextmanager
async def proxied(*replicas: EngineProcess) -> AsyncIterator[tuple[RoundRobinProxy, str]]:
    """A round-robin proxy over ``replicas``; yields it and its MCP endpoint URL."""
    proxy = RoundRobinProxy([r.base_url for r in replicas])
    async with serve_asgi(proxy) as base_url:
        yield proxy, f"{base_url}/mcp"


@contextlib.asynccontextmanager
async def official_client(
    url: str, **options: Any
) -> AsyncIterator[tuple[Client, list[Forwarded]]]:
    """The SDK's ``Client`` on streamable HTTP at 2026-07-28, and a log of every POST it sent.

    The log comes from response hooks on the ``httpx2.AsyncClient`` handed to the SDK's
    ``streamable_http_client`` (its documented way to configure HTTP), so each round of a call
    is observable as one ``tools/call`` POST.
    """
    posts: list[Forwarded] = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        if request.method != "POST":
            return
        message = json.loads(request.content)
        params = message.get("params")
        posts.append(
            Forwarded(
                upstream=url,
                http_method="POST",
                path=request.url.path,
                rpc_method=message.get("method"),
                params=params if isinstance(params, dict) else {},
                status=response.status_code,
                content_type=response.headers.get("content-type", ""),
                replica=response.headers.get("x-engine-replica"),
            )
        )

    async with (
        httpx2.AsyncClient(
            timeout=httpx2.Timeout(READ_TIMEOUT),
            trust_env=False,
            event_hooks={"response": [record]},
        ) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=MODE,
            read_timeout_seconds=READ_TIMEOUT,
            **options,
        ) as client,
    ):
        yield client, posts


def tool_calls(posts: list[Forwarded], tool: str) -> list[Forwarded]:
    return [p for p in posts if p.rpc_method == "tools/call" and p.tool == tool]


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def accept_backorder() -> tuple[list[types.ElicitRequestParams], Any]:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(
        context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    return asked, elicit


def answer_name_then_colour() -> tuple[list[str], Any]:
    asked: list[str] = []

    async def elicit(
        context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        asked.append(params.message)
        assert isinstance(params, types.ElicitRequestFormParams)
        if "name" in params.requested_schema["properties"]:
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        return types.ElicitResult(action="accept", content={"colour": "teal"})

    return asked, elicit


# --- 1. the official client against one server ----------------------------------------------------


async def test_auto_mode_discovers_2026_07_28() -> None:
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(reserve_book.mcp.streamable_http_app()) as base,
            Client(f"{base}/mcp", mode="auto", read_timeout_seconds=READ_TIMEOUT) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            assert client.server_capabilities.tools is not None
            result = await client.call_tool("reserve_book", {"title": "Dune"})
    assert text_of(result) == "Reserved 'Dune' (6 copies left)."


async def test_list_tools_shows_the_seed_schema() -> None:
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(reserve_book.mcp.streamable_http_app()) as base,
            official_client(f"{base}/mcp") as (client, _),
        ):
            listing = await client.list_tools()
    [tool] = listing.tools
    assert tool.name == "reserve_book"
    assert tool.description == "Reserve a copy of a book."
    assert tool.input_schema == RESERVE_BOOK_SCHEMA
    [listed] = await reserve_book.mcp.list_tools()
    assert tool.input_schema == listed.input_schema


async def test_reserve_book_completes_in_one_round() -> None:
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(reserve_book.mcp.streamable_http_app()) as base,
            official_client(f"{base}/mcp") as (client, posts),
        ):
            result = await client.call_tool("reserve_book", {"title": "Dune"})
    assert not result.is_error
    assert text_of(result) == "Reserved 'Dune' (6 copies left)."
    [call] = tool_calls(posts, "reserve_book")
    assert not call.resumed


async def test_elicitation_rounds_complete_through_the_automatic_loop() -> None:
    asked, elicit = accept_backorder()
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(build_bookshop(keys=[KEY]).streamable_http_app()) as base,
            official_client(f"{base}/mcp", elicitation_callback=elicit) as (client, posts),
        ):
            result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert not result.is_error
    assert text_of(result) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    [question] = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.message == "'Neuromancer' is out of stock (2-3 weeks). Order anyway?"
    assert question.requested_schema["properties"]["confirm"]["type"] == "boolean"
    first, retry = tool_calls(posts, "order_book")
    assert not first.resumed
    assert retry.resumed
    assert retry.params["arguments"] == {"title": "Neuromancer"}
    [answer] = retry.params["inputResponses"].values()
    assert answer == {"action": "accept", "content": {"confirm": True}}


async def test_a_declined_elicitation_is_an_error_result() -> None:
    async def decline(
        context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return types.ElicitResult(action="decline")

    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(build_bookshop(keys=[KEY]).streamable_http_app()) as base,
            official_client(f"{base}/mcp", elicitation_callback=decline) as (client, posts),
        ):
            result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.is_error
    assert text_of(result) == (
        "Error executing tool order_book: Resolver for parameter 'backorder' could not "
        "resolve: elicitation was decline"
    )
    assert len(tool_calls(posts, "order_book")) == 2


async def test_sampling_round_uses_the_clients_model() -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Hyperion"),
            model="stub-model-1",
        )

    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            serve_asgi(recommend_book.mcp.streamable_http_app()) as base,
            official_client(f"{base}/mcp", sampling_callback=sample) as (client, posts),
        ):
            result = await client.call_tool("recommend_book", {"genre": "sci-fi"})
    assert not result.is_error
    assert text_of(result) == "Today's sci-fi pick: Hyperion"
    [params] = asked
    assert params.max_tokens == 50
    [message] = params.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Suggest one sci-fi book title. Answer with the title only."
    assert len(tool_calls(posts, "recommend_book")) == 2


async def test_roots_round_against_a_served_file(
    fleet: dict[str, EngineProcess], tmp_path: Path
) -> None:
    calls: list[int] = []

    async def roots(context: Any) -> types.ListRootsResult | types.ErrorData:
        calls.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri(), name="books")])

    with anyio.fail_after(CALL_TIMEOUT):
        async with official_client(fleet["replica-a"].url, list_roots_callback=roots) as (
            client,
            posts,
        ):
            result = await client.call_tool("list_workspace", {})
    assert not result.is_error
    assert text_of(result) == f"Roots: books={tmp_path.as_uri()}"
    assert calls == [1]
    assert [p.resumed for p in tool_calls(posts, "list_workspace")] == [False, True]


async def test_two_dependent_elicitations_take_three_rounds(
    fleet: dict[str, EngineProcess],
) -> None:
    asked, elicit = answer_name_then_colour()
    with anyio.fail_after(CALL_TIMEOUT):
        async with official_client(fleet["replica-a"].url, elicitation_callback=elicit) as (
            client,
            posts,
        ):
            result = await client.call_tool("favourite_colour", {})
    assert not result.is_error
    assert text_of(result) == "Ada likes teal"
    assert asked == ["What is your name?", "What is your favourite colour, Ada?"]
    rounds = tool_calls(posts, "favourite_colour")
    assert [r.resumed for r in rounds] == [False, True, True]
    assert {r.replica for r in rounds} == {"replica-a"}


# --- 2. one call, its rounds served by different replicas -----------------------------------------


def assert_served_as_recorded(proxy: RoundRobinProxy, fleet: dict[str, EngineProcess]) -> None:
    """The replica header of every response names the upstream the proxy chose for it."""
    by_url = {r.base_url: r.replica for r in fleet.values()}
    for forwarded in proxy.forwarded:
        assert forwarded.replica == by_url[forwarded.upstream], forwarded


async def test_rounds_of_one_call_land_on_both_replicas(
    fleet: dict[str, EngineProcess],
) -> None:
    asked, elicit = accept_backorder()
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            proxied(fleet["replica-a"], fleet["replica-b"]) as (proxy, url),
            official_client(url, elicitation_callback=elicit) as (client, _),
        ):
            result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert not result.is_error
    assert text_of(result) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert len(asked) == 1
    rounds = [p for p in proxy.posts("tools/call") if p.tool == "order_book"]
    assert [r.resumed for r in rounds] == [False, True]
    assert {r.replica for r in rounds} == {"replica-a", "replica-b"}
    assert all(r.status == 200 for r in rounds)
    assert_served_as_recorded(proxy, fleet)


async def test_a_three_round_chain_alternates_replicas_over_sse(
    fleet: dict[str, EngineProcess],
) -> None:
    asked, elicit = answer_name_then_colour()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            proxied(fleet["replica-a"], fleet["replica-b"]) as (proxy, url),
            official_client(url, elicitation_callback=elicit) as (client, _),
        ):
            # With a progress token, the progress each round reports streams as text/event-stream.
            result = await client.call_tool("favourite_colour", {}, progress_callback=progress)
    assert not result.is_error
    assert text_of(result) == "Ada likes teal"
    assert asked == ["What is your name?", "What is your favourite colour, Ada?"]
    rounds = [p for p in proxy.posts("tools/call") if p.tool == "favourite_colour"]
    assert [r.resumed for r in rounds] == [False, True, True]
    replicas = [r.replica for r in rounds]
    assert replicas[0] != replicas[1] != replicas[2]
    assert set(replicas) == {"replica-a", "replica-b"}
    assert all(r.content_type.startswith("text/event-stream") for r in rounds)
    assert_served_as_recorded(proxy, fleet)


# --- 3. replicas that do not share keys -----------------------------------------------------------


def wait_for_log(process: EngineProcess, needle: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        log = process.log_tail(20_000)
        if needle in log or time.monotonic() > deadline:
            return log
        time.sleep(0.05)


async def test_replicas_with_different_keys_refuse_each_others_state(
    fleet: dict[str, EngineProcess],
) -> None:
    rogue = fleet["rogue"]
    # Control: the rogue replica completes the very same call on its own, with its own key.
    _, elicit_alone = accept_backorder()
    with anyio.fail_after(CALL_TIMEOUT):
        async with official_client(rogue.url, elicitation_callback=elicit_alone) as (client, _):
            alone = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert text_of(alone) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."

    asked, elicit = accept_backorder()
    with anyio.fail_after(CALL_TIMEOUT):
        async with (
            proxied(fleet["replica-a"], rogue) as (proxy, url),
            official_client(url, elicitation_callback=elicit) as (client, _),
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("order_book", {"title": "Neuromancer"})
    assert refused.value.code == types.INVALID_PARAMS == -32602
    assert refused.value.error.message == "Invalid or expired requestState"
    assert refused.value.error.data == {"reason": "invalid_request_state"}
    assert len(asked) == 1  # round one was answered; its retry was refused
    first, retry = proxy.posts("tools/call")
    assert (first.resumed, retry.resumed) == (False, True)
    assert {first.replica, retry.replica} == {"replica-a", "rogue"}
    assert (first.status, retry.status) == (200, 400)
    assert_served_as_recorded(proxy, fleet)
    refuser = fleet[retry.replica or ""]
    logged = wait_for_log(refuser, "requestState rejected")
    assert "requestState rejected on tools/call: unknown key" in logged
