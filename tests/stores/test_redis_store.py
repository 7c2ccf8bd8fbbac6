"""RedisStore beyond the shared contract: replicas, key layout, pool behaviour, and outages."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgpack
import pytest
from redis.asyncio import Redis
from redis.asyncio.sentinel import Sentinel
from redis.crc import key_slot
from redis.credentials import CredentialProvider

from stores import (
    Claim,
    ClaimResult,
    RedisStore,
    StoreUnavailable,
    TaskRow,
    open_store,
)
from stores._journal import encode_event, index_fields
from stores.redis import journal as redis_journal
from stores.redis import mux as redis_mux
from stores.redis.mux import can_multiplex
from tests.private_redis import REDIS_SERVER, PrivateRedis, free_ports

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

Replicas = Callable[..., Awaitable[RedisStore]]

SHORT_TTL = 0.05
"""The TTL of the calls a test lets expire."""
PAST_SHORT_TTL = 0.07
"""Long enough for those to be gone: a wait is only ever longer than asked."""


async def test_bus_reaches_another_replica(redis_replicas: Replicas) -> None:
    a, b = await redis_replicas(), await redis_replicas()
    async with a.subscribe("cancel") as on_a, b.subscribe("cancel") as on_b:
        await b.publish("cancel", b"call-1")
        with anyio.fail_after(5):
            assert await anext(on_a) == b"call-1"
            assert await anext(on_b) == b"call-1"


async def test_replicas_share_claims_and_journal(redis_replicas: Replicas) -> None:
    a, b = await redis_replicas(), await redis_replicas()
    assert (await a.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
    assert (await b.claim("c1", 1, b"fp", ttl=30)).status is Claim.IN_PROGRESS
    await a.append("c1", {"ts": 1.0, "target": "tool"}, ttl=30)
    assert await b.events("c1") == [{"ts": 1.0, "target": "tool"}]
    assert [c.call_id for c in await b.calls()] == ["c1"]


async def test_every_key_of_a_call_shares_one_cluster_slot(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    store = await redis_replicas()
    call = "call/with:odd{chars"
    await store.put_blob(call, "state", b"x", ttl=30)
    await store.claim(call, 3, b"fp", ttl=30)
    await store.append(call, {"ts": 1.0, "target": "tool"}, ttl=30)
    keys = [k.decode() async for k in redis_client.scan_iter(match=f"{store.prefix}:*")]
    keys.remove(f"{store.prefix}:~health")  # written by the fixture's health check
    shared = (f"{store.prefix}:index:", f"{store.prefix}:journal:")
    call_keys = [k for k in keys if not k.startswith(shared)]
    assert len(call_keys) == 2  # blob, round (its journal event is in a batch of the journal)
    assert {key_slot(k.encode()) for k in call_keys} == {key_slot(call.encode())}
    index_keys = [k for k in keys if k.startswith(shared)]
    assert len(index_keys) == 4  # by time, calls, by target, one batch
    assert len({key_slot(k.encode()) for k in index_keys}) == 1


async def test_a_task_shares_its_id_slot_and_its_indexes_the_index_slot(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    store = await redis_replicas()
    task = "task/with:odd{chars"
    await store.put_task(TaskRow(task, 1, "working", "job", 1.0, 1.0, b"r"), ttl=30, due_in=5.0)
    keys = [k.decode() async for k in redis_client.scan_iter(match=f"{store.prefix}:*")]
    shared = f"{store.prefix}:index:"
    keys.remove(f"{store.prefix}:~health")  # written by the fixture's health check
    (task_key,) = [k for k in keys if not k.startswith(shared)]
    assert key_slot(task_key.encode()) == key_slot(task.encode())
    index_keys = [k for k in keys if k.startswith(shared)]
    assert len(index_keys) == 2  # due, live
    assert {key_slot(k.encode()) for k in index_keys} == {key_slot(store.prefix.encode())}


async def test_call_ids_cannot_escape_their_hash_tag(redis_replicas: Replicas) -> None:
    store = await redis_replicas()
    await store.put_blob("a}:blob:x", "y", b"first", ttl=30)
    await store.put_blob("a", "x}:blob:y", b"second", ttl=30)
    await store.put_blob("a%7D:blob:x", "y", b"third", ttl=30)
    assert await store.get_blob("a}:blob:x", "y") == b"first"
    assert await store.get_blob("a", "x}:blob:y") == b"second"
    assert await store.get_blob("a%7D:blob:x", "y") == b"third"


async def test_prefixes_keep_deployments_apart(
    redis_replicas: Replicas, redis_test_url: str
) -> None:
    store = await redis_replicas()
    other = RedisStore(redis_test_url, prefix=f"{store.prefix}-other")
    try:
        await store.put_blob("c1", "b", b"mine", ttl=30)
        await store.append("c1", {"ts": 1.0}, ttl=30)
        assert await other.get_blob("c1", "b") is None
        assert await other.calls() == []
    finally:
        await other.aclose()


async def test_a_prefix_in_the_url_is_the_key_prefix(
    redis_test_url: str, redis_client: Redis
) -> None:
    """``RedisStore("redis://...?prefix=p")`` reads the URL as `open_store` does: its scripts'
    own connection is not handed the option as a connection setting."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in redis_test_url else "?"
    store = RedisStore(f"{redis_test_url}{separator}prefix={prefix}")
    assert store.prefix == prefix
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(store.serve)
            claim = await store.claim("c1", 1, b"f" * 32, ttl=30)
            assert claim.status is Claim.FRESH
            tg.cancel_scope.cancel()
        keys = [key async for key in redis_client.scan_iter(match=f"{prefix}:*")]
        assert keys
    finally:
        await store.aclose()
        for key in [key async for key in redis_client.scan_iter(match=f"{prefix}:*")]:
            await redis_client.delete(key)


