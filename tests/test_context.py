"""The Context page: what a handler can ask of the request, the server and the client."""

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from engine import Context, MCPServer
from engine.testing import Client
from engine.types import ClientCapabilities
from stores import MemoryStore
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


async def test_lifespan_context_reaches_handlers() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        yield {"db": "connected"}
        events.append("stop")

    mcp = MCPServer("Life", keys=[KEY], lifespan=lifespan)

    @mcp.tool()
    def status(ctx: Context) -> str:
        return ctx.request_context.lifespan_context["db"]

    async with Client(mcp) as client:
        result = await client.call_tool("status", {})
    assert result.text == "connected"
    assert events == ["start", "stop"]


async def test_headers_are_what_the_transport_carried() -> None:
    mcp = MCPServer("Headers", keys=[KEY])

    @mcp.tool()
    def locale(ctx: Context) -> str:
        return (ctx.headers or {}).get("x-locale", "none")

    async with Client(mcp) as client:
        without = await client.call_tool("locale", {})
    async with Client(mcp, headers={"x-locale": "es-ES"}) as client:
        with_header = await client.call_tool("locale", {})
    assert without.text == "none"
    assert with_header.text == "es-ES"


async def test_progress_goes_to_the_caller_only_when_asked_for() -> None:
    mcp = MCPServer("Progress", keys=[KEY])

    @mcp.tool()
    async def work(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2)
        return "done"

    async with Client(mcp) as client:
        await client.call_tool("work", {})
        assert client.notifications == []
        meta = {**client.meta(), "progressToken": "t1"}
        await client.send("tools/call", {"name": "work", "_meta": meta})
    assert client.notifications == [
        {
            "method": "notifications/progress",
            "params": {"progressToken": "t1", "progress": 1, "total": 2, "message": "half"},
        },
        {
            "method": "notifications/progress",
            "params": {"progressToken": "t1", "progress": 2, "total": 2},
        },
    ]


async def test_notify_methods_reach_every_listener() -> None:
    mcp = MCPServer("Notify", keys=[KEY])
    heard: list[tuple[str, dict[str, Any]]] = []

    async def listener(method: str, params: dict[str, Any]) -> None:
        heard.append((method, params))

    mcp.add_listener(listener)

    @mcp.tool()
    async def change(ctx: Context) -> str:
        await ctx.notify_tools_changed()
        await ctx.notify_prompts_changed()
        await ctx.notify_resources_changed()
        await ctx.notify_resource_updated("file:///a")
        await ctx.session.send_tool_list_changed()
        return "ok"

    async with Client(mcp) as client:
        await client.call_tool("change", {})
    assert heard == [
        ("notifications/tools/list_changed", {}),
        ("notifications/prompts/list_changed", {}),
        ("notifications/resources/list_changed", {}),
        ("notifications/resources/updated", {"uri": "file:///a"}),
    ]


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_notifications_cross_replicas_through_the_store(backend: str, redis_url: str) -> None:
    shared = MemoryStore()

    def replica() -> MCPServer:
        return MCPServer("Bus", keys=[KEY], store=shared if backend == "memory" else redis_url)

    a, b = replica(), replica()
    heard: list[str] = []
    arrived = anyio.Event()

    async def listener(method: str, params: dict[str, Any]) -> None:
        heard.append(method)
        arrived.set()

    b.add_listener(listener)
    async with a.running(), b.running():
        await a.core.notify_list_changed("tools")
        with anyio.fail_after(2):
            await arrived.wait()
    assert heard == ["notifications/tools/list_changed"]


async def test_resources_and_prompts_take_a_context_too() -> None:
    mcp = MCPServer("Ctx", keys=[KEY])

    @mcp.resource("info://request")
    def info(ctx: Context) -> str:
        return f"request {ctx.request_id}"

    @mcp.prompt()
    def hello(name: str, ctx: Context) -> str:
        return f"Hello {name} (request {ctx.request_id})"

    async with Client(mcp) as client:
        read = await client.read_resource("info://request")
        prompt = await client.get_prompt("hello", {"name": "Ada"})
        listed = await client.send("prompts/list")
    assert read.raw["contents"][0]["text"] == "request 1"
    assert prompt.raw["messages"][0]["content"]["text"] == "Hello Ada (request 2)"
    assert listed["prompts"][0]["arguments"] == [{"name": "name", "required": True}]


# --- a Context made by hand, as the official SDK's tests make one ------------------------------


