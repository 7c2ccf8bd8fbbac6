"""The `Store` contract, run against every implementation on its real backend."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from stores import CallSummary, Claim, ClaimResult, Store, TaskRow
from tests.stores.fake_clock import Elapse

pytestmark = pytest.mark.anyio

FP = b"\x00fingerprint-a\xff"
OTHER_FP = b"fingerprint-b"
RESPONSE = b'{"result": 1}\x00\xff binary-safe'
OWNER = b"\x00attempt-1\xff"
OTHER_OWNER = b"attempt-2"

Replica = Callable[[], Awaitable[Store]]

SHORT_TTL = 0.1
"""The TTL of what a test lets expire: Redis must answer the checks made while it lives."""
PAST_SHORT_TTL = 0.13
"""What `elapse` lets pass for it to be gone: on Redis a real wait, only a little longer than the
TTL, as any delay after it only makes the entry older."""


# --- blobs ---


async def test_blob_round_trip_and_overwrite(store: Store) -> None:
    assert await store.get_blob("c1", "state") is None
    await store.put_blob("c1", "state", b"\x00\x01 first", ttl=30)
    await store.put_blob("c1", "other", b"other", ttl=30)
    assert await store.get_blob("c1", "state") == b"\x00\x01 first"
    await store.put_blob("c1", "state", b"second", ttl=30)
    assert await store.get_blob("c1", "state") == b"second"
    assert await store.get_blob("c2", "state") is None


async def test_blob_expires_after_ttl(store: Store, elapse: Elapse) -> None:
    await store.put_blob("c1", "state", b"short-lived", ttl=SHORT_TTL)
    assert await store.get_blob("c1", "state") == b"short-lived"
    await elapse(PAST_SHORT_TTL)
    assert await store.get_blob("c1", "state") is None


async def test_large_blob(store: Store) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    await store.put_blob("c1", "big", data, ttl=30)
    assert await store.get_blob("c1", "big") == data


# --- claims ---


async def test_claim_state_machine(store: Store) -> None:
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)
    assert await store.claim("c1", 2, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)
    assert await store.claim("c2", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)

    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)


async def test_empty_response_is_a_response(store: Store) -> None:
    await store.claim("c1", 0, FP, ttl=30)
    await store.complete("c1", 0, FP, b"", ttl=30)
    assert await store.claim("c1", 0, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, b"")


async def test_complete_only_by_the_holder_and_first_response_wins(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, OTHER_FP, b"intruder", ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.complete("c1", 1, FP, b"first", ttl=30)
    await store.complete("c1", 1, FP, b"second", ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, b"first")


async def test_complete_after_the_claim_expired_still_records(store: Store, elapse: Elapse) -> None:
    await store.claim("c1", 1, FP, ttl=SHORT_TTL, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await elapse(PAST_SHORT_TTL)
    assert not await store.renew("c1", 1, FP, OWNER, 30)  # the claim is gone
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


async def test_release_lets_a_retry_run(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.release("c1", 1, OTHER_FP)  # not ours: ignored
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_release_never_drops_a_completed_round(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)


# --- owner tokens (fencing a release to the claim that was taken) ---


async def test_release_with_another_owner_keeps_the_claim(store: Store) -> None:
    # Attempt 2 took the round; attempt 1's timed-out claim must not give it back.
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, OTHER_FP, owner=OTHER_OWNER)  # right owner, wrong request
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_a_short_lease_expires_unless_its_owner_renews_it(
    store: Store, elapse: Elapse
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


async def test_only_the_owner_of_a_live_claim_renews_it(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    assert not await store.renew("c1", 1, FP, OTHER_OWNER, 30)
    assert not await store.renew("c1", 1, OTHER_FP, OWNER, 30)
    assert not await store.renew("c9", 1, FP, OWNER, 30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=30)
    assert not await store.renew("c1", 1, FP, OWNER, 30)


async def test_release_with_the_right_owner_drops_the_claim(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP, owner=OWNER)  # the old owner's claim is gone: a no-op
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_release_without_owner_drops_any_claim_of_the_request(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    await store.release("c1", 1, FP)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)
    await store.release("c1", 1, FP)  # a claim without owner, released without owner
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_only_the_claim_that_creates_the_record_sets_its_owner(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30, owner=OTHER_OWNER) == ClaimResult(
        Claim.IN_PROGRESS
    )
    await store.release("c1", 1, FP, owner=OTHER_OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_a_claim_without_owner_is_kept_by_a_release_with_one(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.release("c1", 1, FP, owner=OWNER)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.IN_PROGRESS)


async def test_owner_is_ignored_for_completed_rounds(store: Store) -> None:
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


async def test_wait_complete_ends_with_none_on_release_by_owner(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30, owner=OWNER)

    async def releaser() -> None:
        await anyio.sleep(0.1)
        await store.release("c1", 1, FP, owner=OWNER)

    async with anyio.create_task_group() as tg:
        tg.start_soon(releaser)
        with anyio.fail_after(2):
            assert await store.wait_complete("c1", 1, FP, timeout=5) is None


async def test_an_empty_or_non_bytes_owner_is_refused(store: Store) -> None:
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


async def test_claim_expires_after_ttl(store: Store, elapse: Elapse) -> None:
    await store.claim("c1", 1, FP, ttl=SHORT_TTL)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.CONFLICT)
    await elapse(PAST_SHORT_TTL)
    assert await store.claim("c1", 1, OTHER_FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_completed_response_expires_after_its_ttl(store: Store, elapse: Elapse) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    await store.complete("c1", 1, FP, RESPONSE, ttl=SHORT_TTL)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.DUPLICATE, RESPONSE)
    await elapse(PAST_SHORT_TTL)
    assert await store.claim("c1", 1, FP, ttl=30) == ClaimResult(Claim.FRESH)


async def test_200_concurrent_claims_make_exactly_one_fresh(store: Store) -> None:
    results: list[Claim] = []

    async def attempt() -> None:
        results.append((await store.claim("hot", 7, FP, ttl=30)).status)

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(attempt)
    assert results.count(Claim.FRESH) == 1
    assert results.count(Claim.IN_PROGRESS) == 199


# --- waiting for a concurrent attempt ---


async def test_wait_complete_returns_the_concurrent_response(store: Store) -> None:
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


async def test_wait_complete_ends_with_none_on_release(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)

    async def releaser() -> None:
        await anyio.sleep(0.1)
        await store.release("c1", 1, FP)

    async with anyio.create_task_group() as tg:
        tg.start_soon(releaser)
        started = time.monotonic()
        assert await store.wait_complete("c1", 1, FP, timeout=5) is None
        assert time.monotonic() - started < 2


async def test_wait_complete_times_out_with_none(store: Store) -> None:
    await store.claim("c1", 1, FP, ttl=30)
    started = time.monotonic()
    assert await store.wait_complete("c1", 1, FP, timeout=0.3) is None
    assert 0.25 < time.monotonic() - started < 1.5


async def test_wait_complete_without_a_matching_claim_returns_at_once(store: Store) -> None:
    started = time.monotonic()
    assert await store.wait_complete("nobody", 1, FP, timeout=5) is None
    await store.claim("c1", 1, OTHER_FP, ttl=30)
    assert await store.wait_complete("c1", 1, FP, timeout=5) is None
    await store.complete("c1", 1, OTHER_FP, RESPONSE, ttl=30)
    assert await store.wait_complete("c1", 1, OTHER_FP, timeout=5) == RESPONSE
    assert time.monotonic() - started < 1


# --- journal ---


async def test_journal_keeps_append_order_and_content(store: Store) -> None:
    events: list[dict[str, Any]] = [
        {"ts": 1000.0 + i, "kind": "step", "n": i, "blob": bytes([i]), "nested": {"a": [i, None]}}
        for i in range(25)
    ]
    for event in events:
        await store.append("c1", event, ttl=30)
    assert await store.events("c1") == events
    assert await store.events("unknown") == []


async def test_a_batch_with_an_event_that_cannot_be_encoded_writes_nothing(store: Store) -> None:
    batch: list[tuple[str, dict[str, Any]]] = [
        ("c1", {"ts": 1.0, "n": 1}),
        ("c2", {"ts": 2.0, "n": object()}),
    ]
    with pytest.raises(TypeError, match="msgpack"):
        await store.append_many(batch, ttl=30)
    assert await store.events("c1") == []
    assert await store.calls() == []


async def test_append_many_writes_each_event_to_its_call_in_order(store: Store) -> None:
    now = time.time()
    items: list[tuple[str, dict[str, Any]]] = [
        (f"c{i % 3}", {"ts": now + i, "target": f"tool{i % 3}", "kind": "round", "n": i})
        for i in range(12)
    ]
    await store.append_many(items, ttl=30)
    await store.append_many([], ttl=30)
    for c in range(3):
        assert [e["n"] for e in await store.events(f"c{c}")] == list(range(c, 12, 3))
    listed = await store.calls()
    assert [s.call_id for s in listed] == ["c2", "c1", "c0"]
    assert {s.call_id: s.events for s in listed} == {"c0": 4, "c1": 4, "c2": 4}
    assert [s.call_id for s in await store.calls(target="tool1")] == ["c1"]


async def test_journal_stores_events_as_given(store: Store) -> None:
    await store.append("c1", {"no": "index keys"}, ttl=30)
    await store.append("c1", {"ts": "not a number", "target": 3}, ttl=30)
    assert await store.events("c1") == [{"no": "index keys"}, {"ts": "not a number", "target": 3}]
    [summary] = await store.calls()
    assert summary.events == 2 and summary.target is None


async def test_listing_newest_first_with_summary(store: Store) -> None:
    await store.append("old", {"ts": 100.0, "target": "search", "kind": "start"}, ttl=30)
    await store.append("mid", {"ts": 200.0, "target": "fetch", "kind": "start"}, ttl=30)
    await store.append("new", {"ts": 300.0, "target": "search", "kind": "start"}, ttl=30)
    await store.append("old", {"ts": 400.0, "kind": "done", "target": "ignored"}, ttl=30)
    await store.append("old", {"ts": 410.0, "note": "no kind"}, ttl=30)

    assert await store.calls() == [
        CallSummary("old", "search", 100.0, 410.0, 3, last_kind="done"),
        CallSummary("new", "search", 300.0, 300.0, 1, last_kind="start"),
        CallSummary("mid", "fetch", 200.0, 200.0, 1, last_kind="start"),
    ]
    assert [c.call_id for c in await store.calls(limit=2)] == ["old", "new"]
    assert [c.call_id for c in await store.calls(target="search")] == ["old", "new"]
    assert [c.call_id for c in await store.calls(target="search", limit=1)] == ["old"]
    assert [c.call_id for c in await store.calls(target="nothing")] == []
    assert [c.call_id for c in await store.calls(since=250.0)] == ["old", "new"]
    assert [c.call_id for c in await store.calls(since=300.0, target="fetch")] == []


async def test_listing_pages_by_the_last_time_of_the_page_before(store: Store) -> None:
    for i in range(7):
        target = "odd" if i % 2 else "even"
        await store.append(f"call-{i}", {"ts": 100.0 + i, "target": target}, ttl=30)
    first = await store.calls(limit=3)
    assert [c.call_id for c in first] == ["call-6", "call-5", "call-4"]
    second = await store.calls(limit=3, before=first[-1].last_ts)
    assert [c.call_id for c in second] == ["call-3", "call-2", "call-1"]
    last = await store.calls(limit=3, before=second[-1].last_ts)
    assert [c.call_id for c in last] == ["call-0"]
    assert [c.call_id for c in await store.calls(target="odd", before=105.0)] == [
        "call-3",
        "call-1",
    ]
    assert [c.call_id for c in await store.calls(since=102.0, before=104.5)] == [
        "call-4",
        "call-3",
        "call-2",
    ]


async def test_listing_keeps_the_earliest_and_latest_times_of_events_out_of_order(
    store: Store,
) -> None:
    await store.append("c1", {"ts": 200.0, "target": "search"}, ttl=30)
    await store.append("c1", {"ts": 100.0, "kind": "late"}, ttl=30)
    await store.append_many([("c1", {"ts": 150.0}), ("c2", {"ts": 120.0})], ttl=30)
    assert await store.calls() == [
        CallSummary("c1", "search", 100.0, 200.0, 3, last_kind="late"),
        CallSummary("c2", None, 120.0, 120.0, 1, last_kind=None),
    ]


async def test_the_last_kind_is_the_latest_rounds_even_when_appended_first(store: Store) -> None:
    # A replica that held its round a while appends it after another's later round.
    await store.append("c1", {"ts": 200.0, "kind": "complete"}, ttl=30)
    await store.append("c1", {"ts": 100.0, "kind": "input_required"}, ttl=30)
    [summary] = await store.calls()
    assert summary.last_kind == "complete"
    await store.append("c1", {"ts": 200.0, "kind": "error"}, ttl=30)
    [summary] = await store.calls()
    assert summary.last_kind == "error"


async def test_listing_keeps_every_digit_of_the_times(store: Store) -> None:
    ts = 1764512345.1234567
    await store.append_many([("c1", {"ts": ts}), ("c1", {"ts": ts + 0.000_001})], ttl=30)
    await store.append("c2", {"ts": ts - 0.000_001}, ttl=30)
    assert [(c.first_ts, c.last_ts) for c in await store.calls()] == [
        (ts, ts + 0.000_001),
        (ts - 0.000_001, ts - 0.000_001),
    ]


async def test_listing_pages_past_the_limit(store: Store) -> None:
    for i in range(40):
        target = "rare" if i % 10 == 0 else "common"
        await store.append(f"call-{i:02}", {"ts": float(i), "target": target}, ttl=30)
    rare = await store.calls(target="rare", limit=3)
    assert [c.call_id for c in rare] == ["call-30", "call-20", "call-10"]
    everything = await store.calls(limit=100)
    assert len(everything) == 40 and everything[0].call_id == "call-39"


async def test_event_without_ts_counts_as_now(store: Store) -> None:
    before = time.time()
    await store.append("c1", {"kind": "start"}, ttl=30)
    [summary] = await store.calls(since=before - 1)
    assert before - 1 <= summary.first_ts <= time.time() + 1


async def test_journal_expires_after_ttl(store: Store, elapse: Elapse) -> None:
    await store.append("gone", {"ts": 1.0}, ttl=SHORT_TTL)
    await store.append("kept", {"ts": 2.0}, ttl=30)
    assert await store.events("gone") == [{"ts": 1.0}]
    assert [c.call_id for c in await store.calls()] == ["kept", "gone"]
    await elapse(PAST_SHORT_TTL)
    assert await store.events("gone") == []
    assert [c.call_id for c in await store.calls()] == ["kept"]
    await store.append("gone", {"ts": 3.0, "target": "again"}, ttl=30)  # starts afresh
    assert await store.events("gone") == [{"ts": 3.0, "target": "again"}]
    assert (await store.calls())[0] == CallSummary("gone", "again", 3.0, 3.0, 1)


async def test_an_expired_call_written_again_keeps_nothing_of_its_old_events(
    store: Store, elapse: Elapse
) -> None:
    old = [("c1", {"ts": 1.0, "target": "old", "kind": "start"}), ("c1", {"ts": 9.0, "kind": "x"})]
    await store.append_many(old, ttl=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    await store.append("c1", {"ts": 5.0}, ttl=30)
    assert await store.events("c1") == [{"ts": 5.0}]
    assert await store.calls() == [CallSummary("c1", None, 5.0, 5.0, 1)]
    assert await store.calls(target="old") == []
    await store.append("c1", {"ts": 6.0, "target": "new"}, ttl=30)
    assert await store.calls(target="new") == [CallSummary("c1", "new", 5.0, 6.0, 2)]


async def test_a_short_listing_of_many_calls_is_the_head_of_the_whole(
    store: Store, elapse: Elapse
) -> None:
    """Calls over a few targets (and none), several events each in no order of time, some
    expired: a listing, however short, is the start of what sorting all the live calls gives."""
    gone = [(f"gone-{i}", {"ts": 500.0 + 100 * i, "target": "t1"}) for i in range(10)]
    await store.append_many(gone, ttl=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    rng = random.Random(5)
    expected: dict[str, CallSummary] = {}
    items: list[tuple[str, dict[str, Any]]] = []
    for _ in range(300):
        call_id = f"call-{rng.randrange(80):02}"
        ts, target, kind = rng.uniform(0, 2000), rng.choice(["t1", "t2", "t3", None]), None
        event: dict[str, Any] = {"ts": ts, "target": target}
        if rng.random() < 0.5:
            kind = event["kind"] = rng.choice(["a", "b"])
        items.append((call_id, event))
        was = expected.get(call_id)
        expected[call_id] = (
            CallSummary(call_id, target, ts, ts, 1, last_kind=kind)
            if was is None
            else CallSummary(
                call_id,
                target if was.target is None else was.target,
                min(was.first_ts, ts),
                max(was.last_ts, ts),
                was.events + 1,
                last_kind=(
                    kind
                    if kind is not None and (was.last_kind is None or ts >= was.last_ts)
                    else was.last_kind
                ),
            )
        )
    for start in range(0, len(items), 70):
        await store.append_many(items[start : start + 70], ttl=30)
    whole = sorted(expected.values(), key=lambda summary: summary.last_ts, reverse=True)
    for target in (None, "t1", "t2", "t3", "t4"):
        for since in (None, 1000.0):
            wanted = [
                summary
                for summary in whole
                if (target is None or summary.target == target)
                and (since is None or summary.last_ts >= since)
            ]
            for limit in (1, 3, 10, 100):
                listed = await store.calls(limit=limit, since=since, target=target)
                assert listed == wanted[:limit], (target, since, limit)


# --- tasks ---


def task_row(task_id: str, version: int, status: str = "working", **fields: Any) -> TaskRow:
    values: dict[str, Any] = {
        "target": "slow_compute",
        "created": 1_700_000_000.25,
        "updated": 1_700_000_000.5 + version,
        "record": b"\x00sealed record\xff v%d" % version,
    }
    values.update(fields)
    return TaskRow(task_id, version, status, **values)


async def test_a_task_is_written_over_the_version_before_it_only(store: Store) -> None:
    assert await store.get_task("t1") is None
    first = task_row("t1", 1)
    assert await store.put_task(first, ttl=30, due_in=None)
    assert await store.get_task("t1") == first
    assert not await store.put_task(task_row("t1", 1, "completed"), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 3), ttl=30, due_in=None)
    second = task_row("t1", 2, "input_required")
    assert await store.put_task(second, ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 2, "completed"), ttl=30, due_in=None)
    assert await store.get_task("t1") == second
    assert not await store.put_task(task_row("t2", 2), ttl=30, due_in=None)
    assert await store.get_task("t2") is None


async def test_task_fields_keep_every_digit_and_byte(store: Store) -> None:
    row = task_row(
        "t1", 1, target="tool with spaces é", created=1_700_000_000.123456, record=bytes(range(256))
    )
    await store.put_task(row, ttl=30, due_in=None)
    assert await store.get_task("t1") == row


async def test_of_200_concurrent_writers_of_one_version_exactly_one_wins(store: Store) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=None)
    won: list[int] = []

    async def write(n: int) -> None:
        if await store.put_task(task_row("t1", 2, record=b"writer %d" % n), ttl=30, due_in=None):
            won.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(200):
            tg.start_soon(write, n)
    assert len(won) == 1
    stored = await store.get_task("t1")
    assert stored is not None and stored.record == b"writer %d" % won[0]


async def test_another_replica_reads_and_writes_the_same_tasks(
    backend: tuple[Store, Replica],
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1), ttl=30, due_in=0.0)
    assert await other.get_task("t1") == task_row("t1", 1)
    assert await other.due_tasks() == ["t1"]
    assert await other.put_task(task_row("t1", 2, "completed"), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    assert await store.due_tasks() == []


async def test_due_tasks_are_those_due_by_the_stores_clock_earliest_first(
    store: Store, elapse: Elapse
) -> None:
    await store.put_task(task_row("late", 1), ttl=30, due_in=3 * SHORT_TTL)
    await store.put_task(task_row("early", 1), ttl=30, due_in=0.0)
    await store.put_task(task_row("middle", 1), ttl=30, due_in=SHORT_TTL)
    await store.put_task(task_row("never", 1), ttl=30, due_in=None)
    assert await store.due_tasks() == ["early"]
    await elapse(PAST_SHORT_TTL)
    assert await store.due_tasks() == ["early", "middle"]
    assert await store.due_tasks(limit=1) == ["early"]
    await elapse(3 * SHORT_TTL)
    assert await store.due_tasks() == ["early", "middle", "late"]


async def test_a_read_says_how_long_until_a_task_is_due(store: Store, elapse: Elapse) -> None:
    await store.put_task(task_row("held", 1), ttl=30, due_in=20.0)
    await store.put_task(task_row("waiting", 1, "input_required"), ttl=30, due_in=None)
    held = await store.get_task("held")
    assert held is not None and held.due_in is not None and 19.0 < held.due_in <= 20.0
    waiting = await store.get_task("waiting")
    assert waiting is not None and waiting.due_in is None
    await store.put_task(task_row("lapsing", 1), ttl=30, due_in=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    lapsed = await store.get_task("lapsing")
    assert lapsed is not None and lapsed.due_in is not None and lapsed.due_in <= 0


async def test_a_write_moves_or_ends_a_due_time(store: Store, elapse: Elapse) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=0.0)
    await store.put_task(task_row("t1", 2), ttl=30, due_in=20.0)
    assert await store.due_tasks() == []
    await store.put_task(task_row("t1", 3), ttl=30, due_in=SHORT_TTL)
    await elapse(PAST_SHORT_TTL)
    assert await store.due_tasks() == ["t1"]
    await store.put_task(task_row("t1", 4, "input_required"), ttl=30, due_in=None)
    assert await store.due_tasks() == []


async def test_a_losing_write_leaves_the_due_time_alone(store: Store) -> None:
    await store.put_task(task_row("t1", 1), ttl=30, due_in=None)
    assert not await store.put_task(task_row("t1", 5), ttl=30, due_in=0.0)
    assert await store.due_tasks() == []


# --- tasks: fencing ---


async def test_a_lower_fence_is_refused_whatever_the_version(store: Store) -> None:
    assert await store.put_task(task_row("t1", 1, fence=3), ttl=30, due_in=20.0)
    assert not await store.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert await store.put_task(task_row("t1", 2, fence=3), ttl=30, due_in=20.0)
    stored = await store.get_task("t1")
    assert stored is not None and stored.fence == 3


async def test_a_higher_fence_takes_a_task_only_once_its_hold_has_lapsed(
    backend: tuple[Store, Replica], elapse: Elapse
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=SHORT_TTL)
    assert not await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    await elapse(PAST_SHORT_TTL)  # the holder did not renew: its hold lapsed
    assert await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert not await store.put_task(task_row("t1", 3, fence=1), ttl=30, due_in=20.0)
    assert not await store.renew_task("t1", 1, 20.0)  # the run before can do nothing more
    assert await other.renew_task("t1", 2, 20.0)


async def test_a_task_that_is_not_due_takes_a_higher_fence_at_once(store: Store) -> None:
    await store.put_task(task_row("t1", 1, "input_required", fence=1), ttl=30, due_in=None)
    assert await store.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    await store.renew_task("t1", 2, 0.0)  # given back: due at once
    assert await store.put_task(task_row("t1", 3, fence=3), ttl=30, due_in=20.0)


async def test_a_renewal_keeps_a_hold_live_and_leaves_the_version_alone(
    backend: tuple[Store, Replica], elapse: Elapse
) -> None:
    store, replica = backend
    other = await replica()
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=2 * SHORT_TTL)
    assert await store.renew_task("t1", 1, 30.0)
    await elapse(3 * SHORT_TTL)
    assert await other.due_tasks() == []
    assert not await other.put_task(task_row("t1", 2, fence=2), ttl=30, due_in=20.0)
    assert await store.put_task(task_row("t1", 2, fence=1), ttl=30, due_in=20.0)  # version 1+1


async def test_a_renewal_needs_the_fence_and_a_hold(store: Store) -> None:
    assert not await store.renew_task("missing", 0, 20.0)
    await store.put_task(task_row("t1", 1, fence=4), ttl=30, due_in=20.0)
    assert not await store.renew_task("t1", 3, 20.0)
    assert not await store.renew_task("t1", 5, 20.0)
    assert await store.renew_task("t1", 4, 20.0)
    await store.put_task(task_row("t1", 2, "completed", fence=4), ttl=30, due_in=None)
    assert not await store.renew_task("t1", 4, 20.0)  # it ended: there is no hold to renew
    assert await store.due_tasks() == []


async def test_of_concurrent_takers_of_a_lapsed_hold_exactly_one_wins(store: Store) -> None:
    await store.put_task(task_row("t1", 1, fence=1), ttl=30, due_in=0.0)
    won: list[int] = []

    async def take(n: int) -> None:
        row = task_row("t1", 2, fence=2, record=b"taker %d" % n)
        if await store.put_task(row, ttl=30, due_in=20.0):
            won.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(50):
            tg.start_soon(take, n)
    assert len(won) == 1


async def test_the_store_tells_its_time(store: Store) -> None:
    before = time.time()
    told = await store.clock()
    assert isinstance(told, float)
    assert before - 5 < told < time.time() + 5 or abs(told - 1e9) < 3600  # a fake clock's


async def test_tasks_are_listed_newest_first_by_status(store: Store) -> None:
    await store.put_task(task_row("old", 1, created=100.0), ttl=30, due_in=None)
    await store.put_task(task_row("new", 1, "completed", created=300.0), ttl=30, due_in=None)
    await store.put_task(task_row("mid", 1, created=200.0), ttl=30, due_in=None)
    assert [row.task_id for row in await store.tasks()] == ["new", "mid", "old"]
    assert [row.task_id for row in await store.tasks(limit=2)] == ["new", "mid"]
    assert [row.task_id for row in await store.tasks(status="working")] == ["mid", "old"]
    assert await store.tasks(status="failed") == []


async def test_a_task_expires_after_its_ttl_and_its_id_starts_over(
    store: Store, elapse: Elapse
) -> None:
    await store.put_task(task_row("t1", 1), ttl=SHORT_TTL, due_in=0.0)
    await store.put_task(task_row("t2", 1), ttl=30, due_in=None)
    assert await store.get_task("t1") is not None
    await elapse(PAST_SHORT_TTL)
    assert await store.get_task("t1") is None
    assert await store.due_tasks() == []
    assert [row.task_id for row in await store.tasks()] == ["t2"]
    assert not await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    assert await store.put_task(task_row("t1", 1, "completed"), ttl=30, due_in=None)


async def test_a_write_keeps_a_task_for_its_new_ttl(store: Store, elapse: Elapse) -> None:
    await store.put_task(task_row("t1", 1), ttl=SHORT_TTL, due_in=None)
    await store.put_task(task_row("t1", 2), ttl=30, due_in=None)
    await elapse(PAST_SHORT_TTL)
    assert await store.get_task("t1") == task_row("t1", 2)


async def test_bad_task_writes_are_refused_with_a_reason(store: Store) -> None:
    with pytest.raises(ValueError, match="task_id must be a non-empty string"):
        await store.put_task(task_row("", 1), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="positive integer"):
        await store.put_task(task_row("t1", 0), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        await store.put_task(task_row("t1", 1), ttl=0, due_in=None)
    with pytest.raises(TypeError, match="TaskRow"):
        await store.put_task({"task_id": "t1"}, ttl=30, due_in=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fence is a non-negative integer"):
        await store.put_task(task_row("t1", 1, fence=-1), ttl=30, due_in=None)
    with pytest.raises(ValueError, match="due_in must be a non-negative"):
        await store.put_task(task_row("t1", 1), ttl=30, due_in=-1.0)
    with pytest.raises(ValueError, match="lease must be a non-negative"):
        await store.renew_task("t1", 1, float("nan"))
    with pytest.raises(ValueError, match="task_id must be a non-empty string"):
        await store.get_task("")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        await store.tasks(limit=0)


# --- bus ---


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


# --- arguments and lifecycle ---


async def test_bad_arguments_are_refused_with_a_reason(store: Store) -> None:
    with pytest.raises(ValueError, match="ttl must be a positive"):
        await store.put_blob("c1", "b", b"x", ttl=0)
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
    with pytest.raises(TypeError, match="not msgpack-serialisable"):
        await store.append("c1", {"obj": object()}, ttl=30)
    with pytest.raises(ValueError, match="limit"):
        await store.calls(limit=0)


async def test_numbers_of_other_numeric_types_are_accepted(store: Store) -> None:
    class Seconds(float):
        pass

    assert (await store.claim("c1", 1, FP, ttl=Seconds(30))).status is Claim.FRESH
    await store.complete("c1", 1, FP, b"done", ttl=Seconds(30))
    assert (await store.claim("c1", 1, FP, ttl=30)).response == b"done"


async def test_ping_and_use_after_close(store: Store) -> None:
    await store.ping()
    await store.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_blob("c1", "b")