async def test_a_burst_larger_than_the_pool_queues(redis_replicas: Replicas) -> None:
    store = await redis_replicas(max_connections=4)
    async with anyio.create_task_group() as tg:
        for i in range(300):
            tg.start_soon(store.put_blob, "c1", f"b{i}", b"x", 30.0)
    assert await store.get_blob("c1", "b299") == b"x"


async def test_expired_calls_leave_the_index(redis_replicas: Replicas, redis_client: Redis) -> None:
    store = await redis_replicas(purge_interval=0)
    calls = f"{store.prefix}:index:{{{store.prefix}}}:calls"
    await store.append("kept", {"ts": 2.0, "target": "tool"}, ttl=30)
    await store.append("gone", {"ts": 1.0, "target": "tool"}, ttl=SHORT_TTL)
    assert sorted(await redis_client.hkeys(calls)) == [b"gone", b"kept"]
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    assert [c.call_id for c in await store.calls(target="tool")] == ["kept"]
    index = [k.decode() async for k in redis_client.scan_iter(match=f"{store.prefix}:index:*")]
    for key in index:
        members = await redis_client.zrange(key, 0, -1) if not key.endswith(":calls") else []
        assert b"gone" not in members, key
    assert await redis_client.hkeys(calls) == [b"kept"]


