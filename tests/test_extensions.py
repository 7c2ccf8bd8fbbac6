"""``MCPServer(extensions=[...])``: what an extension contributes (tools, resources, methods,
settings, a wrapper around ``tools/call``), and ``require_client_extension``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp.server.extension import Extension as OfficialExtension
from mcp.server.extension import ToolBinding as OfficialToolBinding
from pydantic import BaseModel

from engine import Context, MCPServer, require_client_extension
from engine.errors import METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY
from engine.extensions import ExtensionContext
from engine.testing import Client, ProtocolError
from engine.types import CallToolResult, TextContent
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

LOYALTY = "com.example/loyalty"


@dataclass
class ToolBinding:
    fn: Any
    meta: dict[str, Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResourceBinding:
    resource: Any


@dataclass
class MethodBinding:
    method: str
    params_type: type[BaseModel]
    handler: Any
    protocol_versions: frozenset[str] | None = None


@dataclass
class Card:
    uri: str = "loyalty://card"
    name: str = "card"
    mime_type: str = "text/plain"
    meta: dict[str, Any] = field(default_factory=lambda: {"ui": {"prefersBorder": True}})

    async def read(self) -> str:
        return "gold"


class PointsParams(BaseModel):
    member: str


class Loyalty:
    """An extension as a plain object: only its shape counts."""

    identifier = LOYALTY

    def settings(self) -> dict[str, Any]:
        return {"tiers": ["silver", "gold"]}

    def tools(self) -> list[ToolBinding]:
        def points(member: str) -> int:
            """Loyalty points of a member."""
            return len(member) * 10

        return [ToolBinding(points, meta={"com.example/loyalty": True})]

    def resources(self) -> list[ResourceBinding]:
        return [ResourceBinding(Card())]

    def methods(self) -> list[MethodBinding]:
        async def balance(ctx: ExtensionContext, params: PointsParams) -> dict[str, Any]:
            return {"member": params.member, "version": ctx.protocol_version}

        return [
            MethodBinding("com.example/balance", PointsParams, balance),
            MethodBinding("com.example/legacy-only", PointsParams, balance, frozenset({"2025"})),
        ]

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)


async def test_an_extension_adds_tools_resources_methods_and_settings() -> None:
    mcp = MCPServer("Shop", keys=[KEY], extensions=[Loyalty()])
    async with Client(mcp) as client:
        [tool] = (await client.send("tools/list"))["tools"]
        [listed] = (await client.send("resources/list"))["resources"]
        card = await client.read_resource("loyalty://card")
        points = await client.call_tool("points", {"member": "ada"})
        balance = await client.send("com.example/balance", {"member": "ada"})
        discovered = await client.send("server/discover")
        with pytest.raises(ProtocolError) as gated:
            await client.send("com.example/legacy-only", {"member": "ada"})
    assert tool["_meta"] == {"com.example/loyalty": True}
    # The resource object's fields, as they are: no description, its _meta listed and read.
    assert listed == {
        "uri": "loyalty://card",
        "name": "card",
        "mimeType": "text/plain",
        "_meta": {"ui": {"prefersBorder": True}},
    }
    [contents] = card.rounds[-1]["contents"]
    assert (contents["text"], contents["_meta"]) == ("gold", {"ui": {"prefersBorder": True}})
    assert points.structured_content == {"result": 30}
    assert (balance["member"], balance["version"]) == ("ada", "2026-07-28")
    assert discovered["capabilities"]["extensions"] == {LOYALTY: {"tiers": ["silver", "gold"]}}
    assert (gated.value.code, gated.value.data) == (METHOD_NOT_FOUND, "com.example/legacy-only")


def test_extensions_are_checked_when_the_server_is_made() -> None:
    class Unnamed(Loyalty):
        identifier = "loyalty"

    with pytest.raises(TypeError, match=r"vendor\.prefix/name"):
        MCPServer("Shop", keys=[KEY], extensions=[Unnamed()])
    with pytest.raises(ValueError, match="Two extensions have the identifier"):
        MCPServer("Shop", keys=[KEY], extensions=[Loyalty(), Loyalty()])


async def test_interceptors_wrap_tools_call_the_first_outermost() -> None:
    seen: list[str] = []

    class Audit(OfficialExtension):
        identifier = "com.example/audit"

        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            seen.append(f"audit {params.name}")
            return await call_next(ctx)

    class Closed(OfficialExtension):
        identifier = "com.example/closed"

        def tools(self) -> list[OfficialToolBinding]:
            return [OfficialToolBinding(fn=lambda: "open", kwargs={"name": "hours"})]

        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            seen.append(f"closed {params.name}")
            if params.name == "buy":
                return CallToolResult(content=[TextContent(text="the shop is closed")])
            return await call_next(ctx)

    mcp = MCPServer("Shop", keys=[KEY], extensions=[Audit(), Closed()])

    @mcp.tool()
    def buy(item: str) -> str:
        raise AssertionError("the interceptor answers first")

    async with Client(mcp) as client:
        refused = await client.call_tool("buy", {"item": "lamp"})
        hours = await client.call_tool("hours")
    assert refused.text == "the shop is closed"
    assert hours.text == "open"
    assert seen == ["audit buy", "closed buy", "audit hours", "closed hours"]


async def test_a_tool_can_require_the_client_to_declare_an_extension() -> None:
    mcp = MCPServer("Shop", keys=[KEY])

    @mcp.tool()
    def redeem(ctx: Context) -> str:
        require_client_extension(ctx.request_context, LOYALTY)
        return "redeemed"

    async with Client(mcp) as plain:
        with pytest.raises(ProtocolError) as refused:
            await plain.call_tool("redeem")
    assert refused.value.code == MISSING_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"extensions": {LOYALTY: {}}}}

    async with Client(mcp, capabilities={"extensions": {LOYALTY: {}}}) as declaring:
        assert (await declaring.call_tool("redeem")).text == "redeemed"
