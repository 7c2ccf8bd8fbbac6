"""The in-process bus (memory and SQLite stores): slow subscribers lose old messages."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from stores import MemoryStore

pytestmark = pytest.mark.anyio


async def test_a_slow_subscriber_drops_the_oldest_and_never_blocks_publishers() -> None:
    store = MemoryStore(bus_buffer=3)
    async with store.subscribe("t") as slow, store.subscribe("t") as other:
        with anyio.fail_after(1):  # publishing must not wait for anyone
            for n in range(10):
                await store.publish("t", b"%d" % n)
        assert [await anext(slow) for _ in range(3)] == [b"7", b"8", b"9"]
        assert [await anext(other) for _ in range(3)] == [b"7", b"8", b"9"]
    await store.aclose()


async def test_a_waiting_subscriber_gets_every_message() -> None:
    store = MemoryStore(bus_buffer=1)
    received: list[bytes] = []
    async with store.subscribe("t") as messages, anyio.create_task_group() as tg:

        async def consume() -> None:
            async for message in messages:
                received.append(message)
                if len(received) == 50:
                    return

        tg.start_soon(consume)
        for n in range(50):
            await store.publish("t", b"%d" % n)
            await anyio.lowlevel.checkpoint()
    assert received == [b"%d" % n for n in range(50)]
    await store.aclose()


async def test_unsubscribing_leaves_nothing_behind() -> None:
    store = MemoryStore()
    async with store.subscribe("t"):
        pass
    assert store._bus._topics == {}
    await store.claim("c", 1, b"fp", ttl=30)
    assert await store.wait_complete("c", 1, b"fp", timeout=0.05) is None
    assert store._waiters._events == {}
    await store.aclose()


async def test_subscribing_to_a_closed_store_is_refused() -> None:
    store = MemoryStore()
    await store.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        async with store.subscribe("t"):
            pass


def test_a_bus_needs_room_for_one_message() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MemoryStore(bus_buffer=0)
