"""A shop whose tool logs as it works: served by ``python -m engine serve`` in the log tests.

The principal is the ``X-User`` header (a stand-in for a verified token); ``fail`` raises with
its argument in the exception's message, which a JSON line must not carry.
"""

from __future__ import annotations

import logging
from typing import Annotated

from pydantic import BaseModel

from engine import Elicit, MCPServer, RequestScope, Resolve

log = logging.getLogger("shop")


def user(scope: RequestScope) -> str | None:
    return (scope.headers or {}).get("x-user")


mcp = MCPServer("Logging shop", principal=user)


class Confirm(BaseModel):
    confirm: bool


async def confirmed(title: str) -> Confirm | Elicit[Confirm]:
    log.info("asking whether to order")
    return Elicit("Order it?", Confirm)


@mcp.tool()
async def order_book(title: str, answer: Annotated[Confirm, Resolve(confirmed)]) -> str:
    log.info("order placed" if answer.confirm else "order declined")
    return f"Ordered {title}." if answer.confirm else "No order."


@mcp.tool()
async def fail(title: str) -> str:
    raise RuntimeError(f"cannot order {title}")
