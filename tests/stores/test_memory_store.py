"""MemoryStore beyond the shared contract: expired entries do not pin memory."""

from __future__ import annotations

import pytest

from stores import MemoryStore
from tests.stores.fake_clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_expired_entries_are_swept_once_the_purge_interval_has_passed(
    clock: FakeClock,
) -> None:
    store = MemoryStore(purge_interval=60, clock=clock.now)
    await store.put_blob("c1", "b", b"x", ttl=10)
    await store.claim("c1", 1, b"fp", ttl=10)
    await store.append("c1", {"ts": 1.0}, ttl=10)
    clock.advance(30)
    await store.claim("c2", 1, b"fp", ttl=300)
    assert repr(store) == "MemoryStore(calls=1, rounds=2)"  # expired, but no sweep is due yet
    clock.advance(30)
    await store.claim("c3", 1, b"fp", ttl=300)  # a write after the interval sweeps
    assert repr(store) == "MemoryStore(calls=0, rounds=2)"
    await store.aclose()
