"""A Redis health check that tells the truth: it writes, and it refuses a Redis that evicts keys.

A ``PING`` is answered by a Redis that refuses every write, so `RedisStore.ping` writes a small
key with a TTL: a Redis out of memory under ``noeviction`` and a read-only replica fail it. And a
Redis that may evict keys (any ``maxmemory-policy`` but ``noeviction``) would drop claims, so a
round would run twice: it fails the health check, and a server does not start on it, unless the
store is opened with ``allow_eviction``. Each test runs its own ``redis-server``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from engine.testing import Client
from examples.bookshop import build
from stores import RedisStore, StoreMisconfigured, StoreUnavailable
from stores.redis.health import eviction_policies
from tests.conftest import KEY
from tests.private_redis import REDIS_SERVER, PrivateRedis, free_ports

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _started(directory: Path) -> PrivateRedis:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: install it to test Redis health checks")
    directory.mkdir(parents=True, exist_ok=True)
    server = PrivateRedis(directory, free_ports(1)[0])
    await server.start()
    return server


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    server = await _started(tmp_path / "redis")
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture
async def admin(redis_server: PrivateRedis) -> AsyncIterator[Redis]:
    """What an operator types into redis-cli."""
    client = Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_redis_out_of_memory_fails_the_health_check_until_it_has_room(
    redis_server: PrivateRedis, admin: Redis
) -> None:
    store = RedisStore(redis_server.url, prefix="oom")
    try:
        await store.ping()
        await admin.set("ballast", b"x" * 3_000_000)
        await admin.config_set("maxmemory", "2mb")  # under noeviction, the default
        with pytest.raises(StoreUnavailable, match=r"health write failed \(OutOfMemoryError"):
            await store.ping()
        assert await admin.ping()  # what a PING-based check would have seen: healthy

        await admin.config_set("maxmemory", "0")
        await store.ping()
        assert 0 < await admin.pttl("oom:~health") <= 10_000  # a small key, with a TTL
    finally:
        await store.aclose()


async def test_a_read_only_replica_fails_the_health_check(
    redis_server: PrivateRedis, admin: Redis, tmp_path: Path
) -> None:
    primary = await _started(tmp_path / "primary")
    store = RedisStore(redis_server.url, prefix="replica")
    try:
        await store.ping()
        await admin.replicaof("127.0.0.1", primary.port)  # a failover demoted it, say
        with pytest.raises(StoreUnavailable, match="ReadOnlyError"):
            await store.ping()
        await admin.replicaof("NO", "ONE")
        await store.ping()
    finally:
        await store.aclose()
        await primary.kill()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl", "allkeys-random"])
async def test_a_redis_that_may_evict_keys_fails_the_health_check(
    redis_server: PrivateRedis, admin: Redis, policy: str
) -> None:
    store = RedisStore(redis_server.url, prefix="evicting")
    try:
        await admin.config_set("maxmemory-policy", policy)
        with pytest.raises(StoreMisconfigured) as refused:
            await store.ping()
        assert str(refused.value) == (
            f"Redis at {redis_server.url} may evict keys (maxmemory-policy {policy}), and an "
            "evicted claim lets a round run twice: set maxmemory-policy noeviction, or open the "
            "store with ?allow_eviction=yes to accept rounds that may run again"
        )
        await admin.config_set("maxmemory-policy", "noeviction")
        await store.ping()
    finally:
        await store.aclose()


async def test_eviction_is_accepted_when_the_store_says_so(
    redis_server: PrivateRedis, admin: Redis
) -> None:
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    stores = [
        RedisStore(f"{redis_server.url}?prefix=lossy&allow_eviction=yes"),
        RedisStore(redis_server.url, prefix="lossy", allow_eviction=True),
    ]
    try:
        for store in stores:
            await store.ping()
            async with anyio.create_task_group() as tg:
                await tg.start(store.serve)
                tg.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.aclose()


def test_an_allow_eviction_option_that_is_not_yes_or_no_is_refused() -> None:
    with pytest.raises(ValueError, match=r"give \?allow_eviction= once, as yes or no"):
        RedisStore("redis://127.0.0.1:6379/0?allow_eviction=please")


async def test_a_server_does_not_start_on_a_redis_that_may_evict_keys(
    redis_server: PrivateRedis, admin: Redis
) -> None:
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    mcp = build(keys=[KEY], store=f"{redis_server.url}?prefix=shop")
    with pytest.raises(StoreMisconfigured, match="may evict keys"):
        async with mcp.running():
            pass


async def test_a_server_whose_redis_starts_evicting_turns_unhealthy_and_back(
    redis_server: PrivateRedis, admin: Redis
) -> None:
    mcp = build(keys=[KEY], store=f"{redis_server.url}?prefix=shop")
    async with mcp.running(), Client(mcp, elicitation=lambda params: YES) as client:
        assert await mcp.core.health() == (True, {"replica": mcp.core.replica_id, "store": "ok"})
        await admin.config_set("maxmemory-policy", "allkeys-lfu")
        healthy, details = await mcp.core.health()
        assert not healthy
        assert "maxmemory-policy allkeys-lfu" in details["store"]
        await admin.config_set("maxmemory-policy", "noeviction")
        assert (await mcp.core.health())[0]
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
        assert "Backordered" in result.text


def test_the_policy_of_every_node_of_a_cluster_is_read() -> None:
    assert eviction_policies({"maxmemory_policy": "noeviction", "used_memory": 1}) == {"noeviction"}
    by_node = {
        "127.0.0.1:7000": {"maxmemory_policy": "noeviction"},
        "127.0.0.1:7001": {"maxmemory_policy": "allkeys-lru"},
    }
    assert eviction_policies(by_node) == {"noeviction", "allkeys-lru"}
    assert eviction_policies({"used_memory": 1}) == set()  # a server that does not say
