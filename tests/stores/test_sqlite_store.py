"""SQLiteStore beyond the shared contract: the file outlives the process and is shared."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import anyio
import msgpack
import pytest

from stores import CallSummary, Claim, ClaimResult, SQLiteStore, StoreUnavailable, TaskRow
from stores.sqlite import core as sqlite_store
from stores.sqlite import journal as journal_sql
from stores.sqlite import schema as sql
from tests.stores.fake_clock import FakeClock

pytestmark = pytest.mark.anyio

READER = """
import json, sys
import anyio
from stores import SQLiteStore

async def main(path, call_id):
    store = SQLiteStore(path)
    try:
        events = await store.events(call_id)
        calls = [c.call_id for c in await store.calls()]
        claim = await store.claim(call_id, 1, b"child", ttl=30)
        print(json.dumps({"events": events, "calls": calls, "claim": claim.status.value}))
    finally:
        await store.aclose()

anyio.run(main, *sys.argv[1:])
"""


async def test_everything_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    await store.put_blob("c1", "state", b"kept", ttl=60)
    await store.claim("c1", 1, b"fp", ttl=60)
    await store.complete("c1", 1, b"fp", b"response", ttl=60)
    await store.claim("c1", 2, b"fp", ttl=60)
    await store.append("c1", {"ts": 5.0, "target": "tool", "kind": "start"}, ttl=60)
    await store.aclose()

    store = SQLiteStore(path)
    try:
        assert await store.get_blob("c1", "state") == b"kept"
        assert await store.claim("c1", 1, b"fp", ttl=60) == ClaimResult(
            Claim.DUPLICATE, b"response"
        )
        assert await store.claim("c1", 2, b"fp", ttl=60) == ClaimResult(Claim.IN_PROGRESS)
        assert await store.events("c1") == [{"ts": 5.0, "target": "tool", "kind": "start"}]
        assert await store.calls() == [CallSummary("c1", "tool", 5.0, 5.0, 1, last_kind="start")]
    finally:
        await store.aclose()


async def test_another_process_reads_the_journal_while_the_server_runs(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    try:
        await store.append("c1", {"ts": 1.0, "target": "tool", "args": {"q": "x"}}, ttl=60)
        await store.append("c1", {"ts": 2.0, "kind": "done"}, ttl=60)
        await store.claim("c1", 1, b"parent", ttl=60)
        result = await anyio.run_process(
            [sys.executable, "-c", READER, str(path), "c1"], check=False
        )
        assert result.returncode == 0, result.stderr.decode()
        assert json.loads(result.stdout) == {
            "events": [
                {"ts": 1.0, "target": "tool", "args": {"q": "x"}},
                {"ts": 2.0, "kind": "done"},
            ],
            "calls": ["c1"],
            "claim": "conflict",  # the claim made here is visible there
        }
        await store.append("c1", {"ts": 3.0}, ttl=60)  # and the server keeps writing
        assert len(await store.events("c1")) == 3
    finally:
        await store.aclose()


async def test_runs_in_wal_mode(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    await store.aclose()
    with sqlite3.connect(tmp_path / "engine.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_concurrent_claims_from_two_connections(tmp_path: Path) -> None:
    a, b = SQLiteStore(tmp_path / "engine.db"), SQLiteStore(tmp_path / "engine.db")
    results: list[Claim] = []

    async def attempt(store: SQLiteStore) -> None:
        results.append((await store.claim("hot", 1, b"fp", ttl=30)).status)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(attempt, a if i % 2 else b)
    finally:
        await a.aclose()
        await b.aclose()
    assert results.count(Claim.FRESH) == 1
    assert results.count(Claim.IN_PROGRESS) == 99


async def test_a_claim_waits_for_another_process_without_stopping_the_event_loop(
    tmp_path: Path,
) -> None:
    """Round operations run on the event loop's thread; one that finds the database held by
    someone else waits in a worker thread, so the loop goes on meanwhile."""
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    try:
        await store.claim("warm", 1, b"fp", ttl=30)  # the first write also purges
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            with anyio.fail_after(5):
                async with anyio.create_task_group() as claims:
                    claims.start_soon(store.claim, "held", 1, b"fp", 30)
                    await anyio.sleep(0.3)
                    assert ticks >= 10  # the loop ran while the claim waited
                    other.execute("COMMIT")
            tg.cancel_scope.cancel()
        other.close()
        assert (await store.claim("held", 1, b"fp", ttl=30)).status is Claim.IN_PROGRESS
    finally:
        await store.aclose()


def log_salt(path: Path) -> bytes:
    """The first salt of a write-ahead log's header: it changes each time the log starts over."""
    with open(path, "rb") as log:
        return log.read(24)[16:20]


