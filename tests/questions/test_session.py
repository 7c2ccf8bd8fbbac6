"""``ctx.session``: the session API of handlers ported from the official SDK, in both eras.

On 2026-07-28 its questions travel in ``input_required`` results (the body runs again); on
2025-11-25 they are asked in place, on the session's stream, and the client's answer (or its
refusal) comes back into the same call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client as OfficialClient
from mcp import MCPError
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

from engine import Context, MCPServer
from engine.testing import Client
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio

TIMEOUT = 20.0
CARD = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Name(BaseModel):
    name: str


def library() -> MCPServer:
    mcp = MCPServer("Library", keys=[KEY])

    @mcp.tool()
    async def issue_card(ctx: Context) -> str:
        answer = await ctx.session.elicit_form("Whose card is it?", CARD)
        if answer.action != "accept":
            return f"No card issued ({answer.action})."
        return f"Card issued to {answer.content['name']}."

    @mcp.tool()
    async def pay_fine(member: str, ctx: Context) -> str:
        answer = await ctx.session.elicit_url(
            "Pay your fine", f"https://pay.example.com/{member}", f"fine-{member}"
        )
        return f"payment page: {answer.action}"

    @mcp.tool()
    async def fine_paid(member: str, ctx: Context) -> str:
        await ctx.session.send_elicit_complete(f"fine-{member}")
        return "noted"

    @mcp.tool()
    async def summarize(title: str, ctx: Context) -> str:
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=f"Summarize {title}")
        )
        result = await ctx.session.create_message([message], max_tokens=50)
        return result.content.text

    @mcp.tool()
    async def shelves(ctx: Context) -> list[str]:
        roots = await ctx.session.list_roots()
        return [root.uri for root in roots.roots]

    @mcp.tool()
    def features(ctx: Context) -> list[str]:
        wanted = {
            "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
            "sampling tools": {"sampling": {"tools": {}}},
            "roots": types.ClientCapabilities(roots=types.RootsCapability()),
        }
        return [name for name, cap in wanted.items() if ctx.session.check_client_capability(cap)]

    @mcp.tool()
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", Name)
        return f"Hello, {answer.data.name}." if answer.action == "accept" else "Hello."

    return mcp


async def test_a_form_given_as_a_json_schema_returns_what_the_client_sent() -> None:
    seen: list[dict[str, Any]] = []

    def user(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with Client(library(), elicitation=user) as client:
        result = await client.call_tool("issue_card", {})
    assert result.text == "Card issued to Ada."
    assert seen == [{"mode": "form", "message": "Whose card is it?", "requestedSchema": CARD}]


async def test_a_url_elicitation_keeps_the_id_it_was_given() -> None:
    seen: list[dict[str, Any]] = []

    def user(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"action": "decline"}

    async with Client(library(), elicitation=user) as client:
        result = await client.call_tool("pay_fine", {"member": "m7"})
    assert result.text == "payment page: decline"
    assert seen == [
        {
            "mode": "url",
            "message": "Pay your fine",
            "url": "https://pay.example.com/m7",
            "elicitationId": "fine-m7",
        }
    ]


async def test_sampling_and_roots_through_the_session() -> None:
    def model(params: dict[str, Any]) -> dict[str, Any]:
        assert params["maxTokens"] == 50
        text = params["messages"][0]["content"]["text"]
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"{text}: spice."},
            "model": "m",
        }

    def roots(params: dict[str, Any]) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///stacks/fiction", "name": "fiction"}]}

    async with Client(library(), sampling=model, roots=roots) as client:
        summary = await client.call_tool("summarize", {"title": "Dune"})
        found = await client.call_tool("shelves", {})
    assert summary.text == "Summarize Dune: spice."
    assert found.structured_content == {"result": ["file:///stacks/fiction"]}


async def test_check_client_capability_takes_a_model_or_a_dict() -> None:
    async with Client(library(), elicitation=lambda p: {"action": "cancel"}) as client:
        only_forms = await client.call_tool("features", {})
    async with Client(library(), capabilities={"sampling": {}, "roots": {}}) as client:
        no_tools = await client.call_tool("features", {})
    async with Client(library(), capabilities={"sampling": {"tools": {}}}) as client:
        tools = await client.call_tool("features", {})
    assert only_forms.structured_content == {"result": ["elicitation"]}
    assert no_tools.structured_content == {"result": ["roots"]}
    assert tools.structured_content == {"result": ["sampling tools"]}


def announcer() -> MCPServer:
    mcp = MCPServer("Announcer", keys=[KEY])

    @mcp.tool()
    async def count_down(ctx: Context) -> str:
        for step in ("3", "2", "1"):
            message = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level="info", logger="countdown", data=step
                )
            )
            await ctx.session.send_notification(message, related_request_id=ctx.request_id)
        await ctx.session.send_notification(
            "notifications/message", {"level": "debug", "data": "too quiet"}, ctx.request_id
        )
        await ctx.session.send_notification(
            "notifications/example/lap", {"lap": 1}, related_request_id=ctx.request_id
        )
        await ctx.session.send_notification("notifications/example/elsewhere", {})
        await ctx.session.send_elicit_complete("sign-in-7", related_request_id=ctx.request_id)
        return "liftoff"

    return mcp


async def test_a_notification_for_this_request_rides_its_own_stream() -> None:
    async with Client(announcer()) as client:
        meta = {**client.meta(), "io.modelcontextprotocol/logLevel": "info"}
        result = await client.send("tools/call", {"name": "count_down", "_meta": meta})
        heard = [(n["method"], n["params"]) for n in client.notifications]
    assert result["content"][0]["text"] == "liftoff"
    assert heard == [
        ("notifications/message", {"level": "info", "logger": "countdown", "data": "3"}),
        ("notifications/message", {"level": "info", "logger": "countdown", "data": "2"}),
        ("notifications/message", {"level": "info", "logger": "countdown", "data": "1"}),
        ("notifications/example/lap", {"lap": 1}),
        ("notifications/elicitation/complete", {"elicitationId": "sign-in-7"}),
    ]


async def test_log_lines_for_this_request_need_the_client_to_ask_for_them() -> None:
    async with Client(announcer()) as client:
        await client.call_tool("count_down", {})
        heard = [n["method"] for n in client.notifications]
    assert heard == ["notifications/example/lap", "notifications/elicitation/complete"]


# --- 2025-11-25: asked in place -----------------------------------------------------------------


@asynccontextmanager
async def legacy(mcp: MCPServer, **callbacks: Any) -> AsyncIterator[OfficialClient]:
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
        OfficialClient(
            streamable_http_client(base.rstrip("/") + "/mcp", http_client=http),
            mode="legacy",
            read_timeout_seconds=TIMEOUT,
            **callbacks,
        ) as client,
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_legacy_client_gets_the_url_and_the_id_then_the_completion() -> None:
    asked: list[types.ElicitRequestParams] = []
    heard: list[Any] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept")

    async def listen(message: Any) -> None:
        heard.append(message)

    async with legacy(library(), elicitation_callback=user, message_handler=listen) as client:
        paying = await client.call_tool("pay_fine", {"member": "m7"})
        paid = await client.call_tool("fine_paid", {"member": "m7"})
    assert text_of(paying) == "payment page: accept"
    [params] = asked
    assert isinstance(params, types.ElicitRequestURLParams)
    assert (params.url, params.elicitation_id) == ("https://pay.example.com/m7", "fine-m7")
    assert text_of(paid) == "noted"
    completions = [m for m in heard if isinstance(m, types.ElicitCompleteNotification)]
    assert [m.params.elicitation_id for m in completions] == ["fine-m7"]


async def test_a_legacy_client_without_the_capability_refuses_and_the_call_fails_with_that() -> (
    None
):
    async with legacy(library()) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("greet", {})
    assert caught.value.error.code == types.INVALID_REQUEST
    assert caught.value.error.message == "Elicitation not supported"


async def test_an_error_a_legacy_client_answers_with_is_the_calls_error() -> None:
    async def kiosk(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-32000, message="No forms on a kiosk", data={"kiosk": 3})

    async with legacy(library(), elicitation_callback=kiosk) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("issue_card", {})
    assert caught.value.error == types.ErrorData(
        code=-32000, message="No forms on a kiosk", data={"kiosk": 3}
    )