async def test_pruning_keeps_up_with_many_expired_calls(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    writer = await redis_replicas(purge_interval=3600)
    assert await writer.calls() == []  # its pruning is done for the hour: its writes do not prune
    per_run = redis_journal._PRUNE_RUNS * redis_journal._PRUNE_BATCH
    expired = per_run + 700
    await writer.append_many(
        [(f"old-{i}", {"ts": 1.0 + i, "target": "tool"}) for i in range(expired)], ttl=SHORT_TTL
    )
    await writer.append("kept", {"ts": 0.5, "target": "tool"}, ttl=30)  # the oldest, yet live
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    reader = await redis_replicas(purge_interval=3600)  # its first listing prunes
    index = f"{reader.prefix}:index:{{{reader.prefix}}}"
    assert [c.call_id for c in await reader.calls()] == ["kept"]
    left = await redis_client.hlen(f"{index}:calls") - 1
    assert 0 < left <= expired - per_run + redis_journal._PRUNE_RUNS  # a bounded run
    # so many expired that the run stopped: the next write or listing prunes again
    assert [c.call_id for c in await reader.calls(target="tool")] == ["kept"]
    assert await redis_client.hkeys(f"{index}:calls") == [b"kept"]
    assert await redis_client.zrange(f"{index}:by_ts", 0, -1) == [b"kept"]
    assert await redis_client.zrange(f"{index}:target:tool", 0, -1) == [b"kept"]


async def test_pruning_walks_past_live_calls_over_several_runs(
    redis_replicas: Replicas, redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_journal, "_PRUNE_BATCH", 5)  # 4 windows of 5 calls a run
    writer = await redis_replicas(purge_interval=3600)
    assert await writer.calls() == []  # its pruning is done for the hour: its writes do not prune
    await writer.append_many([(f"live-{i}", {"ts": 1.0 + i}) for i in range(25)], ttl=3600)
    await writer.append_many([(f"old-{i}", {"ts": 100.0 + i}) for i in range(10)], ttl=SHORT_TTL)
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    reader = await redis_replicas(purge_interval=3600)
    index = f"{reader.prefix}:index:{{{reader.prefix}}}"

    async def listed() -> int:
        return int(await redis_client.hlen(f"{index}:calls"))

    await reader.calls()  # the first run sees only live calls: 20 of them
    assert await listed() == 35
    await reader.calls()  # nothing left behind that run: the next waits for the interval
    assert await listed() == 35
    reader._next_prune = 0.0  # the interval has passed
    await reader.calls()  # goes on from the 21st call: the expired ones go
    assert await listed() == 25
    await reader.calls()  # its last window had wholly expired: again at once, to the end
    await writer.append_many([("late", {"ts": 10.5})], ttl=SHORT_TTL)  # among the live ones
    assert await listed() == 26
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    reader._next_prune = 0.0
    await reader.calls()  # the walk started over at the end of the index: it is found
    assert await listed() == 25


async def test_pruning_empties_the_expiry_index_of_older_versions(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    store = await redis_replicas(purge_interval=0)
    index = f"{store.prefix}:index:{{{store.prefix}}}"
    await redis_client.zadd(f"{index}:expiry", {"gone": time.time()})  # as older versions wrote
    await store.append("gone", {"ts": 1.0, "target": "tool"}, ttl=SHORT_TTL)
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    assert await store.calls() == []
    assert await redis_client.exists(f"{index}:expiry", f"{index}:by_ts", f"{index}:calls") == 0


async def test_a_listing_entry_written_by_something_else_is_skipped_not_fatal(
    redis_replicas: Replicas, redis_client: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = await redis_replicas(purge_interval=0)
    await store.append("good", {"ts": 1.0, "target": "tool"}, ttl=30)
    index = f"{store.prefix}:index:{{{store.prefix}}}"
    entries = [  # (name, summary, the expiry an older version kept for it)
        (b"junk", b"not msgpack \xc1", None),
        (b"short", b"\x92\x01\x02", time.time() + 60),
        (b"stale", b"\x92\x01\x02", 0.0),
    ]
    for name, value, expiry in entries:
        await redis_client.hset(f"{index}:calls", name, value)
        await redis_client.zadd(f"{index}:by_ts", {name: 0.5})  # the first the pruning meets
        if expiry is not None:
            await redis_client.zadd(f"{index}:expiry", {name: expiry})
    assert [c.call_id for c in await store.calls()] == ["good"]
    assert "is not one this store wrote" in caplog.text
    await store.append("gone", {"ts": 2.0, "target": "tool"}, ttl=SHORT_TTL)
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    await store.append("later", {"ts": 3.0, "target": "tool"}, ttl=30)  # and pruning goes on
    assert [c.call_id for c in await store.calls()] == ["later", "good"]
    assert sorted(await redis_client.hkeys(f"{index}:calls")) == [
        b"good",
        b"junk",
        b"later",
        b"short",
    ]
    assert "pruning failed" not in caplog.text


async def test_live_calls_at_the_front_do_not_stop_the_pruning_behind_them(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    writer = await redis_replicas(purge_interval=3600)
    assert await writer.calls() == []  # its pruning is done for the hour: its writes do not prune
    live = redis_journal._PRUNE_BATCH + 20  # a replica with a longer TTL wrote these first
    await writer.append_many([(f"live-{i}", {"ts": 1.0 + i}) for i in range(live)], ttl=3600)
    await writer.append_many([(f"old-{i}", {"ts": 1e4 + i}) for i in range(300)], ttl=SHORT_TTL)
    await anyio.sleep(PAST_SHORT_TTL)  # Redis expires keys on its own clock: wait for real
    reader = await redis_replicas(purge_interval=3600)
    index = f"{reader.prefix}:index:{{{reader.prefix}}}"
    assert len(await reader.calls(limit=1000)) == live
    assert await redis_client.hlen(f"{index}:calls") == live
    assert await redis_client.zcard(f"{index}:by_ts") == live


async def test_a_summary_that_outlived_its_journal_starts_over(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    store = await redis_replicas()

    async def lose_the_journal() -> None:  # the summary stays behind
        batches = [k async for k in redis_client.scan_iter(match=f"{store.prefix}:journal:*")]
        await redis_client.delete(f"{store.prefix}:{{c1}}:journal", *batches)

    await store.append("c1", {"ts": 1.0, "target": "old", "kind": "done"}, ttl=30)
    await lose_the_journal()
    for append in (store.append, lambda c, e, ttl: store.append_many([(c, e)], ttl)):
        await append("c1", {"ts": 5.0}, ttl=30)
        [summary] = await store.calls()
        assert (summary.target, summary.first_ts, summary.events, summary.last_kind) == (
            None,
            5.0,
            1,
            None,
        )
        await store.append("c1", {"ts": 6.0, "target": "new", "kind": "next"}, ttl=30)
        [summary] = await store.calls()
        assert (summary.target, summary.events, summary.last_kind) == ("new", 2, "next")
        assert await store.calls(target="old") == []
        assert [e["ts"] for e in await store.events("c1")] == [5.0, 6.0]
        await lose_the_journal()


async def test_a_call_reads_its_events_from_the_batches_they_came_in(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    a, b = await redis_replicas(), await redis_replicas()
    await a.append_many([("c1", {"ts": 1.0, "n": 1}), ("c2", {"ts": 1.5, "n": 1})], ttl=30)
    await b.append_many([("c2", {"ts": 2.0, "n": 2}), ("c1", {"ts": 2.5, "n": 2})], ttl=30)
    await a.append("c1", {"ts": 3.0, "n": 3}, ttl=30)

    assert [e["n"] for e in await b.events("c1")] == [1, 2, 3]
    assert [e["n"] for e in await a.events("c2")] == [1, 2]
    assert await redis_client.exists(f"{a.prefix}:{{c1}}:journal") == 0  # no key of its own


async def test_a_continued_call_keeps_its_earlier_batches_alive(
    redis_replicas: Replicas, redis_client: Redis
) -> None:
    store = await redis_replicas()
    await store.append_many([("c1", {"ts": 1.0}), ("c2", {"ts": 1.0})], ttl=300)
    [batch] = await journal_keys(store, redis_client)
    await store.append("c1", {"ts": 2.0}, ttl=600)
    assert await redis_client.pttl(batch) > 300_000
    await store.append("c2", {"ts": 2.0}, ttl=1)  # c1's events are in that batch too
    assert await redis_client.pttl(batch) > 300_000


async def journal_keys(store: RedisStore, redis_client: Redis) -> list[bytes]:
    return [k async for k in redis_client.scan_iter(match=f"{store.prefix}:journal:*")]


async def test_a_long_call_moves_its_events_to_its_own_list(
    redis_replicas: Replicas, redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_journal, "JOURNAL_POINTERS", 2)
    store = await redis_replicas()
    await store.append_many([("c1", {"ts": 1.0, "n": n}) for n in (1, 2, 3)], ttl=30)
    await store.append("c1", {"ts": 2.0, "n": 4}, ttl=30)
    await store.append_many([("c1", {"ts": 3.0, "n": 5}), ("c2", {"ts": 3.0, "n": 1})], ttl=30)

    assert [e["n"] for e in await store.events("c1")] == [1, 2, 3, 4, 5]
    assert await redis_client.llen(f"{store.prefix}:{{c1}}:journal") == 4
    [summary] = [s for s in await store.calls() if s.call_id == "c1"]
    assert summary.events == 5
    assert len(await journal_keys(store, redis_client)) == 3  # kept until they expire


async def test_an_id_used_again_does_not_read_its_earlier_life(
    redis_replicas: Replicas, redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_journal, "JOURNAL_POINTERS", 1)
    store = await redis_replicas()
    await store.append_many([("c1", {"ts": 1.0, "n": n}) for n in (1, 2, 3)], ttl=30)
    await redis_client.hdel(f"{store.prefix}:index:{{{store.prefix}}}:calls", "c1")  # pruned
    await store.append("c1", {"ts": 5.0, "n": 100}, ttl=30)
    assert [e["n"] for e in await store.events("c1")] == [100]
    monkeypatch.setattr(redis_journal, "JOURNAL_POINTERS", 4)
    await store.append("c1", {"ts": 6.0, "n": 101}, ttl=30)
    assert [e["n"] for e in await store.events("c1")] == [100, 101]


async def test_events_whose_key_is_gone_leave_the_rest_in_order(
    redis_replicas: Replicas, redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await redis_replicas()
    older = {"ts": 1.0, "n": 1}  # as a version that kept every event in a list
    await store._append_one("c1", encode_event(older), index_fields(older), ttl=30)
    await store.append("c1", {"ts": 2.0, "n": 2}, ttl=30)
    await redis_client.delete(f"{store.prefix}:{{c1}}:journal")  # evicted, say
    monkeypatch.setattr(redis_journal, "JOURNAL_POINTERS", 2)
    await store.append_many([("c1", {"ts": 3.0, "n": 3}), ("c1", {"ts": 4.0, "n": 4})], ttl=30)
    await store.append("c1", {"ts": 5.0, "n": 5}, ttl=30)

    assert [e["n"] for e in await store.events("c1")] == [2, 3, 4, 5]
    [summary] = await store.calls()
    assert summary.events == 4


@pytest.mark.parametrize(
    "odd",
    [
        [1.0, 2.0, "x", 60, "", ""],
        [1.0, 2.0, 1, 60, "", "", 1.5, ["journal", 0, 10]],
        [1.0, 2.0, 1, 60, "", "", 0, ["calls", 0, 10]],
        [1.0, 2.0, 1, 60, "", "", 0, ["journal", -1, 10]],
    ],
)
async def test_a_summary_the_store_cannot_read_starts_its_call_afresh(
    redis_replicas: Replicas,
    redis_client: Redis,
    monkeypatch: pytest.MonkeyPatch,
    odd: list[Any],
) -> None:
    monkeypatch.setattr(redis_journal, "JOURNAL_POINTERS", 1)  # c1's event moves what it points to
    store = await redis_replicas()
    index = f"{store.prefix}:index:{{{store.prefix}}}"
    await redis_client.rpush(f"{store.prefix}:{{c1}}:journal", b"?")
    batch = f"{store.prefix}:journal:{{{store.prefix}}}:x"
    await redis_client.set(batch, b"?" * 20)
    odd[3] += time.time()  # not expired
    if len(odd) > 6 and odd[7]:
        odd[7][0] = f"{index}:{odd[7][0]}" if odd[7][0] == "calls" else batch
    await redis_client.hset(f"{index}:calls", "c1", msgpack.packb(odd))
    await store.append_many([("c1", {"ts": 5.0, "n": 1}), ("c2", {"ts": 5.0, "n": 1})], ttl=30)
    assert [e["n"] for e in await store.events("c1")] == [1]
    assert sorted((s.call_id, s.events) for s in await store.calls()) == [("c1", 1), ("c2", 1)]


async def test_a_call_begun_in_a_list_goes_on_in_batches(redis_replicas: Replicas) -> None:
    store = await redis_replicas()
    older = {"ts": 1.0, "target": "tool", "n": 1}  # as a version that kept every event in a list
    await store._append_one("c1", encode_event(older), index_fields(older), ttl=30)
    await store.append_many([("c1", {"ts": 2.0, "n": 2})], ttl=30)
    await store.append("c1", {"ts": 3.0, "kind": "done", "n": 3}, ttl=30)

    assert [e["n"] for e in await store.events("c1")] == [1, 2, 3]
    [summary] = await store.calls(target="tool")
    assert (summary.events, summary.first_ts, summary.last_kind) == (3, 1.0, "done")


async def test_a_client_passed_in_stays_open(redis_replicas: Replicas, redis_test_url: str) -> None:
    client = Redis.from_url(redis_test_url)
    prefix = (await redis_replicas()).prefix  # cleaned up by the fixture
    store = RedisStore(client, prefix=prefix)
    await store.put_blob("c1", "b", b"x", ttl=30)
    await store.aclose()
    try:
        assert await client.exists(f"{prefix}:{{c1}}:blob:b") == 1
    finally:
        await client.aclose()


# --- outages, against a private redis-server this test may kill ---


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: install it to test outages")
    server = PrivateRedis(tmp_path, free_ports(1)[0])
    try:
        await server.start()
        yield server
    finally:
        await server.kill()


async def _cluster(client: Redis, *args: str | int) -> Any:
    return await client.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]


async def _cluster_ok(client: Redis) -> bool:
    return b"cluster_state:ok" in await _cluster(client, "INFO")


@pytest.fixture
async def private_cluster(tmp_path: Path) -> AsyncIterator[str]:
    """A three-primary Redis Cluster of our own; yields its ``redis+cluster://`` URL."""
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed: install it to test Redis Cluster")
    ports = free_ports(6)  # a client port and a cluster bus port per node
    buses = ports[3:]
    nodes = [
        PrivateRedis(tmp_path, port, "--cluster-enabled", "yes", "--cluster-port", str(bus),
                     "--cluster-config-file", f"nodes-{port}.conf")
        for port, bus in zip(ports[:3], buses, strict=True)
    ]  # fmt: skip
    clients = [Redis(host="127.0.0.1", port=node.port) for node in nodes]
    try:
        slots = [(0, 5460), (5461, 10922), (10923, 16383)]
        for node, client, (first, last) in zip(nodes, clients, slots, strict=True):
            await node.start()
            await _cluster(client, "ADDSLOTSRANGE", first, last)
        for epoch, client in enumerate(clients, start=1):  # distinct epochs converge faster
            await _cluster(client, "SET-CONFIG-EPOCH", epoch)
        for node, bus in zip(nodes[1:], buses[1:], strict=True):
            await _cluster(clients[0], "MEET", "127.0.0.1", node.port, bus)
        with anyio.fail_after(10):
            for client in clients:
                while not await _cluster_ok(client):  # noqa: ASYNC110 - another process's state
                    await anyio.sleep(0.05)
        yield f"redis+cluster://127.0.0.1:{nodes[0].port}"
    finally:
        for client in clients:
            await client.aclose()
        for node in nodes:
            await node.kill()


async def _fails_fast(op: Awaitable[object], limit: float) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="can be retried"):
        await op
    assert time.monotonic() - started < limit


async def test_outage_fails_fast_and_the_same_store_recovers(private_redis: PrivateRedis) -> None:
    store = RedisStore(private_redis.url, prefix="outage", op_timeout=0.5)
    try:
        await store.put_blob("c1", "b", b"before", ttl=30)
        assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
        async with store.subscribe("news") as news:
            await private_redis.kill()
            limit = 0.5 + 0.4
            await _fails_fast(store.ping(), limit)
            await _fails_fast(store.get_blob("c1", "b"), limit)
            await _fails_fast(store.claim("c1", 2, b"fp", ttl=30), limit)
            await _fails_fast(store.complete("c1", 1, b"fp", b"r", ttl=30), limit)
            await _fails_fast(store.append("c1", {"ts": 1.0}, ttl=30), limit)
            await _fails_fast(store.calls(), limit)
            await _fails_fast(store.publish("news", b"lost"), limit)
            await _fails_fast(store.wait_complete("c1", 1, b"fp", timeout=5), limit)

            await private_redis.start()  # same port, empty dataset
            await store.ping()
            assert await store.get_blob("c1", "b") is None
            await store.put_blob("c1", "b", b"after", ttl=30)
            assert await store.get_blob("c1", "b") == b"after"
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH  # scripts
            await store.append("c1", {"ts": 2.0}, ttl=30)
            assert await store.events("c1") == [{"ts": 2.0}]

            # The subscription reconnects by itself; messages sent meanwhile are lost.
            async with anyio.create_task_group() as tg:

                async def keep_publishing() -> None:
                    while True:
                        await store.publish("news", b"back")
                        await anyio.sleep(0.05)

                tg.start_soon(keep_publishing)
                with anyio.fail_after(5):
                    assert await anext(news) == b"back"
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()


async def test_a_stalled_server_times_out_within_the_op_timeout(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore(private_redis.url, prefix="stall", op_timeout=0.5)
    try:
        await store.put_blob("c1", "b", b"x", ttl=30)
        private_redis.signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="get_blob"):
                await store.get_blob("c1", "b")
            assert 0.4 < time.monotonic() - started < 1.2
        finally:
            private_redis.signal(signal.SIGCONT)
        assert await store.get_blob("c1", "b") == b"x"
    finally:
        await store.aclose()


async def test_redis_cluster(private_cluster: str) -> None:
    store = open_store(f"{private_cluster}?prefix=cl")
    try:
        assert isinstance(store, RedisStore)
        calls = [f"call-{i}" for i in range(12)]  # spread over the three primaries
        for i, call in enumerate(calls):
            assert (await store.claim(call, 1, b"fp", ttl=30)).status is Claim.FRESH
            await store.complete(call, 1, b"fp", b"r%d" % i, ttl=30)
            await store.put_blob(call, "state", b"s%d" % i, ttl=30)
            await store.append(call, {"ts": float(i), "target": f"t{i % 3}"}, ttl=30)
        assert await store.claim(calls[5], 1, b"fp", ttl=30) == ClaimResult(Claim.DUPLICATE, b"r5")
        assert await store.get_blob(calls[7], "state") == b"s7"
        assert await store.events(calls[2]) == [{"ts": 2.0, "target": "t2"}]
        listed = await store.calls(target="t1", limit=3)
        assert [c.call_id for c in listed] == ["call-10", "call-7", "call-4"]
        async with store.subscribe("news") as news:
            await store.publish("news", b"to every node")
            with anyio.fail_after(5):
                assert await anext(news) == b"to every node"

        # A batch of journal events spans the primaries; each call is listed under its
        # summary's target and latest time, whatever order its events come in.
        batch = [
            ("b-1", {"ts": 50.0, "target": "search"}),
            ("b-2", {"ts": 40.0, "target": "fetch"}),
            ("b-1", {"ts": 45.0, "kind": "done"}),
            ("b-3", {"ts": 60.0}),
        ]
        await store.append_many(batch, ttl=30)
        assert await store.events("b-1") == [
            {"ts": 50.0, "target": "search"},
            {"ts": 45.0, "kind": "done"},
        ]
        assert [c.call_id for c in await store.calls(since=39.0, limit=20)][:3] == [
            "b-3",
            "b-1",
            "b-2",
        ]
        assert [c.call_id for c in await store.calls(target="search")] == ["b-1"]

        # Tasks spread over the primaries too; their indexes live apart, on the index's node.
        for i in range(6):
            row = TaskRow(f"task-{i}", 1, "working", "job", float(i), float(i), b"r%d" % i)
            assert await store.put_task(row, ttl=30, due_in=0.0 if i % 2 else None)
        assert not await store.put_task(
            TaskRow("task-1", 1, "working", "job", 1.0, 1.0, b"again"), ttl=30, due_in=None
        )
        done = TaskRow("task-3", 2, "completed", "job", 3.0, 9.0, b"done")
        assert await store.put_task(done, ttl=30, due_in=None)
        assert await store.get_task("task-3") == done
        assert await store.due_tasks() == ["task-1", "task-5"]
        assert [row.task_id for row in await store.tasks(status="working", limit=2)] == [
            "task-5",
            "task-4",
        ]
    finally:
        await store.aclose()


async def test_a_journal_batch_larger_than_one_script_is_split_and_kept_in_order(
    redis_replicas: Replicas,
) -> None:
    from stores.redis.journal import JOURNAL_BLOB_BYTES

    store = await redis_replicas()
    big = bytes(range(256)) * (JOURNAL_BLOB_BYTES // 1024)  # every byte value; 1/4 of a script
    batch = [
        (f"call-{i % 3}", {"ts": float(i), "target": "t", "n": i, "blob": big}) for i in range(9)
    ]
    batch.append(("call-0", {"ts": 100.0, "n": 9, "blob": big * 5}))  # over the limit alone
    await store.append_many(batch, ttl=30)
    for c in range(3):
        events = await store.events(f"call-{c}")
        assert [e["n"] for e in events] == [n for n in range(10) if n % 3 == c]
        assert all(e["blob"] in (big, big * 5) for e in events)
    listed = await store.calls(target="t")
    assert [(s.call_id, s.events, s.last_ts) for s in listed] == [
        ("call-0", 4, 100.0),
        ("call-2", 3, 8.0),
        ("call-1", 3, 7.0),
    ]


async def test_thousands_of_one_calls_events_in_one_batch_are_pushed_in_order(
    redis_replicas: Replicas,
) -> None:
    store = await redis_replicas()
    await store.append("c1", {"ts": 0.5, "target": "t", "n": -1}, ttl=30)
    await store.append_many([("c1", {"ts": float(i), "n": i}) for i in range(9000)], ttl=30)
    assert [e["n"] for e in await store.events("c1")] == list(range(-1, 9000))
    [summary] = await store.calls(target="t")
    assert (summary.events, summary.first_ts, summary.last_ts) == (9001, 0.0, 8999.0)


async def test_a_batch_of_thousands_of_calls_lists_every_one(redis_replicas: Replicas) -> None:
    # More calls than Lua can unpack into one command (about 8,000 values): the listing's
    # commands and its read of earlier summaries must go in chunks.
    store = await redis_replicas()
    earlier = [(f"c{i}", {"ts": 1.0, "target": "t", "kind": "start"}) for i in range(8200)]
    await store.append_many(earlier, ttl=30)
    batch = [(f"c{i}", {"ts": 2.0 + i, "kind": "done"}) for i in range(9000)]
    batch += [(f"c{i}", {"ts": 2.0 + i}) for i in range(0, 9000, 2)]
    await store.append_many(batch, ttl=30)
    listed = {s.call_id: s for s in await store.calls(limit=10_000)}
    assert len(listed) == 9000
    continued, fresh = listed["c1"], listed["c8201"]
    assert (continued.target, continued.first_ts, continued.last_ts) == ("t", 1.0, 3.0)
    assert (continued.events, continued.last_kind) == (2, "done")
    assert (fresh.target, fresh.first_ts, fresh.events, fresh.last_kind) == (
        None,
        8203.0,
        1,
        "done",
    )
    assert listed["c0"].events == 3
    by_target = await store.calls(target="t", limit=10_000)
    assert len(by_target) == 8200 and by_target[0].call_id == "c8199"


# --- the shared script connection while serving ---


ON_BOTH_LOOPS = pytest.mark.parametrize(
    "anyio_backend", [("asyncio", {}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"]
)
"""Also on uvloop, the event loop uvicorn runs on when it is installed (its transports differ)."""


@asynccontextmanager
async def serving(store: RedisStore) -> AsyncIterator[None]:
    """The store's shared script connection serves the block (as while a server uses the store)."""
    async with anyio.create_task_group() as tg:
        await tg.start(store.serve)
        yield
        tg.cancel_scope.cancel()


@ON_BOTH_LOOPS
async def test_concurrent_round_scripts_share_writes_on_one_connection(
    redis_replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await redis_replicas()
    writes: list[int] = []
    flush = redis_mux._Wire.flush

    def counted(self: redis_mux._Wire) -> None:
        scripts = sum(packed.startswith(b"*") and b"EVALSHA" in packed for packed in self.queued)
        if scripts:  # not the connection's set-up (SELECT, AUTH)
            writes.append(scripts)
        flush(self)

    monkeypatch.setattr(redis_mux._Wire, "flush", counted)
    results: dict[int, ClaimResult] = {}

    async def claim(n: int) -> None:
        results[n] = await store.claim(f"call-{n}", 1, b"fp", ttl=30)

    async with serving(store):
        async with anyio.create_task_group() as tg:
            for n in range(64):
                tg.start_soon(claim, n)
        assert all(r.status is Claim.FRESH for r in results.values()) and len(results) == 64
        assert sum(writes) == 64 and len(writes) < 64 / 4
        again = await store.claim("call-7", 1, b"fp", ttl=30)
        assert again.status is Claim.IN_PROGRESS
    assert (await store.claim("call-7", 1, b"other", ttl=30)).status is Claim.CONFLICT  # direct


async def test_shared_connection_reload_scripts_after_a_flush(private_redis: PrivateRedis) -> None:
    store = RedisStore(private_redis.url, prefix="flush", op_timeout=2)
    client = Redis.from_url(private_redis.url)
    try:
        async with serving(store):
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
            await client.script_flush()
            assert (await store.claim("c2", 1, b"fp", ttl=30)).status is Claim.FRESH
            await store.complete("c2", 1, b"fp", b"done", ttl=30)
            duplicate = await store.claim("c2", 1, b"fp", ttl=30)
            assert (duplicate.status, duplicate.response) == (Claim.DUPLICATE, b"done")
    finally:
        await client.aclose()
        await store.aclose()


async def test_shared_connection_fail_fast_in_an_outage_and_recover(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore(private_redis.url, prefix="outage-served", op_timeout=0.5)
    try:
        async with serving(store):
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
            await private_redis.kill()
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(_fails_fast, store.claim(f"c{n}", 2, b"fp", ttl=30), 0.9)
            await private_redis.start()  # same port, empty dataset: scripts are gone too
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
    finally:
        await store.aclose()


@ON_BOTH_LOOPS
async def test_shared_connection_reconnects_after_a_restart_while_idle(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore(private_redis.url, prefix="restart-idle", op_timeout=1)
    try:
        async with serving(store):
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
            await private_redis.kill()
            await private_redis.start()  # nothing was in flight: nothing fails
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
            await store.complete("c1", 1, b"fp", b"done", ttl=30)
            assert (await store.claim("c1", 1, b"fp", ttl=30)).response == b"done"
    finally:
        await store.aclose()


async def test_shared_connection_logs_in_and_selects_the_database(tmp_path: Path) -> None:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed")
    socket_path = tmp_path / "redis.sock"
    server = PrivateRedis(
        tmp_path, free_ports(1)[0], "--requirepass", "s3cret", "--unixsocket", str(socket_path)
    )
    await server.start()
    client = Redis.from_url(f"redis://:s3cret@127.0.0.1:{server.port}/3")
    try:
        for url in (
            f"redis://:s3cret@127.0.0.1:{server.port}/3",
            f"unix://{socket_path}?db=3&password=s3cret",
        ):
            store = RedisStore(url, prefix="login")
            try:
                async with serving(store):
                    call = f"call-{len(url)}"
                    assert (await store.claim(call, 1, b"fp", ttl=30)).status is Claim.FRESH
                assert await client.exists(f"login:{{{call}}}:round:1") == 1
            finally:
                await store.aclose()
        refused = RedisStore(f"redis://:wrong@127.0.0.1:{server.port}/3", prefix="login")
        try:
            async with serving(refused):
                with pytest.raises(StoreUnavailable, match="AuthenticationError: invalid"):
                    await refused.claim("c9", 1, b"fp", ttl=30)
        finally:
            await refused.aclose()
    finally:
        await client.aclose()
        await server.kill()


async def test_a_script_that_cannot_be_encoded_fails_alone(redis_replicas: Replicas) -> None:
    store = await redis_replicas()
    async with serving(store):  # no connection yet: both wait for the first one
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.claim, "good", 1, b"fp", 30)
            with pytest.raises(UnicodeEncodeError):
                await store.claim("bad\ud800", 1, b"fp", ttl=30)
        assert (await store.claim("good", 1, b"fp", ttl=30)).status is Claim.IN_PROGRESS


async def test_a_failing_credential_provider_fails_the_scripts_not_the_server(
    redis_test_url: str,
) -> None:
    class Flaky(CredentialProvider):
        def get_credentials(self) -> tuple[str]:
            raise RuntimeError("the token service is down")

        async def get_credentials_async(self) -> tuple[str]:
            raise RuntimeError("the token service is down")

    client = Redis.from_url(redis_test_url, credential_provider=Flaky())
    store = RedisStore(client, prefix="flaky-credentials")
    try:
        async with serving(store):
            with pytest.raises(StoreUnavailable, match="the token service is down"):
                await store.claim("c1", 1, b"fp", ttl=30)
    finally:
        await store.aclose()
        await client.aclose()


async def test_a_full_redis_is_unavailable_with_or_without_the_shared_connection() -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"-ERR max number of clients reached\r\n")  # as Redis does, unasked
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", prefix="full", op_timeout=1, retries=0)
    try:
        with pytest.raises(StoreUnavailable, match="max number of clients"):
            await store.claim("c1", 1, b"fp", ttl=30)
        async with serving(store):
            with pytest.raises(StoreUnavailable, match="max number of clients"):
                await store.claim("c1", 1, b"fp", ttl=30)
    finally:
        await store.aclose()
        server.close()


def test_clients_that_redis_py_must_connect_itself_keep_their_scripts_in_redis_py() -> None:
    assert can_multiplex(Redis.from_url("redis://127.0.0.1:6379/0"))
    assert can_multiplex(Redis.from_url("unix:///run/redis.sock"))
    sentinel = Sentinel([("127.0.0.1", 26379)]).master_for("primary")
    assert not can_multiplex(sentinel)  # it asks a sentinel for the address as it connects
    assert not can_multiplex(Redis.from_url("redis://127.0.0.1:6379/0", decode_responses=True))


@ON_BOTH_LOOPS
async def test_shared_connection_answer_within_the_op_timeout_when_redis_stalls(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore(private_redis.url, prefix="stall-served", op_timeout=0.5)
    try:
        async with serving(store):
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.FRESH
            private_redis.signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(StoreUnavailable, match="claim of call 'c2'"):
                    await store.claim("c2", 1, b"fp", ttl=30)
                assert 0.4 < time.monotonic() - started < 1.2
            finally:
                private_redis.signal(signal.SIGCONT)
            # The stalled connection was dropped; the next one starts clean.
            assert (await store.claim("c1", 1, b"fp", ttl=30)).status is Claim.IN_PROGRESS
            await store.complete("c1", 1, b"fp", b"done", ttl=30)
            duplicate = await store.claim("c1", 1, b"fp", ttl=30)
            assert (duplicate.status, duplicate.response) == (Claim.DUPLICATE, b"done")
    finally:
        await store.aclose()


async def test_shared_connection_name_keys_as_the_client_encodes_them(
    redis_replicas: Replicas, redis_test_url: str
) -> None:
    client = Redis.from_url(redis_test_url, encoding="latin-1")
    prefix = (await redis_replicas()).prefix  # cleaned up by the fixture
    store = RedisStore(client, prefix=prefix)
    try:
        async with serving(store):
            assert (await store.claim("café", 1, b"fp", ttl=30)).status is Claim.FRESH
        # Sent by itself (redis-py packs it), the same claim finds the round taken.
        assert (await store.claim("café", 1, b"fp", ttl=30)).status is Claim.IN_PROGRESS
        assert await client.exists(f"{prefix}:{{café}}:round:1".encode("latin-1")) == 1
    finally:
        await store.aclose()
        await client.aclose()


async def test_a_script_redis_forgets_again_right_after_reloading_it_is_unavailable(
    redis_replicas: Replicas,
) -> None:
    """redis-py reloads a script Redis does not know and runs it again; a Redis restarted in
    between forgets it again, and that is an outage to retry, not a wrong request."""
    from redis import exceptions as rx

    store = await redis_replicas()

    async def forgotten() -> None:
        raise rx.NoScriptError("No matching script. Please use EVAL.")

    with pytest.raises(StoreUnavailable, match="can be retried"):
        await store._call("release of call 'c1' round 1", forgotten)
