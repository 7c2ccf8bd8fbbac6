"""Group commit in the SQLite store: the writes of one loop turn share a transaction, and each
still succeeds, fails or is withdrawn on its own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from stores import Claim, SQLiteStore, StoreUnavailable
from stores.sqlite.group_commit import GroupCommit, Pending, commit_group
from stores.sqlite.schema import transaction

pytestmark = pytest.mark.anyio


def count_begins(store: SQLiteStore) -> list[str]:
    """The ``BEGIN`` statements the store's event-loop connection runs from now on."""
    begins: list[str] = []
    quick = store._quick
    assert quick is not None
    quick.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    return begins


async def test_claims_of_one_loop_turn_commit_together(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    try:
        await store.claim("warm-up", 1, b"fp", ttl=30)  # the first write also purges
        begins = count_begins(store)
        statuses: dict[str, Claim] = {}

        async def claim(call_id: str) -> None:
            statuses[call_id] = (await store.claim(call_id, 1, b"fp", ttl=30)).status

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(claim, f"call-{n}")
                tg.start_soon(claim, f"call-{n}")  # the same round twice in one group
        assert len(begins) == 1
        assert sorted(statuses) == sorted(f"call-{n}" for n in range(20))
        reopened = SQLiteStore(tmp_path / "engine.db")
        try:
            again = [await reopened.claim(f"call-{n}", 1, b"fp", ttl=30) for n in range(20)]
        finally:
            await reopened.aclose()
        assert {c.status for c in again} == {Claim.IN_PROGRESS}  # all on disk
    finally:
        await store.aclose()


async def test_each_write_of_a_group_gets_its_own_result(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    try:
        await store.claim("done", 1, b"fp", ttl=30)
        await store.complete("done", 1, b"fp", b"the response", ttl=30)
        results: dict[str, Any] = {}

        async def claim(call_id: str, fingerprint: bytes) -> None:
            results[f"{call_id}/{fingerprint.decode()}"] = await store.claim(
                call_id, 1, fingerprint, ttl=30
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(claim, "done", b"fp")
            tg.start_soon(claim, "done", b"other")
            tg.start_soon(claim, "new", b"fp")
        assert results["done/fp"].status is Claim.DUPLICATE
        assert results["done/fp"].response == b"the response"
        assert results["done/other"].status is Claim.CONFLICT
        assert results["new/fp"].status is Claim.FRESH
    finally:
        await store.aclose()


def test_a_failing_write_leaves_the_others_of_its_group(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES ('taken')")

    def insert(*keys: str) -> Any:
        def op(c: sqlite3.Connection, _clock: Any) -> int:
            for key in keys:
                c.execute("INSERT INTO t VALUES (?)", (key,))
            return len(keys)

        return op

    def insert_in_transaction(*keys: str) -> Any:
        def op(c: sqlite3.Connection, clock: Any) -> int:
            with transaction(c):  # as the store's journal writes do
                return insert(*keys)(c, clock)

        return op

    group = [
        Pending("first", insert("a")),
        Pending("clash", insert("half-written", "taken")),  # its first row must go too
        Pending("last", insert("b")),
        Pending("clash in a transaction", insert_in_transaction("half", "taken")),
        Pending("after", insert_in_transaction("c")),
    ]
    commit_group(conn, lambda: 0.0, group, lambda _pending, exc: exc)
    assert all(p.done for p in group)
    assert [group[i].result() for i in (0, 2, 4)] == [1, 1, 1]
    for failed in (group[1], group[3]):
        with pytest.raises(sqlite3.IntegrityError):
            failed.result()
    assert sorted(k for (k,) in conn.execute("SELECT k FROM t")) == ["a", "b", "c", "taken"]
    assert not conn.in_transaction


def test_a_group_that_succeeds_commits_once_without_savepoints(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)

    def insert(key: str) -> Any:
        def op(c: sqlite3.Connection, _clock: Any) -> str:
            with transaction(c):
                c.execute("INSERT INTO t VALUES (?)", (key,))
            return key

        return op

    group = [Pending(key, insert(key)) for key in "abc"]
    commit_group(conn, lambda: 0.0, group, lambda _pending, exc: exc)
    assert [p.result() for p in group] == ["a", "b", "c"]
    assert [s.split()[0] for s in statements] == ["BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"]


class Recorded:
    """A `GroupCommit` over a plain lock whose commit records the writes it runs, in order."""

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.ran: list[str] = []
        """The writes committed."""
        self.results: list[str] = []
        """What their callers got back."""
        self.writes = GroupCommit(self._acquire, self.lock.release, self._commit)

    async def _acquire(self, _what: str) -> None:
        await self.lock.acquire()

    async def _commit(self, group: list[Pending[Any]]) -> None:
        for pending in group:
            self.ran.append(pending.what)
            pending.settle(pending.what)

    async def write(self, what: str, scope: anyio.CancelScope) -> None:
        with scope:
            self.results.append(await self.writes.run(what, lambda *_: None))


async def test_a_writer_cancelled_before_its_group_is_taken_writes_nothing() -> None:
    recorded = Recorded()

    leader_scope, follower_scope = anyio.CancelScope(), anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorded.write, "leader", leader_scope)
        tg.start_soon(recorded.write, "follower", follower_scope)
        tg.start_soon(recorded.write, "third", anyio.CancelScope())
        await anyio.lowlevel.checkpoint()
        follower_scope.cancel()
    assert recorded.ran == ["leader", "third"]
    assert recorded.results == ["leader", "third"]


async def test_a_write_made_in_a_cancelled_scope_writes_nothing() -> None:
    recorded = Recorded()

    alone = anyio.CancelScope()
    alone.cancel()
    await recorded.write("alone", alone)
    cancelled = anyio.CancelScope()
    cancelled.cancel()
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorded.write, "cancelled leader", cancelled)
        tg.start_soon(recorded.write, "follower", anyio.CancelScope())
    assert recorded.ran == ["follower"]
    assert recorded.results == ["follower"]


async def test_a_leader_cancelled_before_it_takes_the_group_passes_the_lead() -> None:
    recorded = Recorded()

    await recorded.lock.acquire()  # someone else holds the store: the leader waits for it
    leader_scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorded.write, "leader", leader_scope)
        tg.start_soon(recorded.write, "follower", anyio.CancelScope())
        await anyio.sleep(0.01)
        leader_scope.cancel()
        await anyio.sleep(0.01)
        recorded.lock.release()
    assert recorded.ran == ["follower"]
    assert recorded.results == ["follower"]


async def test_writers_behind_a_lock_held_too_long_all_fail_with_what_to_do(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "engine.db", op_timeout=0.2)
    try:
        await store.claim("warm-up", 1, b"fp", ttl=30)
        failures: list[BaseException] = []

        async def claim(call_id: str) -> None:
            try:
                await store.claim(call_id, 1, b"fp", ttl=30)
            except StoreUnavailable as exc:
                failures.append(exc)

        await store._lock.acquire()  # a long operation in a worker thread, say
        try:
            with anyio.fail_after(0.6):  # all at once, not one timeout after another
                async with anyio.create_task_group() as tg:
                    for n in range(5):
                        tg.start_soon(claim, f"call-{n}")
        finally:
            store._lock.release()
        assert len(failures) == 5
        assert len({id(failure) for failure in failures}) == 5  # each caller raises its own
        assert {str(failure) for failure in failures} == {str(failures[0])}
        assert "0.2 s" in str(failures[0])
        assert (await store.claim("call-0", 1, b"fp", ttl=30)).status is Claim.FRESH
    finally:
        await store.aclose()


async def test_a_group_waits_for_another_process_then_commits(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    try:
        await store.claim("warm-up", 1, b"fp", ttl=30)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        statuses: list[Claim] = []

        async def claim(call_id: str) -> None:
            statuses.append((await store.claim(call_id, 1, b"fp", ttl=30)).status)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for n in range(5):
                    tg.start_soon(claim, f"held-{n}")
                await anyio.sleep(0.2)
                assert statuses == []  # nobody learns a result before it is committed
                other.execute("COMMIT")
        other.close()
        assert statuses == [Claim.FRESH] * 5
    finally:
        await store.aclose()


async def test_a_leader_cancelled_after_it_takes_the_group_still_commits_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    try:
        await store.claim("warm-up", 1, b"fp", ttl=30)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the group waits for this process in a worker thread
        statuses: dict[str, Claim] = {}
        leader_scope = anyio.CancelScope()

        async def claim(call_id: str, scope: anyio.CancelScope) -> None:
            with scope:
                statuses[call_id] = (await store.claim(call_id, 1, b"fp", ttl=30)).status

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(claim, "leader", leader_scope)
                tg.start_soon(claim, "follower", anyio.CancelScope())
                await anyio.sleep(0.2)  # the group is taken and waits for the other process
                leader_scope.cancel()
                await anyio.sleep(0.05)
                other.execute("COMMIT")
        other.close()
        assert statuses["follower"] is Claim.FRESH
        again = await store.claim("leader", 1, b"fp", ttl=30)
        assert again.status is Claim.IN_PROGRESS  # the leader's write was committed too
    finally:
        await store.aclose()
