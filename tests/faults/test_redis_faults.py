"""Redis that cannot keep its promises, on real processes: out of memory, or evicting keys.

A served bookshop on a ``redis-server`` of the test's own, clients calling it all along:

- ``CONFIG SET maxmemory`` to half what Redis holds, under ``noeviction``: Redis refuses every write, while a ``PING``
  still answers. ``/healthz`` is 503 until Redis has room again, then 200; every acknowledged
  call missing from the journal is counted in ``engine_journal_events_dropped_total``.
- ``maxmemory-policy allkeys-lru``: an evicted claim would let a round run twice. The server
  refuses to start, in one line, unless the store URL says ``?allow_eviction=yes``; a running
  server whose Redis starts evicting turns 503, and 200 once it stops.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from stores import RedisStore
from tests.cli.test_cli import environment
from tests.conftest import KEY
from tests.faults.store_harness import Load, journaled_completions, served
from tests.fleet_helpers import ROOT
from tests.private_redis import REDIS_SERVER, PrivateRedis, free_ports

pytestmark = pytest.mark.anyio


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    """A redis-server of this test's own (never the machine's 127.0.0.1:6379)."""
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server")
    server = PrivateRedis(tmp_path, free_ports(1)[0])
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture
async def admin(redis_server: PrivateRedis) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_redis_out_of_memory_turns_health_503_and_its_dropped_events_are_counted(
    redis_server: PrivateRedis, admin: Redis, tmp_path: Path
) -> None:
    url = f"{redis_server.url}?prefix=oom"
    with served(url, tmp_path / "server.log") as server:
        load = Load(server.base)
        async with load.running():
            await anyio.sleep(1)
            used = int((await admin.info("memory"))["used_memory"])
            await admin.config_set("maxmemory", str(used // 2))  # expiring keys cannot make room
            took = await anyio.to_thread.run_sync(server.wait_health, 503, 60)
            assert await admin.ping()  # what a PING-based health check saw: all well
            for _ in range(10):
                status, said = await anyio.to_thread.run_sync(server.health)
                assert status == 503 and "OutOfMemoryError" in said, said
                await anyio.sleep(0.5)
            stuck = len(load.acknowledged)
            await anyio.sleep(1)
            assert len(load.acknowledged) == stuck  # no call completes meanwhile

            await admin.config_set("maxmemory", "0")
            back = await anyio.to_thread.run_sync(server.wait_health, 200, 10)
            await anyio.sleep(2)
            assert len(load.acknowledged) > stuck  # served again
        await anyio.sleep(1)  # the journal writers send what they hold
        dropped = server.metric("engine_journal_events_dropped_total")
    store = RedisStore(url)
    try:
        journaled = await journaled_completions(store, load.acknowledged)
    finally:
        await store.aclose()
    missing = len(load.acknowledged) - len(journaled)
    print(
        f"maxmemory {used // 2} B: 503 after {took:.1f} s, 200 {back:.1f} s after room; "
        f"{len(load.acknowledged)} acknowledged, {missing} not journaled, {dropped:.0f} dropped"
    )
    assert dropped > 0
    assert missing <= dropped


def serve_on(url: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine serve`` of the bookshop on ``url``, while it does not start."""
    argv = ["serve", "examples/bookshop_server.py", "--port", str(free_ports(1)[0])]
    return subprocess.run(
        [sys.executable, "-m", "engine", *argv, "--store", url],
        cwd=ROOT,
        env=environment(ENGINE_KEYS=f"k1={KEY}"),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_redis_that_may_evict_keys_is_refused_at_start_in_one_line(
    redis_server: PrivateRedis, admin: Redis, tmp_path: Path
) -> None:
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    refused = await anyio.to_thread.run_sync(serve_on, f"{redis_server.url}?prefix=lru")
    assert refused.returncode == 78, refused
    assert refused.stderr.splitlines() == [
        f"error: Redis at {redis_server.url} may evict keys (maxmemory-policy allkeys-lru), and "
        "an evicted claim lets a round run twice: set maxmemory-policy noeviction, or open the "
        "store with ?allow_eviction=yes to accept rounds that may run again"
    ]

    allowed = f"{redis_server.url}?prefix=lru&allow_eviction=yes"
    with served(allowed, tmp_path / "allowed.log") as server:
        assert server.health()[0] == 200


async def test_a_running_server_whose_redis_starts_evicting_turns_503_until_it_stops(
    redis_server: PrivateRedis, admin: Redis, tmp_path: Path
) -> None:
    with served(f"{redis_server.url}?prefix=lru", tmp_path / "server.log") as server:
        await admin.config_set("maxmemory-policy", "allkeys-lru")
        status, said = server.health()
        assert status == 503 and "may evict keys (maxmemory-policy allkeys-lru)" in said
        await admin.config_set("maxmemory-policy", "noeviction")
        assert server.health()[0] == 200
