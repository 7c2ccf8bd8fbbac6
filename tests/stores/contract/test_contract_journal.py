"""The `JournalStore` part of the store contract, run against every backend that
tests/stores/conftest.py names, each on its real backend."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from stores import (
    CallSummary,
    JournalStore,
)
from tests.stores.contract.helpers import (
    PAST_SHORT_TTL,
    SHORT_TTL,
)
from tests.stores.fake_clock import Elapse

pytestmark = pytest.mark.anyio


async def test_journal_keeps_append_order_and_content(store: JournalStore) -> None:
    events: list[dict[str, Any]] = [
        {"ts": 1000.0 + i, "kind": "step", "n": i, "blob": bytes([i]), "nested": {"a": [i, None]}}
        for i in range(25)
    ]
    for event in events:
        await store.append("c1", event, ttl=30)
    assert await store.events("c1") == events
    assert await store.events("unknown") == []


async def test_a_batch_with_an_event_that_cannot_be_encoded_writes_nothing(
    store: JournalStore,
) -> None:
    batch: list[tuple[str, dict[str, Any]]] = [
        ("c1", {"ts": 1.0, "n": 1}),
        ("c2", {"ts": 2.0, "n": object()}),
    ]
    with pytest.raises(TypeError, match="msgpack"):
        await store.append_many(batch, ttl=30)
    assert await store.events("c1") == []
    assert await store.calls() == []


async def test_append_many_writes_each_event_to_its_call_in_order(store: JournalStore) -> None:
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


async def test_journal_stores_events_as_given(store: JournalStore) -> None:
    await store.append("c1", {"no": "index keys"}, ttl=30)
    await store.append("c1", {"ts": "not a number", "target": 3}, ttl=30)
    assert await store.events("c1") == [{"no": "index keys"}, {"ts": "not a number", "target": 3}]
    [summary] = await store.calls()
    assert summary.events == 2 and summary.target is None


async def test_listing_newest_first_with_summary(store: JournalStore) -> None:
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


async def test_listing_pages_by_the_last_time_of_the_page_before(store: JournalStore) -> None:
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
    store: JournalStore,
) -> None:
    await store.append("c1", {"ts": 200.0, "target": "search"}, ttl=30)
    await store.append("c1", {"ts": 100.0, "kind": "late"}, ttl=30)
    await store.append_many([("c1", {"ts": 150.0}), ("c2", {"ts": 120.0})], ttl=30)
    assert await store.calls() == [
        CallSummary("c1", "search", 100.0, 200.0, 3, last_kind="late"),
        CallSummary("c2", None, 120.0, 120.0, 1, last_kind=None),
    ]


async def test_the_last_kind_is_the_latest_rounds_even_when_appended_first(
    store: JournalStore,
) -> None:
    # A replica that held its round a while appends it after another's later round.
    await store.append("c1", {"ts": 200.0, "kind": "complete"}, ttl=30)
    await store.append("c1", {"ts": 100.0, "kind": "input_required"}, ttl=30)
    [summary] = await store.calls()
    assert summary.last_kind == "complete"
    await store.append("c1", {"ts": 200.0, "kind": "error"}, ttl=30)
    [summary] = await store.calls()
    assert summary.last_kind == "error"


async def test_listing_keeps_every_digit_of_the_times(store: JournalStore) -> None:
    ts = 1764512345.1234567
    await store.append_many([("c1", {"ts": ts}), ("c1", {"ts": ts + 0.000_001})], ttl=30)
    await store.append("c2", {"ts": ts - 0.000_001}, ttl=30)
    assert [(c.first_ts, c.last_ts) for c in await store.calls()] == [
        (ts, ts + 0.000_001),
        (ts - 0.000_001, ts - 0.000_001),
    ]


async def test_listing_pages_past_the_limit(store: JournalStore) -> None:
    for i in range(40):
        target = "rare" if i % 10 == 0 else "common"
        await store.append(f"call-{i:02}", {"ts": float(i), "target": target}, ttl=30)
    rare = await store.calls(target="rare", limit=3)
    assert [c.call_id for c in rare] == ["call-30", "call-20", "call-10"]
    everything = await store.calls(limit=100)
    assert len(everything) == 40 and everything[0].call_id == "call-39"


async def test_event_without_ts_counts_as_now(store: JournalStore) -> None:
    before = time.time()
    await store.append("c1", {"kind": "start"}, ttl=30)
    [summary] = await store.calls(since=before - 1)
    assert before - 1 <= summary.first_ts <= time.time() + 1


async def test_journal_expires_after_ttl(store: JournalStore, elapse: Elapse) -> None:
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
    store: JournalStore, elapse: Elapse
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
    store: JournalStore, elapse: Elapse
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


async def test_bad_journal_arguments_are_refused_with_a_reason(store: JournalStore) -> None:
    with pytest.raises(TypeError, match="not msgpack-serialisable"):
        await store.append("c1", {"obj": object()}, ttl=30)
    with pytest.raises(ValueError, match="limit"):
        await store.calls(limit=0)
