"""Mistakes in a handler's signature fail when it is registered, with the spelling that works."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel

from engine import Elicit, InvalidSignature, MCPServer, Resolve
from tests.conftest import KEY


class Stock(BaseModel):
    title: str
    copies: int


async def check_stock(title: str) -> Stock:
    return Stock(title=title, copies=1)


def test_a_resolver_given_as_a_default_value_is_refused_with_the_annotated_spelling() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    with pytest.raises(InvalidSignature) as refused:

        @mcp.tool()
        async def reserve(title: str, stock: Stock = Resolve(check_stock)) -> str:  # type: ignore[assignment]
            return title

    message = str(refused.value)
    assert "parameter 'stock'" in message
    assert "stock: Annotated[Stock, Resolve(check_stock)]" in message
    assert mcp.tools == {}


async def price(stock: Stock = Resolve(check_stock)) -> float:  # type: ignore[assignment]
    return 1.0


async def confirm(title: str) -> Elicit[dict]:  # type: ignore[type-var]
    return Elicit(f"Order {title}?", dict)  # type: ignore[type-var]


def test_a_resolver_of_a_resolver_given_as_a_default_value_is_refused_too() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    with pytest.raises(
        InvalidSignature,
        match=r"Resolver 'price' parameter 'stock': Resolve\(...\) is given as its default",
    ):

        @mcp.tool()
        async def quote(title: str, amount: Annotated[float, Resolve(price)]) -> str:
            return title


def test_a_form_that_is_not_a_model_is_refused_at_registration() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    with pytest.raises(InvalidSignature, match=r"Elicit\[dict\]: a form is a pydantic model"):

        @mcp.tool()
        async def order(title: str, ok: Annotated[dict, Resolve(confirm)]) -> str:  # type: ignore[type-arg]
            return title
