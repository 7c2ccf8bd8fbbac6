"""The bench bookshop on the official MCP Python SDK (``mcp==2.3.0``), served by uvicorn.

Runs in the bench's own virtualenv (``bench/.venv-official``), never in the project venv.
Same tool names, same logic and same uvicorn settings as ``bench/servers/ours.py``:

    python bench/servers/official.py --port 8123

Every resolver is ``async`` (a sync resolver would add a worker-thread hop on both sides).
"""

from __future__ import annotations

import argparse
import os
from typing import Annotated

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Elicit, RequestStateSecurity, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel, Field

KEY = os.environ.get("BENCH_KEY", "bench-shared-secret-0123456789abcdef-0123456789")
INVENTORY = {"Dune": 7, "Neuromancer": 0}
SLOW = 0.05


class Stock(BaseModel):
    title: str
    copies: int


class Backorder(BaseModel):
    confirm: bool = Field(description="Order anyway and wait?")


class Confirm(BaseModel):
    confirm: bool = Field(description="Go ahead?")


mcp = MCPServer(
    "Bookshop",
    log_level="WARNING",
    request_state_security=RequestStateSecurity(keys=[KEY]),
)


# --- 1 round: reserve_book ------------------------------------------------------------------


async def check_stock(title: str) -> Stock:
    return Stock(title=title, copies=INVENTORY.get(title, 0))


@mcp.tool()
async def reserve_book(title: str, stock: Annotated[Stock, Resolve(check_stock)]) -> str:
    """Reserve a copy of a book."""
    if stock.copies == 0:
        return f"{title!r} is out of stock."
    return f"Reserved {title!r} ({stock.copies - 1} copies left)."


# --- 2 rounds: order_book (one elicitation when out of stock) -----------------------------------


async def confirm_backorder(
    title: str, stock: Annotated[Stock, Resolve(check_stock)]
) -> Backorder | Elicit[Backorder]:
    if stock.copies > 0:
        return Backorder(confirm=True)
    return Elicit(f"{title!r} is out of stock (2-3 weeks). Order anyway?", Backorder)


@mcp.tool()
async def order_book(
    title: str,
    stock: Annotated[Stock, Resolve(check_stock)],
    backorder: Annotated[Backorder, Resolve(confirm_backorder)],
) -> str:
    """Order a book from the shop."""
    if not backorder.confirm:
        return "No order placed."
    if stock.copies == 0:
        return f"Backordered {title!r}; it ships in 2-3 weeks."
    return f"Ordered {title!r}."


# --- chain: Sample -> Elicit -> Elicit --------------------------------------------------------


async def suggest_title(genre: str) -> Sample:
    prompt = f"Suggest one {genre} book title. Answer with the title only."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=50,
    )


def _text(result: CreateMessageResult) -> str:
    return result.content.text if result.content.type == "text" else "the classics"


async def confirm_pick(
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
) -> Elicit[Confirm]:
    return Elicit(f"Order {_text(suggestion)!r}?", Confirm)


async def confirm_again(
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
    pick: Annotated[Confirm, Resolve(confirm_pick)],
) -> Elicit[Confirm]:
    return Elicit(f"Really order {_text(suggestion)!r}? It ships in 2-3 weeks.", Confirm)


@mcp.tool()
async def recommend_and_order(
    genre: str,
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
    pick: Annotated[Confirm, Resolve(confirm_pick)],
    again: Annotated[Confirm, Resolve(confirm_again)],
) -> str:
    """Ask the client's model for a title, then confirm twice."""
    if not (pick.confirm and again.confirm):
        return "No order placed."
    return f"Ordered {_text(suggestion)!r} ({genre})."


# --- a 1 MB sampled answer, then one more question ------------------------------------------------


async def write_draft(topic: str) -> Sample:
    prompt = f"Write a long article about {topic}."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=400_000,
    )


async def approve(draft: Annotated[CreateMessageResult, Resolve(write_draft)]) -> Elicit[Confirm]:
    return Elicit(f"Publish the {len(_text(draft))}-character draft?", Confirm)


@mcp.tool()
async def publish_draft(
    topic: str,
    draft: Annotated[CreateMessageResult, Resolve(write_draft)],
    ok: Annotated[Confirm, Resolve(approve)],
) -> str:
    """Have the client's model draft an article, then ask before publishing it."""
    if not ok.confirm:
        return "Not published."
    return f"Published {len(_text(draft))} characters on {topic!r}."


# --- two independent slow resolvers --------------------------------------------------------------


async def slow_left(item: str) -> str:
    await anyio.sleep(SLOW)
    return f"left:{item}"


async def slow_right(item: str) -> str:
    await anyio.sleep(SLOW)
    return f"right:{item}"


@mcp.tool()
async def slow_pair(
    item: str,
    left: Annotated[str, Resolve(slow_left)],
    right: Annotated[str, Resolve(slow_right)],
) -> str:
    """Two lookups that do not depend on each other, 50 ms each."""
    return f"{left} {right}"


# --- serving -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="the SDK's JSON response mode (default: its default, SSE-capable mode)",
    )
    args = parser.parse_args()
    app = mcp.streamable_http_app(json_response=args.json_response, stateless_http=True)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        workers=1,
        loop="uvloop",
        http="httptools",
        log_level="critical",
        access_log=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
