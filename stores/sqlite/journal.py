"""The journal on SQLite (`JournalStore`), and its SQL, each operation a function of a
connection (see `stores.sqlite.schema` for the schema).

A call's journal is its rows in ``journal``, ``seq`` 0 up; each row also carries the call's
listing as of its event and the expiry its write set, so the last row is the call's summary and
says whether it lives. An event adds a row and rewrites none. An expired call written again
starts over: its old rows go first.
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
import os
import sqlite3
from itertools import islice
from operator import itemgetter
from typing import Any

import anyio.lowlevel

from .._checks import check_limit, check_ttl
from .._journal import EncodedEvent, decode_event, encode_batch
from ..base import CallSummary
from .core import QUICK_JOURNAL_BYTES, SQLiteCore
from .schema import Clock, transaction

log = logging.getLogger(__name__)

QUICK_JOURNAL_BATCH = 64
"""Journal events per transaction on the event loop's thread."""


class SQLiteJournal(SQLiteCore):
    """`JournalStore` of `SQLiteStore`, and `trim_journal` for a journal with a size cap."""

    async def append(self, call_id: str, event: dict[str, Any], ttl: float) -> None:
        await self.append_many([(call_id, event)], ttl)

    async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
        """In transactions of up to `QUICK_JOURNAL_BATCH` events on the event loop's thread (a
        batch may be written in part, as on Redis); an event larger than `QUICK_JOURNAL_BYTES`
        in a worker thread."""
        check_ttl(ttl)
        if not items:
            return
        for n, chunk in enumerate(_quick_chunks(encode_batch(items))):
            if n:  # other tasks run between two transactions of a large batch
                await anyio.lowlevel.cancel_shielded_checkpoint()
            write = functools.partial(insert_events, entries=chunk, ttl=ttl)
            await self._write_sized("append", write, sum(len(entry[1]) for entry in chunk))

    async def events(self, call_id: str) -> list[dict[str, Any]]:
        return await self._run(
            "events", lambda conn, clock: read_events(conn, clock, call_id), write=False
        )

    async def trim_journal(self, max_bytes: int) -> int:
        """Keep the file and its write-ahead log within ``max_bytes``: past it, the journal's
        oldest calls are purged until the pages in use are back to 90% of what the log leaves,
        and the freed pages go back to the disk, a step (a MiB) at a time, the other
        operations going between two steps. The file's other records (claims, state, tasks)
        count too but are never purged for it. The number of calls purged."""
        room = trim_room(max_bytes, self._log_bytes())
        used = await self._run("trim_journal", lambda conn, clock: used_bytes(conn), write=False)
        if used <= room:
            return 0
        target = int(room * TRIM_TO)
        purged, empty = 0, False
        while used > target and not empty:
            step, used, empty = await self._run(
                "trim_journal", lambda conn, clock: trim_step(conn, target), write=False
            )
            purged += step
        if empty and used > room and not self._cap_too_small_said:
            self._cap_too_small_said = True
            log.warning(
                "journal_max_bytes (%d bytes) is too small for %r: with no journal left, its "
                "other records (claims, kept responses, spilled state, tasks), which live "
                "state_ttl and are not purged for the cap, still leave it %d bytes past the "
                "cap; raise journal_max_bytes (ENGINE_JOURNAL_MAX_BYTES) above what they "
                "take, about calls/s x (state_ttl + 2 x clock_skew) x a kept response",
                max_bytes,
                self.path,
                used - room,
            )
        return purged

    def _log_bytes(self) -> int:
        """The write-ahead log's size on the disk (0 when there is none)."""
        try:
            return os.path.getsize(f"{self.path}-wal")
        except OSError:
            return 0

    async def calls(
        self,
        *,
        limit: int = 50,
        since: float | None = None,
        target: str | None = None,
        before: float | None = None,
    ) -> list[CallSummary]:
        check_limit(limit)
        return await self._run(
            "calls",
            lambda conn, clock: list_calls(conn, clock, limit, since, target, before),
            write=False,
        )


