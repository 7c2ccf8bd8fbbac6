"""A round's state that cannot be spilled (the store is down) never makes a client repeat a side
effect: on a real replica over a socket, with a real Redis killed, a ``once=True`` resolver runs
exactly once across round 1 and a client that follows what it is told.

The state is carried inline in the requestState when it fits the token cap; when it does not, the
client is told that the round's side effects may have run (not "nothing was recorded, retry").
"""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve
from stores import RedisStore
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import call, post, request
from tests.private_redis import REDIS_SERVER, PrivateRedis, free_ports

pytestmark = pytest.mark.anyio

ELICITATION = {"elicitation": {}}


class Pickup(BaseModel):
    name: str


def reserving_server(url: str, holds: list[str], *, pad: int, **options: Any) -> MCPServer:
    """``reserve``: a ``once=True`` hold (the side effect, counted in ``holds``) whose value is
    ``pad`` bytes, so the state after round 1 is over the spill threshold, then a question."""

    async def place_hold(title: str) -> str:
        holds.append(title)
        return f"H{len(holds)}:" + "x" * pad

    async def ask_pickup(
        hold: Annotated[str, Resolve(place_hold, once=True)],
    ) -> Elicit[Pickup]:
        return Elicit(f"Who collects hold {hold[:4]}?", Pickup)

    mcp = MCPServer(
        "Reserving",
        keys=[KEY],
        store=RedisStore(url, op_timeout=0.5, prefix="spill-outage"),
        spill_threshold=256,
        **options,
    )

    @mcp.tool()
    async def reserve(
        title: str,
        hold: Annotated[str, Resolve(place_hold, once=True)],
        pickup: Annotated[Pickup, Resolve(ask_pickup)],
    ) -> str:
        return f"{hold.split(':')[0]} ({title}) for {pickup.name}"

    return mcp


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: install it to test store outages")
    server = PrivateRedis(tmp_path, free_ports(1)[0])
    try:
        await server.start()
        yield server
    finally:
        await server.kill()


def first(title: str) -> dict[str, Any]:
    return call("reserve", {"title": title}, capabilities=ELICITATION)


def second(title: str, state: str) -> dict[str, Any]:
    params = {
        "name": "reserve",
        "arguments": {"title": title},
        "inputResponses": {"ask_pickup": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": state,
    }
    return request("tools/call", params, capabilities=ELICITATION)


async def test_a_hold_placed_while_the_store_is_down_is_placed_once(redis: PrivateRedis) -> None:
    holds: list[str] = []
    mcp = reserving_server(redis.url, holds, pad=2000)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, timeout=10) as client,
    ):
        await redis.kill()
        answered = await post(client, first("Dune"))
        await redis.start()
        while answered.status_code == 503:  # what a client does when told "Retry"
            assert "Retry" in answered.json()["error"]["message"]
            answered = await post(client, first("Dune"))
        assert answered.status_code == 200, answered.text
        result = answered.json()["result"]
        assert result["resultType"] == "input_required", result
        done = await post(client, second("Dune", result["requestState"]))
        assert done.status_code == 200, done.text
        assert done.json()["result"]["content"][0]["text"] == "H1 (Dune) for Ada"
    assert holds == ["Dune"], f"the hold was placed {len(holds)} times"


async def test_a_state_too_large_to_carry_says_the_side_effects_may_have_run(
    redis: PrivateRedis,
) -> None:
    holds: list[str] = []
    mcp = reserving_server(redis.url, holds, pad=6000, max_token_chars=4096)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, timeout=10) as client,
    ):
        await redis.kill()
        answered = await post(client, first("Dune"))
        await redis.start()
    assert answered.status_code == 200, answered.text
    result = answered.json()["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert "may have run" in text and "nothing was recorded" not in text, text
    assert holds == ["Dune"]
