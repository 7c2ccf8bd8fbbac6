"""Every code block of the two seed pages runs and does what the page says."""

from __future__ import annotations

import pytest

from engine.testing import Client
from examples.seeds import (
    describe_catalog,
    enable_recommendations,
    order_book_delivery,
    order_book_elicit,
    recommend_book,
    reserve_book,
    search_books,
)

pytestmark = pytest.mark.anyio


def accept(content: dict[str, object]):
    return lambda params: {"action": "accept", "content": content}


async def test_reserve_book_reserves_a_copy() -> None:
    async with Client(reserve_book.mcp) as client:
        result = await client.call_tool("reserve_book", {"title": "Dune"})
    assert result.text == "Reserved 'Dune' (6 copies left)."
    assert not result.is_error


async def test_reserve_book_hands_zero_copies_for_neuromancer() -> None:
    async with Client(reserve_book.mcp) as client:
        result = await client.call_tool("reserve_book", {"title": "Neuromancer"})
    assert result.text == "'Neuromancer' is out of stock."


async def test_reserve_book_schema_has_only_title() -> None:
    async with Client(reserve_book.mcp) as client:
        [tool] = await client.list_tools()
    assert tool["inputSchema"] == {
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}},
        "required": ["title"],
        "title": "reserve_bookArguments",
    }


async def test_a_client_sent_value_for_a_resolved_parameter_is_ignored() -> None:
    async with Client(reserve_book.mcp) as client:
        result = await client.call_tool(
            "reserve_book", {"title": "Dune", "stock": {"title": "Dune", "copies": 999}}
        )
    assert result.text == "Reserved 'Dune' (6 copies left)."


async def test_check_stock_runs_once_per_round_for_two_consumers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = order_book_delivery.INVENTORY.get

    def counting_get(title: str, default: int = 0) -> int:
        calls.append(title)
        return original(title, default)

    monkeypatch.setattr(order_book_delivery, "INVENTORY", _Counting(counting_get))
    async with Client(order_book_delivery.mcp) as client:
        result = await client.call_tool("order_book", {"title": "Dune"})
    assert result.text == "Ordered 'Dune'; it arrives tomorrow."
    assert calls == ["Dune"]


class _Counting:
    def __init__(self, get: object) -> None:
        self.get = get


async def test_order_book_on_backorder_estimates_weeks() -> None:
    async with Client(order_book_delivery.mcp) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.text == "'Neuromancer' is on backorder; it would arrive in 2-3 weeks."


async def test_in_stock_order_asks_nothing() -> None:
    async with Client(order_book_elicit.mcp, elicitation=accept({"confirm": True})) as client:
        result = await client.call_tool("order_book", {"title": "Dune"})
    assert result.text == "Ordered 'Dune'."
    assert len(result.rounds) == 1


async def test_out_of_stock_order_asks_then_backorders() -> None:
    async with Client(order_book_elicit.mcp, elicitation=accept({"confirm": True})) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    first = result.rounds[0]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "confirm_backorder": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "'Neuromancer' is out of stock (2-3 weeks). Order anyway?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "confirm": {
                            "description": "Order anyway and wait?",
                            "title": "Confirm",
                            "type": "boolean",
                        }
                    },
                    "required": ["confirm"],
                    "title": "Backorder",
                },
            },
        }
    }
    assert result.text == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


async def test_answering_no_is_still_an_answer() -> None:
    async with Client(order_book_elicit.mcp, elicitation=accept({"confirm": False})) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.text == "No order placed."
    assert not result.is_error


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declining_ends_the_call_and_the_body_never_runs(
    action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[bool] = []
    original = order_book_elicit.order_book

    async def spy(**kwargs: object) -> str:
        ran.append(True)
        return await original(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(order_book_elicit.mcp.tools["order_book"].signature, "fn", spy)
    async with Client(order_book_elicit.mcp, elicitation=lambda p: {"action": action}) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.is_error
    assert result.text == (
        "Error executing tool order_book: Resolver for parameter 'backorder' could not "
        f"resolve: elicitation was {action}"
    )
    assert ran == []


async def test_recommend_book_samples_the_client_model() -> None:
    def sampling(params: dict[str, object]) -> dict[str, object]:
        assert params == {
            "messages": [
                {
                    "role": "user",
                    "content": {
                        "type": "text",
                        "text": "Suggest one sci-fi book title. Answer with the title only.",
                    },
                }
            ],
            "maxTokens": 50,
        }
        return {"role": "assistant", "content": {"type": "text", "text": "Hyperion"}, "model": "m"}

    async with Client(recommend_book.mcp, sampling=sampling) as client:
        result = await client.call_tool("recommend_book", {"genre": "sci-fi"})
    assert result.text == "Today's sci-fi pick: Hyperion"


async def test_search_books_sees_its_request_id_and_hides_ctx() -> None:
    async with Client(search_books.mcp) as client:
        [tool] = await client.list_tools()
        first = await client.call_tool("search_books", {"query": "dune"})
        second = await client.call_tool("search_books", {"query": "dune"})
    assert tool["inputSchema"] == {
        "type": "object",
        "properties": {"query": {"title": "Query", "type": "string"}},
        "required": ["query"],
        "title": "search_booksArguments",
    }
    assert first.text == "[request 2] Found 3 books matching 'dune'."
    assert second.text == "[request 3] Found 3 books matching 'dune'."


async def test_describe_catalog_reads_its_own_resource() -> None:
    async with Client(describe_catalog.mcp) as client:
        tools = await client.list_tools()
        result = await client.call_tool("describe_catalog", {})
    [tool] = [t for t in tools if t["name"] == "describe_catalog"]
    assert tool["inputSchema"]["properties"] == {}
    assert result.text == "The catalog is organised into: fiction, non-fiction, poetry"


async def test_read_resource_gives_content_and_mime_type() -> None:
    from engine.context import Context
    from engine.scope import RequestScope

    ctx: Context[object] = Context(describe_catalog.mcp.core, RequestScope())
    [contents] = await ctx.read_resource("catalog://genres")
    assert contents.content == "fiction, non-fiction, poetry"
    assert contents.mime_type == "text/plain"


async def test_unknown_tool_until_enabled() -> None:
    mcp = enable_recommendations.mcp
    async with Client(mcp) as client:
        before = await client.call_tool("recommend_book", {"genre": "sci-fi"})
        enabled = await client.call_tool("enable_recommendations", {})
        names = [t["name"] for t in await client.list_tools()]
        after = await client.call_tool("recommend_book", {"genre": "sci-fi"})
    assert before.is_error and before.text == "Unknown tool: recommend_book"
    assert enabled.text == "Recommendations are now available."
    assert "recommend_book" in names
    assert after.text == "In sci-fi, try 'Dune'."
    mcp.remove_tool("recommend_book")
