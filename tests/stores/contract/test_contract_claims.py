"""The `ClaimStore` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from stores import (
    Claim,
    ClaimResult,
    ClaimStore,
    Store,
)
from tests.stores.contract.helpers import (
    FP,
    OTHER_FP,
    OTHER_OWNER,
    OWNER,
    PAST_SHORT_TTL,
    RESPONSE,
    SHORT_TTL,
    Replica,
)
from tests.stores.fake_clock import Elapse

pytestmark = pytest.mark.anyio


async def test_claim_state_machine(store: ClaimStore) -> None:
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)
    assert await store.claim("c1", 2, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)
    assert await store.claim("c2", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)

    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)


async def test_empty_response_is_a_response(store: ClaimStore) -> None:
    await store.claim("c1", 0, FP, ttl=30)
    await store.complete("c1", 0, FP, b"", ttl=30)
    assert await store.claim("c1", 0, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, b"")


async def test_complete_only_by_the_holder_and_first_response_wins(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, OTHER_FP, b"intruder", ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.complete("c1", 1, FP, b"first", ttl=30)
    await store.complete("c1", 1, FP, b"second", ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, b"first")


async def test_complete_after_the_claim_expired_still_records(
    store: ClaimStore, elapse: Elapse
) -> None:
    await store.claim("c1", 1, FP, ttl=SHORT_TTL, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await elapse(PAST_SHORT_TTL)
    assert not await store.renew("c1", 1, FP, OWNER, 30)  # the claim is gone
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


async def test_release_lets_a_retry_run(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.release("c1", 1, OTHER_FP)  # not ours: ignored
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_release_never_drops_a_completed_round(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


# --- owner tokens (fencing a release to the claim that was taken) ---


async def test_release_with_another_owner_keeps_the_claim(store: ClaimStore) -> None:
    # Attempt 2 took the round; attempt 1's timed-out claim must not give it back.
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, OTHER_FP, owner=OTHER_OWNER)  # right owner, wrong request
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_a_short_lease_expires_unless_its_owner_renews_it(
    store: ClaimStore, elapse: Elapse
) -> None:
    await store.claim("c1", 1, FP, ttl=SHORT_TTL, owner=OWNER)
    await store.claim("c2", 1, FP, ttl=SHORT_TTL, owner=OWNER)
    for step in range(3):  # 0.04 s apart, each renewal is in time; 0.12 s is past the TTL
        await elapse(0.04)
        assert await store.renew("c1", 1, FP, OWNER, SHORT_TTL)
        if step == 0:
            assert await store.claim("c2", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    assert await store.claim("c2", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(Claim.FRESH)


async def test_only_the_owner_of_a_live_claim_renews_it(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    assert not await store.renew("c1", 1, FP, OTHER_OWNER, 30)
    assert not await store.renew("c1", 1, OTHER_FP, OWNER, 30)
    assert not await store.renew("c9", 1, FP, OWNER, 30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert not await store.renew("c1", 1, FP, OWNER, 30)


async def test_release_with_the_right_owner_drops_the_claim(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP, owner=OWNER)  # the old owner's claim is gone: a no-op
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_release_without_owner_drops_any_claim_of_the_request(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP)  # a claim without owner, released without owner
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_only_the_claim_that_creates_the_record_sets_its_owner(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(
        Claim.IN_PROGRESS
    )
    await store.release("c1", 1, FP, owner=OTHER_OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_a_claim_without_owner_is_kept_by_a_release_with_one(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_owner_is_ignored_for_completed_rounds(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    for owner in (OWNER, OTHER_OWNER, None):
        await store.release("c1", 1, FP, owner=owner)
        assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(
            Claim.DUPLICATE, RESPONSE
        )
    # A round completed after its claim expired (no owner recorded) is kept just the same.
    await store.complete("c1", 2, FP, RESPONSE, ttl=30)
    await store.release("c1", 2, FP, owner=OWNER)
    assert await store.claim("c1", 2, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


async def test_the_owner_is_shared_with_other_replicas(backend: tuple[Store, Replica]) -> None:
    store, open_replica = backend
    other = await open_replica()
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await other.release("c1", 1, FP, owner=OTHER_OWNER)
    assert await other.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await other.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_wait_complete_ends_with_none_on_release_by_owner(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)

    async def releaser() -> None:
        await anyio.sleep(0.1)
        await store.release("c1", 1, FP, owner=OWNER)

    async with anyio.create_task_group() as tg:
        tg.start_soon(releaser)
        with anyio.fail_after(2):
            assert await store.wait_complete("c1", 1, FP, timeout=5) is None


async def test_an_empty_or_non_bytes_owner_is_refused(store: ClaimStore) -> None:
    bad: list[Any] = [b"", "text", 7]
    for owner in bad:
        with pytest.raises(ValueError, match="owner must be non-empty bytes"):
            await store.claim("c1", 1, FP, ttl=30, owner=owner)
        with pytest.raises(ValueError, match="owner must be non-empty bytes"):
            await store.release("c1", 1, FP, owner=owner)
    assert await store.claim("c1", 1, FP, ttl=30, owner=bytearray(b"ok")) == ClaimResult(
        Claim.FRESH
    )
    await store.release("c1", 1, FP, owner=bytearray(b"ok"))
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_claim_expires_after_ttl(store: ClaimStore, elapse: Elapse) -> None:
    await store.claim("c1", 1, FP, ttl=SHORT_TTL)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)
    await elapse(PAST_SHORT_TTL)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_completed_response_expires_after_its_ttl(store: ClaimStore, elapse: Elapse) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=SHORT_TTL)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)
    await elapse(PAST_SHORT_TTL)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_200_concurrent_claims_make_exactly_one_fresh(store: ClaimStore) -> None:
    results: list[Claim] = []

    async def attempt() -> None:
        results.append((await store.claim("hot", 7, FP, ttl=30)).status)

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(attempt)
    assert results.count(Claim.FRESH) == 1
    assert results.count(Claim.IN_PROGRESS) == 199


# --- waiting for a concurrent attempt ---


async def test_wait_complete_returns_the_concurrent_response(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)

    async def completer() -> None:
        await anyio.sleep(0.2)
        await store.complete("c1", 1, FP, RESPONSE, ttl=30)

    async with anyio.create_task_group() as tg:
        tg.start_soon(completer)
        started = time.monotonic()
        assert await store.wait_complete("c1", 1, FP, timeout=5) == RESPONSE
        assert time.monotonic() - started < 2


async def test_wait_complete_on_another_replica(backend: tuple[Store, Replica]) -> None:
    store, open_replica = backend
    other = await open_replica()
    assert (await store.claim("c1", 1, FP, ttl=30)).status is Claim.FRESH
    assert (await other.claim("c1", 1, FP, ttl=30)).status is Claim.IN_PROGRESS
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.complete, "c1", 1, FP, RESPONSE, 30.0)
        assert await other.wait_complete("c1", 1, FP, timeout=5) == RESPONSE
    assert await other.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


async def test_wait_complete_ends_with_none_on_release(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)

    async def releaser() -> None:
        await anyio.sleep(0.1)
        await store.release("c1", 1, FP)

    async with anyio.create_task_group() as tg:
        tg.start_soon(releaser)
        started = time.monotonic()
        assert await store.wait_complete("c1", 1, FP, timeout=5) is None
        assert time.monotonic() - started < 2


async def test_wait_complete_times_out_with_none(store: ClaimStore) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    started = time.monotonic()
    assert await store.wait_complete("c1", 1, FP, timeout=0.3) is None
    assert 0.25 < time.monotonic() - started < 1.5


async def test_wait_complete_without_a_matching_claim_returns_at_once(store: ClaimStore) -> None:
    started = time.monotonic()
    assert await store.wait_complete("nobody", 1, FP, timeout=5) is None
    await store.claim("c1", 1, OTHER_FP, ttl=30)
    assert await store.wait_complete("c1", 1, FP, timeout=5) is None
    await store.complete("c1", 1, OTHER_FP, RESPONSE, ttl=30)
    assert await store.wait_complete("c1", 1, OTHER_FP, timeout=5) == RESPONSE
    assert time.monotonic() - started < 1


async def test_bad_claim_arguments_are_refused_with_a_reason(store: ClaimStore) -> None:
    with pytest.raises(ValueError, match="call_id must be a non-empty"):
        await store.claim("", 1, FP, ttl=30)
    with pytest.raises(ValueError, match="round_no"):
        await store.claim("c1", -1, FP, ttl=30)
    for bad_round in (-1, True, "2"):
        with pytest.raises(ValueError, match="round_no"):
            await store.release("c1", bad_round, FP)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="round_no"):
            await store.renew("c1", bad_round, FP, b"owner", ttl=30)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="round_no"):
            await store.wait_complete("c1", bad_round, FP, timeout=0.01)  # type: ignore[arg-type]
    for bad_round in (-1, True, "2"):
        for op in (store.claim, store.complete):
            args = (FP, b"r") if op == store.complete else (FP,)
            with pytest.raises(ValueError, match="round_no"):
                await op("c1", bad_round, *args, ttl=30)  # type: ignore[operator]
    for bad_ttl in (0, -1.0, float("nan"), float("inf"), "30"):
        with pytest.raises(ValueError, match="ttl must be a positive"):
            await store.claim("c1", 1, FP, ttl=bad_ttl)  # type: ignore[arg-type]


async def test_numbers_of_other_numeric_types_are_accepted(store: ClaimStore) -> None:
    class Seconds(float):
        pass

    assert (await store.claim("c1", 1, FP, ttl=Seconds(30))).status is Claim.FRESH
    await store.complete("c1", 1, FP, b"done", ttl=Seconds(30))
    assert (await store.claim("c1", 1, FP, ttl=30)).response == b"done"
