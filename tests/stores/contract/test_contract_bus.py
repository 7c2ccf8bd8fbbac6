"""The `BusStore` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

import anyio
import pytest

from stores import (
    Store,
)

pytestmark = pytest.mark.anyio


async def test_bus_delivers_messages_published_after_subscribing(store: Store) -> None:
    await store.publish("news", b"before anyone listens")
    async with store.subscribe("news") as first, store.subscribe("news") as second:
        await store.publish("other", b"elsewhere")
        for n in range(3):
            await store.publish("news", b"msg-%d" % n)
        with anyio.fail_after(5):
            assert [await anext(first) for _ in range(3)] == [b"msg-0", b"msg-1", b"msg-2"]
            assert [await anext(second) for _ in range(3)] == [b"msg-0", b"msg-1", b"msg-2"]


async def test_subscription_ends_when_the_store_closes(store: Store) -> None:
    received: list[bytes] = []
    first = anyio.Event()
    async with store.subscribe("news") as messages:

        async def consume() -> None:
            async for message in messages:
                received.append(message)
                first.set()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await store.publish("news", b"last")
                await first.wait()
                await store.aclose()  # ends the iteration, so the task group can finish
    assert received == [b"last"]
