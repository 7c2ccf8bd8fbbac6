"""Questions built from arguments cannot fill the fingerprint cache: large texts are never
cached and the total cached text is bounded; small repeated questions still hit the cache."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

from engine import Context, MCPServer
from engine.questions import rendering
from engine.questions.kinds import Elicit, ElicitURL
from engine.questions.rendering import Rendered
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    confirm: bool


async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def test_large_titles_over_a_served_replica_are_not_cached() -> None:
    mcp = MCPServer("Shelf", keys=[KEY])

    @mcp.tool()
    async def order(title: str, ctx: Context) -> str:
        """Order a book."""
        await ctx.elicit(f"Order {title}?", Confirm)
        return "asked"

    rendering._FINGERPRINTS.clear()
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=30) as http,
        Client(
            streamable_http_client(base + "/mcp", http_client=http),
            mode="legacy",
            read_timeout_seconds=30,
            elicitation_callback=decline,
        ) as client,
    ):
        for i in range(5):
            await client.call_tool("order", {"title": f"{i}" + "x" * 1_000_000})
        for _ in range(3):
            await client.call_tool("order", {"title": "Dune"})
    assert rendering.cached_chars() <= len("Order Dune?")
    assert list(rendering._FINGERPRINTS) == [(Elicit, "Order Dune?", Confirm)]


def test_the_cache_total_stays_bounded_and_small_questions_still_hit() -> None:
    rendering._FINGERPRINTS.clear()
    for i in range(200):
        Rendered.of(Elicit(f"{i}" + "x" * 3_000_000, Confirm))
        Rendered.of(ElicitURL("Open", f"https://x.test/{i}?" + "q" * 3_000_000))
    assert rendering.cached_chars() == 0
    for i in range(5000):  # distinct, each just under the per-text bound
        Rendered.of(Elicit(f"{i:05}" + "m" * (rendering.FINGERPRINT_TEXT_MAX - 5), Confirm))
    assert (
        rendering.cached_chars()
        <= rendering.FINGERPRINTS_CHARS_KEPT + rendering.FINGERPRINT_TEXT_MAX
    )
    rendering._FINGERPRINTS.clear()
    first = Rendered.of(Elicit("Order anyway?", Confirm))
    calls: list[Any] = []
    real = rendering.fingerprint
    rendering.fingerprint = lambda params: calls.append(params) or real(params)  # type: ignore[assignment]
    try:
        again = [Rendered.of(Elicit("Order anyway?", Confirm)) for _ in range(10)]
    finally:
        rendering.fingerprint = real
    assert calls == []  # served from the cache
    assert all(r.fingerprint == first.fingerprint for r in again)
