"""A server's handlers called from Python: the listings as models, a tool's result, a prompt,
a resource; failures as exceptions, not as error results."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest
from pydantic import BaseModel, ValidationError

from engine import (
    Context,
    MCPServer,
    ResourceError,
    ToolError,
    UnexpectedResourceError,
    UnexpectedToolError,
)
from engine.testing import Client
from engine.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    GetPromptResult,
    InputRequiredResult,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    TextContent,
    Tool,
)
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

mcp = MCPServer("Bookshop", keys=[KEY])
STOCK = {"Dune": 7}


@mcp.tool(description="Copies of a book in stock.")
def stock(title: str) -> int:
    if title not in STOCK:
        raise ToolError(f"no book called {title!r}")
    return STOCK[title]


@mcp.tool()
def shelve(title: str) -> str:
    raise RuntimeError("the shelf fell down")


class Confirmation(BaseModel):
    sure: bool


@mcp.tool()
async def clear_shelf(ctx: Context) -> str:
    answer = await ctx.elicit("Clear the whole shelf?", Confirmation)
    return "cleared" if answer.action == "accept" else "kept"


@mcp.tool()
async def stock_via(title: str, ctx: Context) -> CallToolResult:
    """Forwards its own request to another tool."""
    return await ctx.mcp_server.call_tool("stock", {"title": title}, ctx)


@mcp.prompt(description="Ask for a review.")
def review(title: str) -> str:
    return f"Review {title}."


@mcp.resource("shelf://fiction", description="What is on the shelf.")
def fiction() -> str:
    return "Dune"


@mcp.resource("shelf://{genre}/count")
def count(genre: str) -> bytes:
    return str(len(genre)).encode()


async def test_the_listings_are_models_as_clients_see_them() -> None:
    tools = await mcp.list_tools()
    assert isinstance(tools[0], Tool)
    assert [tool.name for tool in tools] == ["stock", "shelve", "clear_shelf", "stock_via"]
    assert tools[0].description == "Copies of a book in stock."
    assert tools[0].input_schema["required"] == ["title"]
    assert await mcp.list_prompts() == [
        Prompt(
            name="review",
            description="Ask for a review.",
            arguments=[PromptArgument(name="title", required=True)],
        )
    ]
    assert await mcp.list_resources() == [
        Resource(
            uri="shelf://fiction",
            name="fiction",
            description="What is on the shelf.",
            mime_type="text/plain",
        )
    ]
    [template] = await mcp.list_resource_templates()
    assert isinstance(template, ResourceTemplate)
    assert template.uri_template == "shelf://{genre}/count"


async def test_a_tool_answers_with_its_call_tool_result() -> None:
    result = await mcp.call_tool("stock", {"title": "Dune"})
    assert result == CallToolResult(
        content=[TextContent(text="7")], structured_content={"result": 7}
    )


async def test_a_tools_failure_is_raised_not_returned() -> None:
    with pytest.raises(ToolError) as deliberate:
        await mcp.call_tool("stock", {"title": "Solaris"})
    assert str(deliberate.value) == "Error executing tool stock: no book called 'Solaris'"

    with pytest.raises(UnexpectedToolError) as crashed:
        await mcp.call_tool("shelve", {"title": "Dune"})
    assert str(crashed.value) == "Error executing tool shelve"  # the crash's words stay in the log
    assert isinstance(crashed.value.__cause__, RuntimeError)
    assert type(deliberate.value) is ToolError  # only a crash is unexpected

    with pytest.raises(ToolError, match="Invalid arguments for tool stock") as invalid:
        await mcp.call_tool("stock", {})
    assert type(invalid.value.__cause__) is ValidationError
    with pytest.raises(ToolError, match="Unknown tool: restock"):
        await mcp.call_tool("restock", {})


async def test_a_tool_that_asks_a_question_needs_a_client() -> None:
    with pytest.raises(ToolError, match="asks the client a question") as asked:
        await mcp.call_tool("clear_shelf")
    assert "engine.testing.Client" in str(asked.value)
    assert "mcp.dependency_overrides[resolver]" in str(asked.value)


async def test_a_handler_forwards_its_request_to_another_tool() -> None:
    result = await mcp.call_tool("stock_via", {"title": "Dune"})
    assert result.structured_content == {"result": 7}


async def test_a_prompt_renders_and_a_resource_reads() -> None:
    prompt = await mcp.get_prompt("review", {"title": "Dune"})
    assert isinstance(prompt, GetPromptResult)
    assert prompt.messages[0].content == TextContent(text="Review Dune.")
    with pytest.raises(ValueError, match="Unknown prompt: summary"):
        await mcp.get_prompt("summary")

    [text] = await mcp.read_resource("shelf://fiction")
    assert (text.content, text.mime_type) == ("Dune", "text/plain")
    [blob] = await mcp.read_resource("shelf://poetry/count")
    assert blob.content == b"6"
    with pytest.raises(ResourceError, match="Unknown resource"):
        await mcp.read_resource("shelf://nowhere")


async def test_a_tool_returning_the_official_call_tool_result_answers_with_it() -> None:
    shop = MCPServer("Bookshop", keys=[KEY])

    @shop.tool()
    def receipt() -> mcp_types.CallToolResult:
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="paid")])

    [listed] = await shop.list_tools()
    assert listed.output_schema is None
    assert await shop.call_tool("receipt") == CallToolResult(content=[TextContent(text="paid")])


async def test_a_resources_crash_is_unexpected_and_keeps_what_it_raised() -> None:
    shop = MCPServer("Bookshop", keys=[KEY])
    jammed = OSError("the till is jammed")

    @shop.resource("till://total")
    def total() -> str:
        raise jammed

    @shop.resource("till://{day}/total")
    def day_total(day: str) -> str:
        raise jammed

    with pytest.raises(UnexpectedResourceError) as fixed:
        await shop.read_resource("till://total")
    with pytest.raises(UnexpectedResourceError) as templated:
        await shop.read_resource("till://monday/total")
    assert str(fixed.value) == "Error reading resource till://total"
    assert str(templated.value) == "Error creating resource from template till://monday/total"
    assert fixed.value.__cause__ is jammed and templated.value.__cause__ is jammed


CONFIRM = ElicitRequest(
    params=ElicitRequestFormParams(
        message="Open the rare books room?",
        requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
)


async def test_input_requests_a_handler_returns_are_handed_back_as_they_are() -> None:
    shop = MCPServer("Bookshop", keys=[KEY])
    asked = mcp_types.InputRequiredResult(
        input_requests={"ok": mcp_types.ElicitRequest.model_validate(CONFIRM.to_wire())}
    )

    @shop.tool()
    def open_room() -> str | mcp_types.InputRequiredResult:
        return asked

    @shop.prompt()
    def rare_books() -> str | mcp_types.InputRequiredResult:
        return asked

    @shop.resource("rooms://{name}")
    def room(name: str) -> str | mcp_types.InputRequiredResult:
        return asked

    assert await shop.call_tool("open_room") is asked
    assert await shop.get_prompt("rare_books") is asked
    assert await shop.read_resource("rooms://rare") is asked


async def test_ctx_read_resource_returns_contents_only() -> None:
    shop = MCPServer("Bookshop", keys=[KEY])

    @shop.resource("rooms://{name}")
    def room(name: str) -> str | InputRequiredResult:
        return InputRequiredResult(input_requests={"ok": CONFIRM})

    with pytest.raises(RuntimeError, match=r"use MCPServer.read_resource\(uri, context\)"):
        await Context(mcp_server=shop).read_resource("rooms://rare")


async def test_a_handler_forwards_the_input_requests_a_direct_call_hands_back() -> None:
    shop = MCPServer("Bookshop", keys=[KEY])
    seen: list[Any] = []

    @shop.resource("rooms://{name}")
    def room(name: str, ctx: Context) -> str | InputRequiredResult:
        seen.append((ctx.input_responses, ctx.request_state))
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"ok": CONFIRM}, request_state=name)
        answer = ctx.input_responses["ok"]
        return f"{ctx.request_state} room: " + ("open" if answer.content["ok"] else "closed")

    @shop.tool()
    async def visit(name: str, ctx: Context) -> str | InputRequiredResult:
        read = await shop.read_resource(f"rooms://{name}", ctx)
        if not isinstance(read, list):
            return read  # the room's question, asked as this tool's
        return read[0].content

    yes = {"action": "accept", "content": {"ok": True}}
    async with Client(shop, elicitation=lambda params: yes) as client:
        result = await client.call_tool("visit", {"name": "rare"})
    assert result.text == "rare room: open"
    assert len(result.rounds) == 2
    assert seen == [
        (None, None),
        ({"ok": ElicitResult(action="accept", content={"ok": True})}, "rare"),
    ]
