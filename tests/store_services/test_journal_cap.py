"""The journal within ``journal_max_bytes``: past it, the oldest calls go first, counted and said
once; the SQLite file gives the space back."""

import logging
import os
import secrets
import sqlite3
from pathlib import Path

import anyio
import pytest

from engine import MCPServer
from engine.debug.journal import load_call
from engine.testing import Client
from stores import MemoryStore, SQLiteStore
from stores.sqlite import journal as journal_sql
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

CAP = 2 * 1024 * 1024


def note() -> str:
    """About a kilobyte that does not compress, as the journal records it."""
    return secrets.token_hex(512)


def note_server(store: MemoryStore | SQLiteStore, cap: int) -> MCPServer:
    mcp = MCPServer("Notes", keys=[KEY], store=store, journal_max_bytes=cap)

    @mcp.tool()
    async def keep(note: str, n: int) -> str:
        return f"kept note {n}"

    return mcp


async def test_a_sqlite_journal_past_its_cap_keeps_the_file_within_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "calls.db"
    store = SQLiteStore(path)
    mcp = note_server(store, CAP)
    calls = 4000  # about 6 MB of journal: three times the cap
    async with mcp.running(), Client(mcp) as client:
        for n in range(calls):
            await client.call_tool("keep", {"note": note(), "n": n})
            if n % 100 == 0:  # in process, calls outrun the journal writers: let them write
                await anyio.sleep(0.02)
    purged = mcp.core.metrics.value("engine_journal_calls_purged_total")
    # what the writers dropped, behind the loop
    dropped = mcp.core.metrics.value("engine_journal_events_dropped_total")
    assert calls // 3 < purged < calls - dropped
    kept = await store.calls(limit=calls)
    assert len(kept) == calls - purged - dropped
    newest = await load_call(store, kept[0].call_id, keys=[KEY])
    assert newest.arguments is not None and newest.arguments["n"] > kept[-1].events  # opens
    await store.aclose()
    assert os.path.getsize(path) <= 1.1 * CAP
    lines = [r for r in caplog.records if "journal_max_bytes" in r.getMessage()]
    assert len(lines) == 1 and r"engine_journal_calls_purged_total" in lines[0].getMessage()


async def test_the_write_ahead_log_counts_against_a_sqlite_cap(tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    store = SQLiteStore(path)
    mcp = note_server(store, 0)  # no cap while the journal fills
    async with mcp.running(), Client(mcp) as client:
        for n in range(1500):
            await client.call_tool("keep", {"note": note(), "n": n})
    # Stopped, so no checkpoint of the server's changes the log between its measure and the trim.
    log = os.path.getsize(f"{path}-wal")
    with sqlite3.connect(path) as reader:
        used = journal_sql.used_bytes(reader)
    reader.close()
    assert log > 256 * 1024  # the log is a part of the disk space worth counting
    cap = used + log // 2  # the pages in use fit, the pages and the log do not
    assert await store.trim_journal(cap) > 0
    with sqlite3.connect(path) as reader:  # the log counts up to half the cap
        assert journal_sql.used_bytes(reader) + min(log, cap // 2) <= cap
    reader.close()
    await store.aclose()


async def test_a_sqlite_trim_goes_a_step_at_a_time_and_other_operations_go_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "calls.db")
    mcp = note_server(store, 0)
    async with mcp.running(), Client(mcp) as client:
        for n in range(1000):
            await client.call_tool("keep", {"note": note(), "n": n})
        await anyio.sleep(0.2)  # the journal writers' last batch
    await store.put_blob("call-x", "state", b"state", 600)
    monkeypatch.setattr(journal_sql, "TRIM_STEP_BYTES", 64 * 1024)
    seen: list[str] = []
    step = journal_sql.trim_step

    def counted(conn: sqlite3.Connection, target: int) -> tuple[int, int, bool]:
        seen.append("step")
        return step(conn, target)

    monkeypatch.setattr(journal_sql, "trim_step", counted)
    purged = 0

    async def trim() -> None:
        nonlocal purged
        purged = await store.trim_journal(512 * 1024)  # about a third of what it holds
        seen.append("done")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(trim)
        while "done" not in seen:
            assert await store.get_blob("call-x", "state") == b"state"
            seen.append("read")
    await store.aclose()
    assert 300 < purged < 1000
    steps = [n for n, what in enumerate(seen) if what == "step"]
    assert len(steps) > 5
    assert "read" in seen[steps[0] : steps[-1]]  # reads went between two steps


async def test_a_sqlite_cap_below_the_records_it_cannot_purge_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "calls.db"
    store = SQLiteStore(path)
    mcp = note_server(store, 0)
    async with mcp.running(), Client(mcp) as client:
        for n in range(50):
            await client.call_tool("keep", {"note": note(), "n": n})
        await anyio.sleep(0.2)  # the journal writers' last batch
    for n in range(40):  # spilled state: lives state_ttl, never purged for the cap
        await store.put_blob(f"call-{n}", "state", secrets.token_bytes(8192), 600)
    cap = 256 * 1024  # below the blobs alone
    assert await store.trim_journal(cap) == 50
    assert await store.trim_journal(cap) == 0  # nothing left to purge
    assert await store.get_blob("call-0", "state") is not None
    await store.aclose()
    lines = [r.getMessage() for r in caplog.records if "too small" in r.getMessage()]
    assert len(lines) == 1
    assert "journal_max_bytes (262144 bytes)" in lines[0] and "state_ttl" in lines[0]


async def test_a_memory_journal_past_its_cap_drops_its_oldest_calls() -> None:
    store = MemoryStore()
    mcp = note_server(store, 256 * 1024)
    async with mcp.running(), Client(mcp) as client:
        for n in range(600):
            await client.call_tool("keep", {"note": note(), "n": n})
    kept = await store.calls(limit=1000)
    assert 100 < len(kept) < 600
    assert await store.trim_journal(256 * 1024) == 0  # within it now
    oldest = min(kept, key=lambda c: c.first_ts)
    arguments = (await load_call(store, oldest.call_id, keys=[KEY])).arguments
    assert arguments["n"] == 600 - len(kept)  # the newest calls are those kept


async def test_no_cap_purges_nothing(tmp_path: Path) -> None:
    store = MemoryStore()
    mcp = note_server(store, 0)
    async with mcp.running(), Client(mcp) as client:
        for n in range(300):
            await client.call_tool("keep", {"note": note(), "n": n})
    assert len(await store.calls(limit=1000)) == 300
    assert mcp.core.metrics.value("engine_journal_calls_purged_total") == 0


def test_a_cap_too_small_to_hold_a_few_calls_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"journal_max_bytes .* at least 65536"):
        MCPServer("Notes", keys=[KEY], store=MemoryStore(), journal_max_bytes=1000)


async def test_a_file_made_before_it_could_give_space_back_is_switched_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:  # as an earlier engine made it: no auto_vacuum
        old.execute("PRAGMA journal_mode = WAL")
        old.execute("CREATE TABLE filler (data BLOB)")
    old.close()
    caplog.set_level(logging.INFO, logger="stores")
    store = SQLiteStore(path)
    await store.aclose()
    with sqlite3.connect(path) as reopened:
        assert reopened.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # incremental
    reopened.close()
    assert any("give space back" in r.getMessage() for r in caplog.records)