def _quick_chunks(entries: list[EncodedEvent]) -> list[list[EncodedEvent]]:
    """A journal batch in transactions short enough for the event loop's thread (up to
    `QUICK_JOURNAL_BATCH` events and `QUICK_JOURNAL_BYTES`); an event larger than that alone."""
    chunks: list[list[EncodedEvent]] = []
    chunk: list[EncodedEvent] = []
    size = 0
    for entry in entries:
        if chunk and (
            len(chunk) >= QUICK_JOURNAL_BATCH or size + len(entry[1]) > QUICK_JOURNAL_BYTES
        ):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(entry)
        size += len(entry[1])
    if chunk:
        chunks.append(chunk)
    return chunks


_LAST = (
    "SELECT seq, target, first_ts, last_ts, last_kind, expires_at FROM journal"
    " WHERE call_id = ? ORDER BY seq DESC LIMIT 1"
)
_INSERT = (
    "INSERT INTO journal (call_id, seq, target, first_ts, last_ts, last_kind, expires_at, event)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_FIRST = (
    "INSERT OR IGNORE INTO journal"
    " (call_id, seq, target, first_ts, last_ts, last_kind, expires_at, event)"
    " VALUES (?, 0, ?, ?, ?, ?, ?, ?)"
)
"""A call's first row, unless it has one (live or expired: then the probe of its last row)."""


def insert_events(
    conn: sqlite3.Connection, clock: Clock, entries: list[EncodedEvent], ttl: float
) -> None:
    """Journal events (call id, encoded event, listing fields) in one transaction: each is its
    call's first row if the call has none (the common case: a call journaled in one record),
    else it reads the call's last row (an index probe) and adds the next."""
    with transaction(conn):
        now = clock()
        expires = now + ttl
        for call_id, data, fields in entries:
            first = (call_id, fields.target, fields.ts, fields.ts, fields.kind, expires, data)
            if conn.execute(_INSERT_FIRST, first).rowcount:
                continue  # rows go by whole calls: without a first row, the call had none
            last = conn.execute(_LAST, (call_id,)).fetchone()
            if last is not None and last[5] > now:
                seq, target, first_ts, last_ts, kind, _ = last
                row = (
                    call_id,
                    seq + 1,
                    fields.target if target is None else target,
                    min(first_ts, fields.ts),
                    max(last_ts, fields.ts),
                    fields.kind
                    if fields.kind is not None and (kind is None or fields.ts >= last_ts)
                    else kind,
                    expires,
                    data,
                )
            else:
                if last is not None:
                    conn.execute("DELETE FROM journal WHERE call_id = ?", (call_id,))
                row = (call_id, 0, fields.target, fields.ts, fields.ts, fields.kind, expires, data)
            conn.execute(_INSERT, row)


_EVENTS = (
    "SELECT event FROM journal WHERE call_id = :call_id AND (SELECT expires_at FROM journal"
    " WHERE call_id = :call_id ORDER BY seq DESC LIMIT 1) > :now ORDER BY seq"
)
"""One statement, so one snapshot: the events, if the last one's expiry is still ahead."""


