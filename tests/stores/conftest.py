"""Fixtures for the store tests: real backends only (a real Redis comes from the environment).

Run through ``python tests/redis_server.py -- pytest ...`` (``make pytest`` does), which exports
``ENGINE_TEST_REDIS_URL``. Without a reachable Redis the Redis tests fail, never skip: a green
run must mean the Redis store was tested.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from stores import MemoryStore, RedisStore, SQLiteStore, Store, StoreUnavailable
from tests.stores.fake_clock import Elapse, FakeClock

REDIS_URL_ENV = "ENGINE_TEST_REDIS_URL"

Replica = Callable[[], Awaitable[Store]]
"""Opens another store object on the same backend and data, as a second replica would."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis.asyncio needs asyncio


def redis_url() -> str:
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        pytest.fail(
            f"{REDIS_URL_ENV} is not set, so the Redis store cannot be tested. Run the tests "
            "through `python tests/redis_server.py -- pytest ...` (as `make pytest` does), "
            f"or export {REDIS_URL_ENV}=redis://host:port/db.",
            pytrace=False,
        )
    return url


@pytest.fixture
def redis_test_url() -> str:
    """The URL of the test Redis; fails the test when none is configured."""
    return redis_url()


@pytest.fixture
async def redis_client(redis_test_url: str) -> AsyncIterator[Redis]:
    """A plain client of the test Redis, for looking at (or tampering with) a store's keys."""
    client = Redis.from_url(redis_test_url)
    try:
        yield client
    finally:
        await client.aclose()


async def _delete_prefix(url: str, prefix: str) -> None:
    client = Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
async def redis_replicas() -> AsyncIterator[Callable[..., Awaitable[RedisStore]]]:
    """Opens RedisStores sharing one fresh random prefix; closes them and deletes the keys."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    opened: list[RedisStore] = []

    async def open_replica(**options: Any) -> RedisStore:
        url = redis_url()
        store = RedisStore(url, prefix=prefix, **options)
        try:
            await store.ping()
        except StoreUnavailable as exc:
            problem = str(exc)
        else:
            opened.append(store)
            return store
        await store.aclose()
        pytest.fail(
            f"Redis at {url} does not answer: {problem} Start redis-server, or run the tests "
            "through `python tests/redis_server.py -- pytest ...` (as `make pytest` does).",
            pytrace=False,
        )

    try:
        yield open_replica
    finally:
        for store in opened:
            await store.aclose()
        if opened:
            await _delete_prefix(redis_url(), prefix)


@pytest.fixture
def clock() -> FakeClock:
    """The time of the memory and SQLite stores of `backend`: it passes when a test says so."""
    return FakeClock()


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-serving", marks=pytest.mark.redis),
    ]
)
async def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_replicas: Callable[..., Awaitable[RedisStore]],
    clock: FakeClock,
) -> AsyncIterator[tuple[Store, Replica]]:
    """A store of each kind, and a way to open a second replica on the same data.

    ``redis-serving`` is Redis with `RedisStore.serve` running, as under a server: round
    scripts then travel over one shared connection, and must keep the same contract.
    The memory and SQLite stores run on `clock`; Redis expires keys on its own clock.
    """
    kind: str = request.param
    extra: list[Store] = []
    if kind == "memory":
        store: Store = MemoryStore(clock=clock.now)

        async def replica() -> Store:
            return store  # one process is all a memory store has

    elif kind == "sqlite":
        path = tmp_path / "engine.db"
        store = SQLiteStore(path, poll_interval=0.05, clock=clock.now)

        async def replica() -> Store:
            extra.append(SQLiteStore(path, poll_interval=0.05, clock=clock.now))
            return extra[-1]

    else:
        store = await redis_replicas()

        async def replica() -> Store:
            return await redis_replicas()

    try:
        if kind == "redis-serving":
            assert isinstance(store, RedisStore)
            async with anyio.create_task_group() as tg:
                await tg.start(store.serve)
                yield store, replica
                tg.cancel_scope.cancel()
        else:
            yield store, replica
    finally:
        for opened in (store, *extra):
            await opened.aclose()


@pytest.fixture
def store(backend: tuple[Store, Replica]) -> Store:
    return backend[0]


@pytest.fixture
def elapse(backend: tuple[Store, Replica], clock: FakeClock) -> Elapse:
    """Lets seconds of store time pass: at once on `clock`, for real on Redis."""
    if isinstance(backend[0], RedisStore):

        async def wait(seconds: float) -> None:
            await anyio.sleep(seconds)  # the Redis server expires keys on its own clock

        return wait

    async def advance(seconds: float) -> None:
        clock.advance(seconds)

    return advance
