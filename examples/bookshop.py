"""The bookshop from the docs: a stock check, a question when a book is out of stock."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from engine import Elicit, MCPServer, Resolve

INVENTORY = {"Dune": 7, "Neuromancer": 0}


class Stock(BaseModel):
    title: str
    copies: int


class Backorder(BaseModel):
    confirm: bool = Field(description="Order anyway and wait?")


async def check_stock(title: str) -> Stock:
    return Stock(title=title, copies=INVENTORY.get(title, 0))


async def confirm_backorder(
    title: str, stock: Annotated[Stock, Resolve(check_stock)]
) -> Backorder | Elicit[Backorder]:
    if stock.copies > 0:
        return Backorder(confirm=True)
    return Elicit(f"{title!r} is out of stock (2-3 weeks). Order anyway?", Backorder)


def build(keys: list[str] | None = None, **options: object) -> MCPServer:
    """A bookshop server; replicas built with the same keys resume each other's calls."""
    mcp = MCPServer("Bookshop", keys=keys, **options)  # type: ignore[arg-type]

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

    return mcp