async def test_the_log_starts_over_under_continuous_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 writers that never pause: the write-ahead log must still start over now and then
    (else it grows with every write), whether the store's `serve` checkpoints beside the
    writes or the writes do it in turn. Each start over gives the log header a new salt."""
    monkeypatch.setattr(sqlite_store, "CATCH_UP_FRAMES", 64)

    async def log_starts(name: str, every: int, serve: bool) -> int:
        monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", every)
        store = SQLiteStore(tmp_path / name)
        salts: set[bytes] = set()

        async def writer(w: int) -> None:
            for n in range(60):
                await store.claim(f"call-{w}-{n}", 1, b"fp" * 8, ttl=30)
                await store.complete(f"call-{w}-{n}", 1, b"fp" * 8, b"r" * 512, ttl=30)
                salts.add(log_salt(tmp_path / f"{name}-wal"))

        try:
            async with anyio.create_task_group() as tg:
                if serve:
                    await tg.start(store.serve)
                async with anyio.create_task_group() as writers:
                    for w in range(16):
                        writers.start_soon(writer, w)
                tg.cancel_scope.cancel()
        finally:
            await store.aclose()
        return len(salts)

    assert await log_starts("unchecked.db", 10**9, serve=False) == 1
    assert await log_starts("served.db", 50, serve=True) >= 3
    assert await log_starts("alone.db", 50, serve=False) >= 3


async def test_a_second_serve_of_one_store_leaves_checkpoints_to_the_first(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(store.serve)
            with anyio.fail_after(5):
                await store.serve()  # returns at once: the first one checkpoints
            await store.claim("call", 1, b"fp", ttl=30)
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


async def test_a_batch_larger_than_one_quick_transaction_is_written_whole_and_in_order(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    big = "x" * (sqlite_store.QUICK_JOURNAL_BYTES + 1)  # an event that goes to a worker thread
    items = [("one", {"n": n}) for n in range(150)] + [("two", {"n": 0, "big": big})]
    items += [("two", {"n": n}) for n in range(1, 3)]
    try:
        await store.append_many(items, ttl=30)
        assert [e["n"] for e in await store.events("one")] == list(range(150))
        assert [e["n"] for e in await store.events("two")] == [0, 1, 2]
        assert {c.call_id: c.events for c in await store.calls()} == {"one": 150, "two": 3}
    finally:
        await store.aclose()


async def test_a_cancelled_claim_does_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    try:
        await store.claim("other", 1, b"fp", ttl=30)  # the first write purges, in a thread
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.claim("call", 1, b"fp", ttl=30)
        assert (await store.claim("call", 1, b"fp", ttl=30)).status is Claim.FRESH
    finally:
        await store.aclose()


async def test_expired_rows_are_purged_once_the_purge_interval_has_passed(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "engine.db"

    def rows() -> list[int]:
        with closing(sqlite3.connect(path)) as conn:
            tables = ("blobs", "rounds", "calls", "journal")
            return [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]

    store = SQLiteStore(path, purge_interval=60, clock=clock.now)
    try:
        await store.put_blob("c1", "b", b"x", ttl=10)  # the first write purges: next in 60 s
        await store.claim("c1", 1, b"fp", ttl=10)
        await store.append("c1", {"ts": 1.0}, ttl=10)
        clock.advance(30)
        await store.put_blob("c2", "b", b"y", ttl=300)
        assert rows() == [2, 1, 1, 1]  # expired, but the purge is not due yet
        clock.advance(30)
        await store.put_blob("c3", "b", b"z", ttl=300)  # a write after the interval purges
        assert rows() == [2, 0, 0, 0]
    finally:
        await store.aclose()


async def test_an_expired_call_written_again_drops_its_old_rows(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path, purge_interval=10**6, clock=clock.now)  # no purge after the first
    try:
        await store.append_many([("c1", {"n": n}) for n in range(3)], ttl=10)
        clock.advance(11)
        await store.append("c1", {"n": 3}, ttl=10)
        assert await store.events("c1") == [{"n": 3}]
    finally:
        await store.aclose()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT seq FROM journal WHERE call_id = 'c1'").fetchall() == [(0,)]


def _steps(conn: sqlite3.Connection, read: Callable[[], object]) -> int:
    """How much work SQLite does for `read`, in hundreds of virtual machine instructions."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 100)
    try:
        read()
    finally:
        conn.set_progress_handler(None, 100)
    return steps