def read_events(conn: sqlite3.Connection, clock: Clock, call_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(_EVENTS, {"call_id": call_id, "now": clock()}).fetchall()
    return [decode_event(bytes(data)) for (data,) in rows]


_TARGETS = """WITH RECURSIVE targets (target) AS (
    SELECT min(target) FROM journal
    UNION ALL
    SELECT (SELECT min(target) FROM journal WHERE target > targets.target) FROM targets
    WHERE targets.target IS NOT NULL
) SELECT target FROM targets"""
"""Each target in the journal, then NULL (for the calls without one yet): one index seek each."""

_WALK = (
    "SELECT call_id, target, first_ts, last_ts, seq + 1, last_kind"
    " FROM journal AS j INDEXED BY journal_by_target"
    " WHERE target IS ? AND last_ts >= ? AND last_ts < ? AND expires_at > ? AND NOT EXISTS"
    " (SELECT 1 FROM journal AS n WHERE n.call_id = j.call_id AND n.seq = j.seq + 1)"
    " ORDER BY last_ts DESC LIMIT ?"
)
"""The live calls of one target, most recently active first: their last rows (the others of a
call, with no later ``last_ts``, are passed over on the way)."""

_LAST_TS = itemgetter(3)


def list_calls(
    conn: sqlite3.Connection,
    clock: Clock,
    limit: int,
    since: float | None,
    target: str | None,
    before: float | None = None,
) -> list[CallSummary]:
    """The walk of `target`, or those of every target merged: as many rows as the limit, and a
    seek per target."""
    now = clock()
    floor = -math.inf if since is None else since
    ceiling = math.inf if before is None else before
    with transaction(conn, "DEFERRED"):  # one snapshot for every walk
        groups = [target] if target is not None else [t for (t,) in conn.execute(_TARGETS)]
        walks = [conn.execute(_WALK, (group, floor, ceiling, now, limit)) for group in groups]
        try:
            rows = list(islice(heapq.merge(*walks, key=_LAST_TS, reverse=True), limit))
        finally:
            for walk in walks:
                walk.close()
    return [
        CallSummary(call_id, tgt, first, last, count, last_kind=kind)
        for call_id, tgt, first, last, count, kind in rows
    ]


TRIM_TO = 0.9
"""A journal past its cap is cut to this share of it, so that it is not trimmed again at once."""
TRIM_STEP_BYTES = 1024 * 1024
"""What one transaction of a trim purges at most. A trim of a large cap purges tens of MiB; in
one transaction it held the database for seconds, past the operations' timeout, and claims and
completions waiting on it failed. A step holds it for milliseconds, and they go between two."""
_OLDEST = (
    "SELECT call_id FROM journal INDEXED BY journal_by_expiry WHERE seq = 0"
    " ORDER BY expires_at LIMIT ?"
)
"""The calls the longest journaled (their first rows expire first)."""


def used_bytes(conn: sqlite3.Connection) -> int:
    """What the file's pages in use hold: its size less the free pages it keeps for reuse."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


def trim_room(max_bytes: int, log_bytes: int) -> int:
    """What the file's pages in use may take of a cap of ``max_bytes``: the write-ahead log,
    ``log_bytes`` beside it on the disk, counts against the cap, up to half of it (a log swollen
    for a while is cut back by the next checkpoint, and must not cost the journal more)."""
    return max_bytes - min(log_bytes, max_bytes // 2)


def trim_step(conn: sqlite3.Connection, target: int) -> tuple[int, int, bool]:
    """One transaction of a trim: the file's oldest calls purged, a chunk at a time, until its
    pages in use are down to ``target``, or about `TRIM_STEP_BYTES` of them are gone, or the
    journal is empty; then the freed pages given back to the disk. The calls purged, the bytes
    in use after, and whether the journal is empty."""
    used = used_bytes(conn)
    floor = max(target, used - TRIM_STEP_BYTES)
    purged = 0
    empty = False
    with transaction(conn):
        while used > floor:
            chunk = 32 + (used - floor) // 2048  # more than a call's share: measured again
            oldest = conn.execute(_OLDEST, (chunk,)).fetchall()
            if not oldest:
                empty = True
                break
            conn.executemany("DELETE FROM journal WHERE call_id = ?", oldest)
            purged += len(oldest)
            used = used_bytes(conn)
    give_space_back(conn)
    return purged, used, empty


def give_space_back(conn: sqlite3.Connection) -> None:
    """Hand the file's free pages back to the disk, shrinking it (with ``auto_vacuum`` on
    ``INCREMENTAL``; a file of another mode keeps them for reuse). Run as a script: a single
    step of the pragma frees one page."""
    conn.executescript("PRAGMA incremental_vacuum;")
