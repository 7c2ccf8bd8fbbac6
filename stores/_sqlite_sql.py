"""The SQL side of `SQLiteStore`: schema, and each operation as a function of a connection.

Each function runs on one of the store's connections (see `stores.sqlite`); one that decides
what has expired reads the time from the store's `Clock`. Writes that read first are
``BEGIN IMMEDIATE`` transactions, so they are atomic across processes too.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._claims import FRESH, claim_found
from ._journal import EncodedEvent, decode_event
from .base import CallSummary, ClaimResult, StoreUnavailable

Clock = Callable[[], float]
"""The store's time in seconds, read when an operation runs (inside its transaction)."""

WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes the write-ahead log file is cut back to when it starts over (it is reused, not
shrunk, otherwise)."""

SCHEMA_VERSION = 4
"""1: the first schema. 2: ``rounds.owner``, the token of the claim that created the record.
3: ``tasks``, the records of calls that run in the background. 4: ``journal`` as a rowid table:
events of a kilobyte or more stay in its leaf pages, where a table without rowid gives each its
own overflow page."""

_TASKS = (
    """CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL,
        target TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL, record BLOB NOT NULL,
        expires_at REAL NOT NULL, due REAL
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_by_due ON tasks (due) WHERE due IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS tasks_by_created ON tasks (created)",
)

