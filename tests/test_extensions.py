"""``MCPServer(extensions=[...])``: what an extension contributes (tools, resources, methods,
settings, a wrapper around ``tools/call``), and ``require_client_extension``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp.server.extension import Extension as OfficialExtension
from mcp.server.extension import ToolBinding as OfficialToolBinding
from pydantic import BaseModel

import engine
from engine import Context, MCPServer, ServerRequestContext, require_client_extension
from engine.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY
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
        async def balance(
            ctx: ServerRequestContext[Any, Any], params: PointsParams
        ) -> dict[str, Any]:
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


class Vouchers(engine.Extension):
    """An extension of ours: it overrides only what it adds."""

    identifier = "com.example/vouchers"

    def tools(self) -> list[engine.ToolBinding]:
        def voucher(code: str) -> str:
            """Check a voucher code."""
            return f"{code} is valid"

        return [engine.ToolBinding(voucher, kwargs={"title": "Voucher"})]

    def resources(self) -> list[engine.ResourceBinding]:
        return [engine.ResourceBinding(engine.TextResource(uri="vouchers://terms", text="1 each"))]

    def methods(self) -> list[engine.MethodBinding]:
        async def redeem(
            ctx: ServerRequestContext[Any, Any], params: PointsParams
        ) -> dict[str, Any]:
            require_client_extension(ctx, self.identifier)
            declared = ctx.session.client_capabilities.extensions  # type: ignore[attr-defined]
            return {"member": params.member, "declared": sorted(declared)}

        return [engine.MethodBinding("com.example/redeem", PointsParams, redeem)]


async def test_an_extension_of_ours_overrides_only_what_it_adds() -> None:
    mcp = MCPServer("Shop", keys=[KEY], extensions=[Vouchers()])
    declared = {"extensions": {"com.example/vouchers": {}}}
    async with Client(mcp, capabilities=declared) as client:
        checked = await client.call_tool("voucher", {"code": "SPRING"})
        terms = await client.read_resource("vouchers://terms")
        redeemed = await client.send("com.example/redeem", {"member": "ada"})
        discovered = await client.send("server/discover")
        with pytest.raises(ProtocolError) as invalid:
            await client.send("com.example/redeem", {"member": 7})
    async with Client(mcp) as undeclared:
        with pytest.raises(ProtocolError) as refused:
            await undeclared.send("com.example/redeem", {"member": "ada"})
    assert checked.text == "SPRING is valid"
    assert terms.raw["contents"][0]["text"] == "1 each"
    assert (redeemed["member"], redeemed["declared"]) == ("ada", ["com.example/vouchers"])
    assert discovered["capabilities"]["extensions"] == {"com.example/vouchers": {}}
    assert refused.value.code == MISSING_CLIENT_CAPABILITY
    assert (invalid.value.code, invalid.value.message) == (
        INVALID_PARAMS,
        "Invalid params for com.example/redeem: member: Input should be a valid string",
    )


def test_an_extension_classs_identifier_is_checked_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"Loose\.identifier must be 'vendor\.prefix/name'"):

        class Loose(engine.Extension):
            identifier = "loose"

    async def never(ctx: ServerRequestContext[Any, Any], params: PointsParams) -> None:
        raise AssertionError("never served")

    with pytest.raises(ValueError, match="empty protocol_versions"):
        engine.MethodBinding("com.example/never", PointsParams, never, frozenset())
