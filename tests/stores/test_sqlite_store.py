"""SQLiteStore beyond the shared contract: the file outlives the process and is shared."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest

from stores import CallSummary, Claim, ClaimResult, SQLiteStore, StoreUnavailable

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


async def test_expired_rows_are_purged(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    store = SQLiteStore(path, purge_interval=0)
    try:
        await store.put_blob("c1", "b", b"x", ttl=0.1)
        await store.claim("c1", 1, b"fp", ttl=0.1)
        await store.append("c1", {"ts": 1.0}, ttl=0.1)
        await anyio.sleep(0.2)
        await store.put_blob("c2", "b", b"y", ttl=30)  # any write purges
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        for table, rows in [("blobs", 1), ("rounds", 0), ("calls", 0), ("journal", 0)]:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (rows,), table


async def test_a_file_from_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreUnavailable, match="schema version 99"):
        SQLiteStore(path)


async def test_an_unusable_path_says_what_to_check(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot open SQLite store"):
        SQLiteStore(tmp_path / "file" / "engine.db")