_JOURNAL = """CREATE TABLE IF NOT EXISTS {name} (
    call_id TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL, PRIMARY KEY (call_id, seq)
)"""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS blobs (
        call_id TEXT NOT NULL, blob_id TEXT NOT NULL, data BLOB NOT NULL,
        expires_at REAL NOT NULL, PRIMARY KEY (call_id, blob_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS rounds (
        call_id TEXT NOT NULL, round_no INTEGER NOT NULL, fingerprint BLOB NOT NULL,
        response BLOB, expires_at REAL NOT NULL, owner BLOB, PRIMARY KEY (call_id, round_no)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS calls (
        call_id TEXT PRIMARY KEY, target TEXT, first_ts REAL NOT NULL, last_ts REAL NOT NULL,
        events INTEGER NOT NULL, last_kind TEXT, expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS calls_by_last_ts ON calls (last_ts)",
    "CREATE INDEX IF NOT EXISTS calls_by_target ON calls (target, last_ts)",
    _JOURNAL.format(name="journal"),
    *_TASKS,
)
"""Applied in one transaction on first open (``executescript`` would commit half-way)."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE rounds ADD COLUMN owner BLOB",),
    2: _TASKS,
    3: (
        _JOURNAL.format(name="journal_v4"),
        "INSERT INTO journal_v4 SELECT call_id, seq, event FROM journal",
        "DROP TABLE journal",
        "ALTER TABLE journal_v4 RENAME TO journal",
    ),
}
"""Statements that bring a file of version N to N + 1, applied in place on open."""


@contextmanager
def transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
    """IMMEDIATE takes the write lock up front, so read-then-write cannot interleave. Within a
    transaction already open (a group commit's), part of it: the group undoes what a write that
    raised had done (`stores._sqlite_group.commit_group`)."""
    if conn.in_transaction:
        yield
        return
    conn.execute(f"BEGIN {mode}")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
SIDE_FILES = ("-wal", "-shm")


def make_private(path: str) -> bool:
    """Create the database file, and any missing parent directories, for the owner only (files
    0600, directories 0700, whatever the umask), before SQLite creates it 0644. True when the
    file was created here; an existing file (or directory) keeps its mode."""
    make_private_directories(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
    return True


def make_private_directories(path: str) -> None:
    """The missing parent directories of `path`, created 0700 whatever the umask."""
    missing: list[str] = []
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode is its own
        os.chmod(directory, PRIVATE_DIR)


def private_side_files(path: str) -> None:
    """SQLite gives -wal and -shm the database file's mode; make sure of it for a private
    database file (no group or other bits), whatever the SQLite build or umask."""
    if os.stat(path).st_mode & 0o077:
        return  # a file made readable by others keeps its mode, and so do its side files
    for suffix in SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path + suffix, PRIVATE_FILE)


def connect(path: str, op_timeout: float) -> sqlite3.Connection:
    """Open in WAL mode with the schema in place, migrating an older file in place.

    A file of an unknown (newer) schema is refused.
    """
    deadline = time.monotonic() + op_timeout
    while True:
        conn = sqlite3.connect(
            path, timeout=op_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # durable across crashes of this process
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            if _schema_version(conn, path) != SCHEMA_VERSION:
                with transaction(conn):  # re-read: another process may have done it meanwhile
                    _create_or_migrate(conn, _schema_version(conn, path))
        except sqlite3.OperationalError as exc:
            conn.close()
            # Two processes opening a new file at once: switching it to WAL does not wait for
            # the other's lock, it fails at once. Try again until the operation timeout.
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
            continue
        except BaseException:
            conn.close()
            raise
        return conn


def connect_quick(path: str) -> sqlite3.Connection:
    """A second connection to a file `connect` has opened, for work on the event loop's thread:
    it fails at once with "database is locked" instead of waiting for another process, and
    leaves checkpoints (which write and sync the database file) to `checkpoint`."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    except BaseException:
        conn.close()
        raise
    return conn


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether another connection holds the database (the operation did nothing)."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def checkpoint(conn: sqlite3.Connection) -> int:
    """Copy the write-ahead log into the database file, as far as readers allow; the number of
    frames (pages) the log holds."""
    _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(frames)


def _create_or_migrate(conn: sqlite3.Connection, version: int) -> None:
    """Inside the caller's transaction, so a crash leaves the file at its old version."""
    if version == SCHEMA_VERSION:
        return
    if version == 0:  # a new file: create the current schema, once
        for statement in _SCHEMA:
            conn.execute(statement)
    else:
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _schema_version(conn: sqlite3.Connection, path: str) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if not 0 <= version <= SCHEMA_VERSION:
        raise StoreUnavailable(
            f"SQLite store {path!r} has schema version {version}; this engine reads "
            f"versions up to {SCHEMA_VERSION}. Point the store at a new file, or use the "
            "engine that wrote it."
        )
    return int(version)


# --- operations ---

HEALTH_PROBE_BYTES = 64 * 1024
"""What `probe_write` commits: more than a typical round's records, so a file or disk too full
for rounds refuses the probe too (64 KiB a health check, removed at once)."""
_HEALTH_KEY = ("~health", "probe")
"""A blob no call can own (call ids never start with ``~``)."""


def probe_write(conn: sqlite3.Connection, clock: Clock) -> None:
    """Commit `HEALTH_PROBE_BYTES` to the log, then delete them: raises ``SQLITE_FULL`` (as
    ``OperationalError``) when the disk or ``max_page_count`` leaves no room. A probe whose delete
    fails expires within a minute."""
    with transaction(conn):
        put_blob(conn, clock, _HEALTH_KEY, bytes(HEALTH_PROBE_BYTES), 60.0)
    with transaction(conn):
        conn.execute("DELETE FROM blobs WHERE call_id = ? AND blob_id = ?", _HEALTH_KEY)


def put_blob(
    conn: sqlite3.Connection, clock: Clock, key: tuple[str, str], data: bytes, ttl: float
) -> None:
    conn.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?)", (*key, data, clock() + ttl))


def get_blob(conn: sqlite3.Connection, clock: Clock, key: tuple[str, str]) -> bytes | None:
    row = conn.execute(
        "SELECT data FROM blobs WHERE call_id = ? AND blob_id = ? AND expires_at > ?",
        (*key, clock()),
    ).fetchone()
    return None if row is None else bytes(row[0])


def read_round(
    conn: sqlite3.Connection, key: tuple[str, int], now: float
) -> tuple[bytes, bytes | None] | None:
    row = conn.execute(
        "SELECT fingerprint, response FROM rounds"
        " WHERE call_id = ? AND round_no = ? AND expires_at > ?",
        (*key, now),
    ).fetchone()
    return None if row is None else (bytes(row[0]), None if row[1] is None else bytes(row[1]))


_CLAIM = (
    "INSERT INTO rounds (call_id, round_no, fingerprint, response, expires_at, owner)"
    " VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT (call_id, round_no) DO UPDATE SET"
    " fingerprint = excluded.fingerprint, response = NULL, expires_at = excluded.expires_at,"
    " owner = excluded.owner WHERE rounds.expires_at <= ?"
)
"""Creates the round's record, or replaces an expired one, in one statement (atomic on its
own): a live record is left as it is and changes no row."""


def claim(
    conn: sqlite3.Connection,
    clock: Clock,
    key: tuple[str, int],
    fingerprint: bytes,
    ttl: float,
    owner: bytes | None,
) -> ClaimResult:
    now = clock()
    if conn.execute(_CLAIM, (*key, fingerprint, now + ttl, owner, now)).rowcount:
        return FRESH
    record = read_round(conn, key, now)  # the live record the claim found
    if record is None:  # it expired in between: claim again, which now replaces it
        return claim(conn, clock, key, fingerprint, ttl, owner)
    theirs, response = record
    return claim_found(theirs, response, fingerprint)


_COMPLETE_CLAIMED = (
    "UPDATE rounds SET response = ?, expires_at = ?, owner = NULL"
    " WHERE call_id = ? AND round_no = ? AND fingerprint = ? AND response IS NULL"
)
"""The common completion, of the record its claim made, in one statement."""


def complete(
    conn: sqlite3.Connection,
    clock: Clock,
    key: tuple[str, int],
    fingerprint: bytes,
    response: bytes,
    ttl: float,
) -> bool:
    now = clock()
    if conn.execute(_COMPLETE_CLAIMED, (response, now + ttl, *key, fingerprint)).rowcount:
        return True
    with transaction(conn):  # no claimed record: complete only where none lives
        record = read_round(conn, key, now)
        if record is not None and (record[0] != fingerprint or record[1] is not None):
            return False
        conn.execute(
            "INSERT OR REPLACE INTO rounds"
            " (call_id, round_no, fingerprint, response, expires_at) VALUES (?, ?, ?, ?, ?)",
            (*key, fingerprint, response, now + ttl),
        )
        return True


def release(
    conn: sqlite3.Connection, key: tuple[str, int], fingerprint: bytes, owner: bytes | None
) -> bool:
    sql = (
        "DELETE FROM rounds WHERE call_id = ? AND round_no = ? AND fingerprint = ?"
        " AND response IS NULL"
    )
    params: tuple[object, ...] = (*key, fingerprint)
    if owner is not None:  # a NULL owner never equals one: an ownerless claim is kept
        sql += " AND owner = ?"
        params += (owner,)
    return conn.execute(sql, params).rowcount > 0


def renew(
    conn: sqlite3.Connection,
    clock: Clock,
    key: tuple[str, int],
    fingerprint: bytes,
    owner: bytes,
    ttl: float,
) -> bool:
    now = clock()
    sql = (
        "UPDATE rounds SET expires_at = ? WHERE call_id = ? AND round_no = ? AND fingerprint = ?"
        " AND owner = ? AND response IS NULL AND expires_at > ?"
    )
    return conn.execute(sql, (now + ttl, *key, fingerprint, owner, now)).rowcount > 0


_JOURNAL_COUNT = (
    "INSERT INTO calls VALUES (:call_id, :target, :ts, :ts, 1, :kind, :expires)"
    " ON CONFLICT (call_id) DO UPDATE SET"
    " target = CASE WHEN expires_at <= :now THEN excluded.target"
    " ELSE coalesce(target, excluded.target) END,"
    " first_ts = CASE WHEN expires_at <= :now THEN excluded.first_ts"
    " ELSE min(first_ts, excluded.first_ts) END,"
    " last_ts = CASE WHEN expires_at <= :now THEN excluded.last_ts"
    " ELSE max(last_ts, excluded.last_ts) END,"
    " events = CASE WHEN expires_at <= :now THEN 1 ELSE events + 1 END,"
    " last_kind = CASE WHEN expires_at <= :now THEN excluded.last_kind"
    " ELSE coalesce(excluded.last_kind, last_kind) END,"
    " expires_at = excluded.expires_at"
    " RETURNING events"
)
"""Counts one more event of a call in its listing and returns the count: the event's ``seq`` is
the count before it. An expired listing starts over at 1 (SET reads the row as it was); the
rows its old journal left behind are passed over on read (``seq`` at or past the count) and
written over or purged later."""


def append_many(
    conn: sqlite3.Connection, clock: Clock, entries: list[EncodedEvent], ttl: float
) -> None:
    """Journal events (call id, encoded event, listing fields) in one transaction."""
    with transaction(conn):
        now = clock()
        expires = now + ttl
        for call_id, data, fields in entries:
            (count,) = conn.execute(
                _JOURNAL_COUNT,
                {
                    "call_id": call_id,
                    "target": fields.target,
                    "ts": fields.ts,
                    "kind": fields.kind,
                    "expires": expires,
                    "now": now,
                },
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO journal VALUES (?, ?, ?)", (call_id, count - 1, data)
            )


def events(conn: sqlite3.Connection, clock: Clock, call_id: str) -> list[dict[str, Any]]:
    with transaction(conn, "DEFERRED"):  # one snapshot for both reads
        live = conn.execute(
            "SELECT events FROM calls WHERE call_id = ? AND expires_at > ?", (call_id, clock())
        ).fetchone()
        if live is None:
            return []
        rows = conn.execute(
            "SELECT event FROM journal WHERE call_id = ? AND seq < ? ORDER BY seq",
            (call_id, live[0]),
        ).fetchall()
    return [decode_event(bytes(data)) for (data,) in rows]


def calls(
    conn: sqlite3.Connection, clock: Clock, limit: int, since: float | None, target: str | None
) -> list[CallSummary]:
    sql = "SELECT call_id, target, first_ts, last_ts, events, last_kind FROM calls"
    sql += " WHERE expires_at > ?"
    params: list[Any] = [clock()]
    if since is not None:
        sql += " AND last_ts >= ?"
        params.append(since)
    if target is not None:
        sql += " AND target = ?"
        params.append(target)
    sql += " ORDER BY last_ts DESC LIMIT ?"
    params.append(limit)
    return [
        CallSummary(call_id, tgt, first, last, count, last_kind=kind)
        for call_id, tgt, first, last, count, kind in conn.execute(sql, params)
    ]


def purge(conn: sqlite3.Connection, clock: Clock) -> None:
    now = clock()
    with transaction(conn):
        conn.execute("DELETE FROM blobs WHERE expires_at <= ?", (now,))
        conn.execute("DELETE FROM rounds WHERE expires_at <= ?", (now,))
        conn.execute(
            "DELETE FROM journal"
            " WHERE call_id IN (SELECT call_id FROM calls WHERE expires_at <= ?)",
            (now,),
        )
        conn.execute("DELETE FROM calls WHERE expires_at <= ?", (now,))
        conn.execute("DELETE FROM tasks WHERE expires_at <= ?", (now,))
