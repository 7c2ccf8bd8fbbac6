"""Blobs on SQLite (`BlobStore`): state kept by reference, one row per ``(call, blob)``."""

from __future__ import annotations

import sqlite3

from .._checks import check_call_id, check_ttl
from .core import SQLiteCore
from .schema import Clock


class SQLiteBlobs(SQLiteCore):
    """`BlobStore` of `SQLiteStore`: blobs can be large, so they are read and written in a
    worker thread."""

    async def put_blob(self, call_id: str, blob_id: str, data: bytes, ttl: float) -> None:
        check_call_id(call_id)
        check_ttl(ttl)
        key, data = (call_id, blob_id), bytes(data)
        await self._run(
            "put_blob", lambda conn, clock: write_blob(conn, clock, key, data, ttl), write=True
        )

    async def get_blob(self, call_id: str, blob_id: str) -> bytes | None:
        key = (call_id, blob_id)
        return await self._run(
            "get_blob", lambda conn, clock: read_blob(conn, clock, key), write=False
        )


def write_blob(
    conn: sqlite3.Connection, clock: Clock, key: tuple[str, str], data: bytes, ttl: float
) -> None:
    conn.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?)", (*key, data, clock() + ttl))


def read_blob(conn: sqlite3.Connection, clock: Clock, key: tuple[str, str]) -> bytes | None:
    row = conn.execute(
        "SELECT data FROM blobs WHERE call_id = ? AND blob_id = ? AND expires_at > ?",
        (*key, clock()),
    ).fetchone()
    return None if row is None else bytes(row[0])