async def test_a_context_made_for_a_server_belongs_to_it_and_to_no_request() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    ctx: Context[Any] = Context(mcp_server=mcp)
    assert ctx.mcp_server is mcp
    assert (ctx.request_id, ctx.protocol_version, ctx.headers, ctx.round) == ("", None, None, 1)
    await ctx.report_progress(1, 2)  # no progress token asked for: nothing to send


async def test_a_context_made_from_a_request_record_takes_its_fields() -> None:
    record = SimpleNamespace(
        request_id=7,
        method="tools/call",
        protocol_version="2026-07-28",
        meta={"progressToken": "p1"},
    )
    ctx: Context[Any] = Context(request_context=record)
    assert (ctx.request_id, ctx.protocol_version) == ("7", "2026-07-28")
    assert ctx.request_context.method == "tools/call"
    assert ctx.request_context.meta == {"progressToken": "p1"}


async def test_a_context_of_no_server_says_so_when_a_server_is_needed() -> None:
    ctx: Context[Any] = Context()
    with pytest.raises(ValueError, match=r"make it with Context\(mcp_server=server\)"):
        ctx.mcp_server  # noqa: B018
    with pytest.raises(ValueError, match="belongs to no server"):
        await ctx.read_resource("file:///catalog")
    with pytest.raises(ValueError, match="outside of a request"):
        await ctx.notify_tools_changed()


async def test_a_context_made_without_a_request_has_no_request_record() -> None:
    ctx: Context[Any] = Context(mcp_server=MCPServer("Bookshop", keys=[KEY]))
    with pytest.raises(ValueError, match="outside of a request"):
        ctx.request_context  # noqa: B018


class Recorder:
    """A session as a test of a hand-made Context writes one: it records what it is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def report_progress(self, progress: float, total: float | None, message: str | None):
        self.sent.append(("progress", (progress, total, message)))

    async def send_log_message(self, **fields: Any) -> None:
        self.sent.append(("log", fields))


async def test_a_context_made_from_a_record_reports_through_its_session() -> None:
    session = Recorder()
    record = SimpleNamespace(
        request_id="r-9",
        method="tools/call",
        session=session,
        lifespan_context={"db": "test"},
        request=SimpleNamespace(headers={"x-shop": "north"}),
    )
    ctx: Context[Any] = Context(request_context=record)
    await ctx.report_progress(1, 4, "shelf 1")
    await ctx.info("restocked")
    assert session.sent == [
        ("progress", (1, 4, "shelf 1")),
        ("log", dict(level="info", data="restocked", logger=None, related_request_id="r-9")),
    ]
    assert ctx.session is session
    assert ctx.request_context is record
    assert ctx.headers == {"x-shop": "north"}  # the headers of the record's request


async def test_context_takes_the_official_two_type_parameters() -> None:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        yield {"db": "connected"}

    mcp = MCPServer("Life", keys=[KEY], lifespan=lifespan)

    @mcp.tool()
    def status(ctx: Context[dict[str, str], Any]) -> str:
        return ctx.request_context.lifespan_context["db"]

    [tool] = await mcp.list_tools()
    assert tool.input_schema["properties"] == {}
    async with Client(mcp) as client:
        result = await client.call_tool("status", {})
    assert result.text == "connected"


async def test_client_capabilities_read_by_attribute_and_as_a_mapping() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    seen: list[Any] = []

    @mcp.tool()
    def probe(ctx: Context) -> str:
        seen.extend([ctx.client_capabilities, ctx.session.client_capabilities])
        return "ok"

    declared = {"sampling": {}, "extensions": {"io.example/maps": {"zoom": True}}}
    async with Client(mcp, capabilities=declared) as client:
        await client.call_tool("probe", {})
    for capabilities in seen:
        assert capabilities.sampling == {} and capabilities.roots is None
        assert capabilities.extensions == {"io.example/maps": {"zoom": True}}
        assert capabilities["sampling"] == {} and "roots" not in capabilities
        assert capabilities.get("extensions") == {"io.example/maps": {"zoom": True}}
        assert capabilities == declared and dict(capabilities) == declared


def test_a_capability_not_of_its_shape_is_read_as_not_declared() -> None:
    capabilities = ClientCapabilities.declared({"sampling": True, "roots": {"listChanged": True}})
    assert capabilities.sampling is None
    assert capabilities == {"roots": {"listChanged": True}}
