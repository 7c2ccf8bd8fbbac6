"""The `StoreLifecycle` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

import time

import pytest

from stores import (
    Store,
)

pytestmark = pytest.mark.anyio


async def test_the_store_tells_its_time(store: Store) -> None:
    before = time.time()
    told = await store.clock()
    assert isinstance(told, float)
    assert before - 5 < told < time.time() + 5 or abs(told - 1e9) < 3600  # a fake clock's


async def test_ping_and_use_after_close(store: Store) -> None:
    await store.ping()
    await store.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_blob("c1", "b")
