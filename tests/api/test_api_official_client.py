"""The official ``mcp`` SDK's ``Client`` takes an ``MCPServer`` of this package in process, as
it takes its own: a test suite written with it runs unchanged."""

from __future__ import annotations

from typing import Annotated

import anyio
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult, TextContent
from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    ok: bool


async def confirm(title: str) -> Elicit[Confirm]:
    return Elicit(f"Order {title!r}?", Confirm)


def bookshop() -> MCPServer:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.tool()
    async def order(title: str, answer: Annotated[Confirm, Resolve(confirm)]) -> str:
        return f"Ordered {title!r}." if answer.ok else "Not ordered."

    return mcp


async def accept(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_calls_a_tool_that_asks_in_either_era(mode: str) -> None:
    async with Client(bookshop(), mode=mode, elicitation_callback=accept) as client:  # type: ignore[arg-type]
        result = await client.call_tool("order", {"title": "Dune"})
    assert result.content == [TextContent(type="text", text="Ordered 'Dune'.")]


async def test_several_official_clients_share_one_server_at_once() -> None:
    mcp = bookshop()
    texts: list[str] = []

    async def one(title: str) -> None:
        async with Client(mcp, elicitation_callback=accept) as client:  # type: ignore[arg-type]
            result = await client.call_tool("order", {"title": title})
            block = result.content[0]
            assert isinstance(block, TextContent)
            texts.append(block.text)

    async with anyio.create_task_group() as tg:
        for title in ("Dune", "Emma", "Ulysses"):
            tg.start_soon(one, title)
    assert sorted(texts) == ["Ordered 'Dune'.", "Ordered 'Emma'.", "Ordered 'Ulysses'."]
