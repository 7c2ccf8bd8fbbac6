"""SQLite's durability setting, and a write-ahead log that gives its space back after a full disk.

``synchronous="full"`` (or ``?synchronous=full`` in the URL) makes every commit sync the log
before it returns, on every connection of the store. A checkpoint that fails (the disk is full),
or a write that finds the disk full, makes the store's ``serve`` try a ``TRUNCATE`` checkpoint
every second until one succeeds: then the log file is cut to nothing, and the disk has its space
back. The real full disk is in tests/faults/test_sqlite_faults.py.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from stores import SQLiteStore, StoreUnavailable, open_store
from stores.sqlite import core as sqlite_store
from stores.sqlite import schema as sql

pytestmark = pytest.mark.anyio

NORMAL, FULL = 1, 2
"""What ``PRAGMA synchronous`` reads."""


@asynccontextmanager
async def serving(store: SQLiteStore) -> AsyncIterator[None]:
    """The store's background work runs in the block, as while a server uses the store."""
    async with anyio.create_task_group() as tg:
        await tg.start(store.serve)
        yield
        tg.cancel_scope.cancel()


def synchronous_of(conn: sqlite3.Connection | None) -> int:
    assert conn is not None
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110 - a file's size, or a worker thread's doing
            await anyio.sleep(0.01)


def log_size(store: SQLiteStore) -> int:
    try:
        return os.path.getsize(store.path + "-wal")
    except FileNotFoundError:
        return 0


async def test_commits_are_synced_on_every_connection_with_synchronous_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[sqlite3.Connection] = []
    connect_quick = sql.connect_quick

    def recorded(path: str, synchronous: str = "normal") -> sqlite3.Connection:
        opened.append(connect_quick(path, synchronous))
        return opened[-1]

    monkeypatch.setattr(sql, "connect_quick", recorded)
    default = SQLiteStore(tmp_path / "default.db")
    full = open_store(f"sqlite:///{tmp_path}/full.db?synchronous=full")
    assert isinstance(full, SQLiteStore) and full.synchronous == "full"
    try:
        assert synchronous_of(default._conn) == synchronous_of(default._quick) == NORMAL
        assert synchronous_of(full._conn) == synchronous_of(full._quick) == FULL
        async with serving(full):  # its checkpoints have a connection of their own
            await full.claim("c1", 1, b"fp", ttl=30)
            assert [synchronous_of(conn) for conn in opened] == [NORMAL, FULL, FULL]
    finally:
        await default.aclose()
        await full.aclose()


@pytest.mark.parametrize("value", ["off", "extra", "", 2])
def test_synchronous_is_normal_or_full(tmp_path: Path, value: object) -> None:
    with pytest.raises(ValueError, match=r"synchronous must be 'normal' .* or 'full'"):
        SQLiteStore(tmp_path / "calls.db", synchronous=value)  # type: ignore[arg-type]


async def test_a_failed_checkpoint_is_retried_until_the_log_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 20)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_RETRY", 0.05)
    disk_full = True
    tried: list[str] = []
    checkpoint = sql.checkpoint

    def failing(conn: sqlite3.Connection, mode: str = "PASSIVE") -> int:
        tried.append(mode)
        if disk_full:
            raise sqlite3.OperationalError("database or disk is full")
        return checkpoint(conn, mode)

    monkeypatch.setattr(sql, "checkpoint", failing)
    store = SQLiteStore(tmp_path / "calls.db")
    try:
        async with serving(store):
            for n in range(40):
                await store.claim(f"call-{n}", 1, b"fp", ttl=30)
            await until(lambda: tried.count("TRUNCATE") >= 3)  # tried again, and again
            assert log_size(store) > 0
            disk_full = False  # room again: no write needed for the log to be cut back
            await until(lambda: log_size(store) == 0)
            attempts = len(tried)
            await anyio.sleep(0.2)
            assert len(tried) == attempts  # and then no more tries
            assert (await store.claim("call-0", 1, b"fp", ttl=30)).status.value == "in_progress"
    finally:
        await store.aclose()
    warnings = [r.getMessage() for r in caplog.records if r.name == "stores.sqlite.core"]
    assert warnings[0].startswith("SQLite checkpoint failed, the log grows meanwhile")
    assert warnings[1:] == [
        f"SQLite checkpoint done: the log of {store.path!r} is cut back to nothing"
    ]


async def test_a_write_that_finds_the_disk_full_has_the_log_cut_back_once_there_is_room(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "calls.db")

    def cap(pages: int | None) -> None:
        """The file may grow to ``pages`` at most (``None``: its size now), as a full disk."""
        for conn in (store._conn, store._quick):
            assert conn is not None
            limit = pages or conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {limit}")

    try:
        async with serving(store):
            cap(None)
            with pytest.raises(StoreUnavailable, match="full"):
                for n in range(1000):
                    await store.put_blob(f"call-{n}", "state", bytes(16_384), ttl=30)
            assert log_size(store) > 0
            cap(1_000_000)
            await until(lambda: log_size(store) == 0)
            await store.ping()
    finally:
        await store.aclose()
