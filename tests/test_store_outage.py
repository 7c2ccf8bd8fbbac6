"""A Redis outage: calls fail fast with a clear error, recover by themselves, and no call's body
runs twice (AOF keeps acknowledged results across the restart)."""

import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine import MCPServer
from engine.testing import Client, ProtocolError
from examples.bookshop import build
from stores import ClaimResult, MemoryStore, RedisStore, StoreUnavailable
from tests.conftest import KEY
from tests.http_helpers import (
    REPLICA,
    asgi_client,
    assert_error,
    assert_result,
    first_round,
    post,
    retry,
    text_of,
)
from tests.private_redis import REDIS_SERVER, PrivateRedis, free_ports

pytestmark = pytest.mark.anyio

YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
async def durable_redis(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: install it to test store outages")
    server = PrivateRedis(
        tmp_path, free_ports(1)[0], "--appendonly", "yes", "--appendfsync", "always"
    )
    try:
        await server.start()
        yield server
    finally:
        await server.kill()


def shop(url: str, bodies: Counter[str]) -> MCPServer:
    mcp = build(keys=[KEY], store=RedisStore(url, op_timeout=0.5, prefix="outage"))
    original = mcp.tools["order_book"].signature.fn

    async def counted(**kwargs: Any) -> str:
        bodies[kwargs["title"]] += 1
        return await original(**kwargs)

    mcp.tools["order_book"].signature.fn = counted
    return mcp


def second_round(title: str, state: str) -> dict[str, Any]:
    return {
        "name": "order_book",
        "arguments": {"title": title},
        "inputResponses": {"confirm_backorder": YES},
        "requestState": state,
    }


async def test_an_outage_fails_fast_and_clearly_then_recovers(durable_redis: PrivateRedis) -> None:
    bodies: Counter[str] = Counter()
    a, b = shop(durable_redis.url, bodies), shop(durable_redis.url, bodies)
    async with Client(a, b, elicitation=lambda p: YES) as client:
        first = await client.send(
            "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        )
        await durable_redis.kill()
        started = time.monotonic()
        with pytest.raises(ProtocolError) as caught:
            await client.send("tools/call", second_round("Neuromancer", first["requestState"]))
        assert time.monotonic() - started < 2.5
        assert caught.value.code == -32603
        assert "store is unavailable" in caught.value.message
        assert "Retry" in caught.value.message
        await durable_redis.start()
        done = await client.send("tools/call", second_round("Neuromancer", first["requestState"]))
        await durable_redis.kill()
        await durable_redis.start()
        again = await client.send("tools/call", second_round("Neuromancer", first["requestState"]))
    assert done["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert again == done
    assert bodies["Neuromancer"] == 1


async def test_a_restart_during_load_loses_nothing_and_runs_no_body_twice(
    durable_redis: PrivateRedis,
) -> None:
    bodies: Counter[str] = Counter()
    a, b = shop(durable_redis.url, bodies), shop(durable_redis.url, bodies)
    results: dict[str, dict[str, Any]] = {}
    errors: list[int] = []

    async def one_call(client: Client, title: str) -> None:
        state = None
        with anyio.fail_after(30):
            while True:
                try:
                    if state is None:
                        first = await client.send(
                            "tools/call", {"name": "order_book", "arguments": {"title": title}}
                        )
                        state = first["requestState"]
                    final = await client.send("tools/call", second_round(title, state))
                except ProtocolError as exc:
                    errors.append(exc.code)
                    await anyio.sleep(0.1)
                    continue
                if final["resultType"] == "complete":
                    results[title] = final
                    return
                await anyio.sleep(0.05)

    async with Client(a, b, elicitation=lambda p: YES) as client, anyio.create_task_group() as tg:
        for n in range(40):
            tg.start_soon(one_call, client, f"Book {n}")
        await anyio.sleep(0.05)
        await durable_redis.kill()
        await anyio.sleep(0.5)
        await durable_redis.start()
    assert len(results) == 40
    assert all(count == 1 for count in bodies.values()), bodies
    assert set(errors) <= {-32603}


class StoreThatGoesDown(MemoryStore):
    down = False

    async def claim(self, *args: Any, **kwargs: Any) -> ClaimResult:
        if self.down:
            raise StoreUnavailable("claim: connection refused")
        return await super().claim(*args, **kwargs)


async def test_a_store_outage_is_a_503_that_says_retry_and_the_retry_works() -> None:
    store = StoreThatGoesDown()
    app = build(keys=[KEY], replica_id=REPLICA, store=store).streamable_http_app()
    async with asgi_client(app) as shop:
        state = (await first_round(shop))["requestState"]
        store.down = True
        error = assert_error(await post(shop, retry(state)), 503, -32603)
        store.down = False
        result = assert_result(await post(shop, retry(state)))
    assert error["message"].startswith("The call store is unavailable; nothing was recorded")
    assert text_of(result) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
