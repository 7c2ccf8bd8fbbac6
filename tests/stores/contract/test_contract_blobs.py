"""The `BlobStore` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

import pytest

from stores import (
    BlobStore,
)
from tests.stores.contract.helpers import (
    PAST_SHORT_TTL,
    SHORT_TTL,
)
from tests.stores.fake_clock import Elapse

pytestmark = pytest.mark.anyio


async def test_blob_round_trip_and_overwrite(store: BlobStore) -> None:
    assert await store.get_blob("c1", "state") is None
    await store.put_blob("c1", "state", b"\x00\x01 first", ttl=30)
    await store.put_blob("c1", "other", b"other", ttl=30)
    assert await store.get_blob("c1", "state") == b"\x00\x01 first"
    await store.put_blob("c1", "state", b"second", ttl=30)
    assert await store.get_blob("c1", "state") == b"second"
    assert await store.get_blob("c2", "state") is None


async def test_blob_expires_after_ttl(store: BlobStore, elapse: Elapse) -> None:
    await store.put_blob("c1", "state", b"short-lived", ttl=SHORT_TTL)
    assert await store.get_blob("c1", "state") == b"short-lived"
    await elapse(PAST_SHORT_TTL)
    assert await store.get_blob("c1", "state") is None


async def test_large_blob(store: BlobStore) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    await store.put_blob("c1", "big", data, ttl=30)
    assert await store.get_blob("c1", "big") == data


async def test_bad_blob_arguments_are_refused_with_a_reason(store: BlobStore) -> None:
    with pytest.raises(ValueError, match="ttl must be a positive"):
        await store.put_blob("c1", "b", b"x", ttl=0)
