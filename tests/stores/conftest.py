"""Fixtures for the store tests: real backends only (a real Redis comes from the environment).

Run through ``python tests/redis_server.py -- pytest ...`` (``make pytest`` does), which exports
``ENGINE_TEST_REDIS_URL``. Without a reachable Redis the Redis tests fail, never skip: a green
run must mean the Redis store was tested.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from stores import MemoryStore, RedisStore, SQLiteStore, Store, StoreUnavailable
from tests.stores.contract.helpers import Replica
from tests.stores.fake_clock import Elapse, FakeClock

REDIS_URL_ENV = "ENGINE_TEST_REDIS_URL"


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


@dataclass(frozen=True)
class Where:
    """What a backend may open its stores with: a fresh directory, the fake clock, and Redis
    stores on a fresh prefix (which fail the test when there is no Redis)."""

    tmp_path: Path
    clock: FakeClock
    redis: Callable[..., Awaitable[RedisStore]]


Opened = AbstractAsyncContextManager[tuple[Store, Replica]]


@dataclass(frozen=True)
class Backend:
    """A backend the contract tests run on: how to open a store and a second replica on its data
    (closed when the context ends), and whether its stores expire on the fake clock."""

    open: Callable[[Where], Opened]
    fake_clock: bool = True
    """False: the backend expires entries on a clock of its own (Redis), so a test waits."""
    marks: tuple[pytest.MarkDecorator, ...] = ()


@asynccontextmanager
async def _memory(where: Where) -> AsyncIterator[tuple[Store, Replica]]:
    store = MemoryStore(clock=where.clock.now)

    async def replica() -> Store:
        return store  # one process is all a memory store has

    try:
        yield store, replica
    finally:
        await store.aclose()


@asynccontextmanager
async def _sqlite(where: Where) -> AsyncIterator[tuple[Store, Replica]]:
    path = where.tmp_path / "engine.db"
    opened = [SQLiteStore(path, poll_interval=0.05, clock=where.clock.now)]

    async def replica() -> Store:
        opened.append(SQLiteStore(path, poll_interval=0.05, clock=where.clock.now))
        return opened[-1]

    try:
        yield opened[0], replica
    finally:
        for store in opened:
            await store.aclose()


@asynccontextmanager
async def _redis(where: Where) -> AsyncIterator[tuple[Store, Replica]]:
    async def replica() -> Store:
        return await where.redis()

    yield await where.redis(), replica  # the `redis_replicas` fixture closes them


@asynccontextmanager
async def _redis_serving(where: Where) -> AsyncIterator[tuple[Store, Replica]]:
    """Redis with `RedisStore.serve` running, as under a server: round scripts then travel over
    one shared connection, and must keep the same contract."""
    async with _redis(where) as (store, replica):
        assert isinstance(store, RedisStore)
        async with anyio.create_task_group() as tg:
            await tg.start(store.serve)
            yield store, replica
            tg.cancel_scope.cancel()


BACKENDS = {
    "memory": Backend(_memory),
    "sqlite": Backend(_sqlite),
    "redis": Backend(_redis, fake_clock=False, marks=(pytest.mark.redis,)),
    "redis-serving": Backend(_redis_serving, fake_clock=False, marks=(pytest.mark.redis,)),
}
"""Every backend the contract tests (tests/stores/contract/) run on; a new one is named here."""


@pytest.fixture(params=[pytest.param(name, marks=b.marks) for name, b in BACKENDS.items()])
async def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_replicas: Callable[..., Awaitable[RedisStore]],
    clock: FakeClock,
) -> AsyncIterator[tuple[Store, Replica]]:
    """A store of each backend, and a way to open a second replica on the same data."""
    where = Where(tmp_path, clock, redis_replicas)
    async with BACKENDS[request.param].open(where) as opened:
        yield opened


@pytest.fixture
def store(backend: tuple[Store, Replica]) -> Store:
    return backend[0]


@pytest.fixture
def elapse(request: pytest.FixtureRequest, clock: FakeClock) -> Elapse:
    """Lets seconds of store time pass: at once on `clock`, for real on a backend with a clock
    of its own."""
    name = request.node.callspec.params["backend"]
    if not BACKENDS[name].fake_clock:

        async def wait(seconds: float) -> None:
            await anyio.sleep(seconds)  # the Redis server expires keys on its own clock

        return wait

    async def advance(seconds: float) -> None:
        clock.advance(seconds)

    return advance