async def test_short_listings_and_purges_read_a_few_rows_of_a_long_journal(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path)
    try:
        for batch in range(40):  # 2,000 calls of 3 events over 4 targets
            calls = [
                (f"call-{batch}-{i}", float(batch * 100 + i), f"tool{i % 4}") for i in range(50)
            ]
            items = [(c, {"ts": ts + n, "target": t}) for c, ts, t in calls for n in range(3)]
            await store.append_many(items, ttl=60)
    finally:
        await store.aclose()
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        every_call = _steps(conn, lambda: conn.execute("SELECT count(*) FROM calls").fetchone())
        newest = journal_sql.list_calls(conn, time.time, 5, None, None)
        assert [c.call_id for c in newest] == [f"call-39-{i}" for i in range(49, 44, -1)]
        reads = [
            lambda: journal_sql.list_calls(conn, time.time, 5, None, None),
            lambda: journal_sql.list_calls(conn, time.time, 5, None, "tool1"),
            lambda: journal_sql.list_calls(conn, time.time, 5, 3000.0, None),
            lambda: sql.purge(conn, time.time),
        ]
        for read in reads:
            assert _steps(conn, read) * 20 < every_call


V1_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE blobs (
    call_id TEXT NOT NULL, blob_id TEXT NOT NULL, data BLOB NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (call_id, blob_id)
) WITHOUT ROWID;
CREATE TABLE rounds (
    call_id TEXT NOT NULL, round_no INTEGER NOT NULL, fingerprint BLOB NOT NULL,
    response BLOB, expires_at REAL NOT NULL, PRIMARY KEY (call_id, round_no)
) WITHOUT ROWID;
CREATE TABLE calls (
    call_id TEXT PRIMARY KEY, target TEXT, first_ts REAL NOT NULL, last_ts REAL NOT NULL,
    events INTEGER NOT NULL, last_kind TEXT, expires_at REAL NOT NULL
);
CREATE INDEX calls_by_last_ts ON calls (last_ts);
CREATE INDEX calls_by_target ON calls (target, last_ts);
CREATE TABLE journal (
    call_id TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL,
    PRIMARY KEY (call_id, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""
"""The schema version 1 files were created with, as the first release wrote it."""
V1_ROUNDS = ["call_id", "round_no", "fingerprint", "response", "expires_at"]
V2_ROUNDS = [*V1_ROUNDS, "owner"]
OLD_EVENT = {"round": 1, "kind": "x", "ts": 1.0, "target": "tool"}


def _version_1_file(path: Path) -> None:
    """A version-1 file with a blob, a completed round, an in-progress round and a journaled
    event in it."""
    expires = time.time() + 60
    conn = sqlite3.connect(path)
    try:
        conn.executescript(V1_SCHEMA)
        with conn:
            conn.execute("INSERT INTO blobs VALUES ('c1', 'state', ?, ?)", (b"old", expires))
            conn.execute("INSERT INTO rounds VALUES ('c1', 1, ?, ?, ?)", (b"fp", b"done", expires))
            conn.execute("INSERT INTO rounds VALUES ('c1', 2, ?, NULL, ?)", (b"fp", expires))
            now = time.time()
            conn.execute(
                "INSERT INTO calls VALUES ('c1', 'tool', ?, ?, 1, 'x', ?)", (now, now, expires)
            )
            conn.execute("INSERT INTO journal VALUES ('c1', 0, ?)", (msgpack.packb(OLD_EVENT),))
    finally:
        conn.close()


def _schema_of(path: Path) -> tuple[int, list[str]]:
    with closing(sqlite3.connect(path)) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        columns = [row[1] for row in conn.execute("PRAGMA table_info(rounds)")]
        (journal,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'journal'").fetchone()
    assert ("WITHOUT ROWID" in journal) is (version < 4), journal
    return version, columns


async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    _version_1_file(path)
    assert _schema_of(path) == (1, V1_ROUNDS)

    store = SQLiteStore(path)
    try:
        assert _schema_of(path) == (6, V2_ROUNDS)
        assert await store.get_blob("c1", "state") == b"old"
        assert await store.events("c1") == [OLD_EVENT]  # version 4 moved the journal
        await store.append("c1", {"round": 2, "kind": "y", "ts": 2.0}, ttl=60)
        assert [e["kind"] for e in await store.events("c1")] == ["x", "y"]
        task = TaskRow("t1", 1, "working", "slow_compute", 1.0, 1.0, b"record")
        assert await store.put_task(
            task, ttl=60, due_in=None
        )  # version 3 added the tasks, 6 fences
        assert await store.get_task("t1") == task
        done = ClaimResult(Claim.DUPLICATE, b"done")
        assert await store.claim("c1", 1, b"fp", ttl=60, owner=b"me") == done
        # The old in-progress claim has no owner: a release with one keeps it, without drops it.
        await store.release("c1", 2, b"fp", owner=b"me")
        assert await store.claim("c1", 2, b"fp", ttl=60) == ClaimResult(Claim.IN_PROGRESS)
        await store.release("c1", 2, b"fp")
        assert await store.claim("c1", 2, b"fp", ttl=60, owner=b"me") == ClaimResult(Claim.FRESH)
        await store.release("c1", 2, b"fp", owner=b"someone else")
        assert await store.claim("c1", 2, b"fp", ttl=60) == ClaimResult(Claim.IN_PROGRESS)
        await store.release("c1", 2, b"fp", owner=b"me")
        assert await store.claim("c1", 2, b"fp", ttl=60) == ClaimResult(Claim.FRESH)
    finally:
        await store.aclose()

    store = SQLiteStore(path)  # a migrated file opens as a current one
    try:
        assert await store.claim("c1", 1, b"fp", ttl=60) == ClaimResult(Claim.DUPLICATE, b"done")
    finally:
        await store.aclose()
    assert _schema_of(path) == (6, V2_ROUNDS)


async def test_two_stores_opening_a_version_1_file_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    _version_1_file(path)
    stores = [SQLiteStore(path), SQLiteStore(path)]  # the second finds it done
    try:
        for store in stores:
            assert (await store.claim("c1", 3, b"fp", ttl=60, owner=b"me")).status in (
                Claim.FRESH,
                Claim.IN_PROGRESS,
            )
    finally:
        for store in stores:
            await store.aclose()
    assert _schema_of(path) == (6, V2_ROUNDS)


V4_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE blobs (
    call_id TEXT NOT NULL, blob_id TEXT NOT NULL, data BLOB NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (call_id, blob_id)
) WITHOUT ROWID;
CREATE TABLE rounds (
    call_id TEXT NOT NULL, round_no INTEGER NOT NULL, fingerprint BLOB NOT NULL,
    response BLOB, expires_at REAL NOT NULL, owner BLOB, PRIMARY KEY (call_id, round_no)
) WITHOUT ROWID;
CREATE TABLE calls (
    call_id TEXT PRIMARY KEY, target TEXT, first_ts REAL NOT NULL, last_ts REAL NOT NULL,
    events INTEGER NOT NULL, last_kind TEXT, expires_at REAL NOT NULL
);
CREATE INDEX calls_by_last_ts ON calls (last_ts);
CREATE INDEX calls_by_target ON calls (target, last_ts);
CREATE TABLE journal (
    call_id TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL, PRIMARY KEY (call_id, seq)
);
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL,
    target TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL, record BLOB NOT NULL,
    expires_at REAL NOT NULL, due REAL
);
CREATE INDEX tasks_by_due ON tasks (due) WHERE due IS NOT NULL;
CREATE INDEX tasks_by_created ON tasks (created);
PRAGMA user_version = 4;
"""
"""The schema of version 4, as its release created files."""
V4_EVENTS = [
    {"ts": 1.0, "target": "tool", "kind": "start"},
    {"ts": 3.0},
    {"ts": 2.0, "kind": "done"},
]


def _version_4_file(path: Path) -> None:
    """A version-4 file listing a call of three events (its journal also holds a row past that
    count, from an earlier life of the call), one of a single event, and an expired one."""
    now = time.time()
    listed = [
        ("c1", "tool", 1.0, 3.0, 3, "done", now + 60),
        ("c2", "other", 2.0, 2.0, 1, None, now + 60),
        ("gone", "tool", 4.0, 4.0, 1, "done", now - 1),
    ]
    events = [*V4_EVENTS, {"ts": 0.5, "kind": "from an earlier life"}]
    journal = [("c1", seq, msgpack.packb(event)) for seq, event in enumerate(events)]
    journal += [("c2", 0, msgpack.packb({"ts": 2.0})), ("gone", 0, msgpack.packb({"ts": 4.0}))]
    conn = sqlite3.connect(path)
    try:
        conn.executescript(V4_SCHEMA)
        with conn:
            conn.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)", listed)
            conn.executemany("INSERT INTO journal VALUES (?, ?, ?)", journal)
    finally:
        conn.close()


async def test_a_version_4_file_keeps_its_journals_and_listing(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    _version_4_file(path)
    store = SQLiteStore(path)
    try:
        assert _schema_of(path) == (6, V2_ROUNDS)
        assert await store.events("c1") == V4_EVENTS
        assert await store.events("c2") == [{"ts": 2.0}]
        assert await store.events("gone") == []
        c1 = CallSummary("c1", "tool", 1.0, 3.0, 3, last_kind="done")
        c2 = CallSummary("c2", "other", 2.0, 2.0, 1)
        assert await store.calls() == [c1, c2]
        assert await store.calls(target="other") == [c2]
        assert await store.calls(since=2.5, limit=1) == [c1]
        await store.append("c1", {"ts": 5.0, "kind": "again"}, ttl=60)
        assert await store.events("c1") == [*V4_EVENTS, {"ts": 5.0, "kind": "again"}]
        assert await store.calls(target="tool") == [
            CallSummary("c1", "tool", 1.0, 5.0, 4, last_kind="again")
        ]
        await store.append("gone", {"ts": 6.0}, ttl=60)  # expired: it starts over
        assert await store.events("gone") == [{"ts": 6.0}]
        assert (await store.calls())[0] == CallSummary("gone", None, 6.0, 6.0, 1)
    finally:
        await store.aclose()
    with closing(sqlite3.connect(path)) as conn:  # the view shows what the table did
        listed = conn.execute("SELECT call_id, events FROM calls ORDER BY call_id").fetchall()
    assert listed == [("c1", 4), ("c2", 1), ("gone", 1)]


async def test_a_new_file_gets_the_current_schema(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "engine.db")
    await store.aclose()
    assert _schema_of(tmp_path / "engine.db") == (6, V2_ROUNDS)


async def test_a_file_from_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreUnavailable, match="schema version 99"):
        SQLiteStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # the next version, unknown to this engine
    with pytest.raises(StoreUnavailable, match="schema version 7"):
        SQLiteStore(path)


async def test_an_unusable_path_says_what_to_check(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot open SQLite store"):
        SQLiteStore(tmp_path / "file" / "engine.db")


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL does not wait for another process's lock: opening retries."""
    import subprocess
    import sys

    path = tmp_path / "fresh.db"
    code = (
        "import anyio, sys\n"
        "from stores import SQLiteStore\n"
        "async def main():\n"
        "    store = SQLiteStore(sys.argv[1])\n"
        "    await store.ping()\n"
        "    await store.aclose()\n"
        "anyio.run(main)\n"
    )
    for _ in range(3):
        path.unlink(missing_ok=True)
        runs = [
            subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE)
            for _ in range(4)
        ]
        for run in runs:
            _, err = run.communicate(timeout=30)
            assert run.returncode == 0, err.decode()
