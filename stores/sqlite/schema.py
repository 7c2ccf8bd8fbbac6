"""The file of `SQLiteStore`: its schema and migrations, its connections, the private modes of
its files, and what runs on all of it (the health probe, purges, checkpoints).

The SQL of each facet is in the facet's module (`stores.sqlite.claims`, ...): a function of a
connection, run on one of the store's connections (see `stores.sqlite.core`); one that decides
what has expired reads the time from the store's `Clock`. Writes that read first are
``BEGIN IMMEDIATE`` transactions, so they are atomic across processes too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .._checks import check_synchronous
from ..base import StoreUnavailable

log = logging.getLogger(__name__)

Clock = Callable[[], float]
"""The store's time in seconds, read when an operation runs (inside its transaction)."""

WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes the write-ahead log file is cut back to when it starts over (``journal_size_limit``; it
is reused, not shrunk, otherwise). A checkpoint after a failed one cuts it to nothing
(`checkpoint` with ``TRUNCATE``)."""

SCHEMA_VERSION = 6
"""1: the first schema. 2: ``rounds.owner``, the token of the claim that created the record.
3: ``tasks``, the records of calls that run in the background. 4: ``journal`` as a rowid table:
events of a kilobyte or more stay in its leaf pages, where a table without rowid gives each its
own overflow page. 5: the listing moves into the journal: each row carries its call's listing as
of its event (``calls`` becomes a view of the last rows), so an event adds a row, rewriting none.
6: ``tasks.fence``, the fencing token of a task's hold."""

_TASKS_TABLE = """CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL,
    target TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL, record BLOB NOT NULL,
    expires_at REAL NOT NULL, due REAL{fence}
)"""
_TASK_INDEXES = (
    "CREATE INDEX IF NOT EXISTS tasks_by_due ON tasks (due) WHERE due IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS tasks_by_created ON tasks (created)",
)
_FENCE = ", fence INTEGER NOT NULL DEFAULT 0"
_TASKS = (_TASKS_TABLE.format(fence=_FENCE), *_TASK_INDEXES)

_JOURNAL_V4 = """CREATE TABLE IF NOT EXISTS {name} (
    call_id TEXT NOT NULL, seq INTEGER NOT NULL, event BLOB NOT NULL, PRIMARY KEY (call_id, seq)
)"""

_JOURNAL = """CREATE TABLE IF NOT EXISTS {name} (
    call_id TEXT NOT NULL, seq INTEGER NOT NULL, target TEXT, first_ts REAL NOT NULL,
    last_ts REAL NOT NULL, last_kind TEXT, expires_at REAL NOT NULL, event BLOB NOT NULL,
    PRIMARY KEY (call_id, seq)
)"""
"""A row per event, ``seq`` counting from 0, with the call's listing as of the event (the first
non-null target, the earliest and latest ``ts``, the latest non-null kind) and the expiry its
write set. So a call's last row is its summary, and its expiry (`stores.sqlite.journal`)."""

_LISTING = (
    "CREATE INDEX IF NOT EXISTS journal_by_target ON journal (target, last_ts)",
    "CREATE INDEX IF NOT EXISTS journal_by_expiry ON journal (expires_at) WHERE seq = 0",
    """CREATE VIEW IF NOT EXISTS calls AS
        SELECT call_id, target, first_ts, last_ts, seq + 1 AS events, last_kind, expires_at
        FROM journal AS j WHERE NOT EXISTS
            (SELECT 1 FROM journal AS n WHERE n.call_id = j.call_id AND n.seq = j.seq + 1)""",
)
"""What finds calls without reading the whole journal: a listing walks ``journal_by_target``
(a target after another when none is given, merged) until it has its rows, passing the earlier
rows of the calls it lists; a purge looks at the calls whose first row has expired (with one
ttl, all that have) and drops those whose last row has too. ``calls`` shows each call's last
row as the table of version 4 did, for reading the file by hand."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS blobs (
        call_id TEXT NOT NULL, blob_id TEXT NOT NULL, data BLOB NOT NULL,
        expires_at REAL NOT NULL, PRIMARY KEY (call_id, blob_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS rounds (
        call_id TEXT NOT NULL, round_no INTEGER NOT NULL, fingerprint BLOB NOT NULL,
        response BLOB, expires_at REAL NOT NULL, owner BLOB, PRIMARY KEY (call_id, round_no)
    ) WITHOUT ROWID""",
    _JOURNAL.format(name="journal"),
    *_LISTING,
    *_TASKS,
)
"""Applied in one transaction on first open (``executescript`` would commit half-way)."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE rounds ADD COLUMN owner BLOB",),
    2: (_TASKS_TABLE.format(fence=""), *_TASK_INDEXES),
    3: (
        _JOURNAL_V4.format(name="journal_v4"),
        "INSERT INTO journal_v4 SELECT call_id, seq, event FROM journal",
        "DROP TABLE journal",
        "ALTER TABLE journal_v4 RENAME TO journal",
    ),
    4: (
        _JOURNAL.format(name="journal_v5"),
        "INSERT INTO journal_v5 SELECT j.call_id, j.seq, c.target, c.first_ts, c.last_ts,"
        " c.last_kind, c.expires_at, j.event FROM journal AS j JOIN calls AS c USING (call_id)"
        " WHERE j.seq < c.events ORDER BY j.rowid",
        "DROP TABLE journal",
        "DROP TABLE calls",
        "ALTER TABLE journal_v5 RENAME TO journal",
        *_LISTING,
    ),
    5: (f"ALTER TABLE tasks ADD COLUMN {_FENCE[2:]}",),
}
"""Statements that bring a file of version N to N + 1, applied in place on open.

4 to 5 gives each event the listing of its call's ``calls`` row: exact for the call's last row,
the one listings and appends read; an earlier row gets the listing as of the move rather than
as of its own event, which nothing reads. Rows past a call's count (left from before it expired
and started over) and rows of no listed call are dropped: no read returned them.
"""


@contextmanager
def transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
    """IMMEDIATE takes the write lock up front, so read-then-write cannot interleave. Within a
    transaction already open (a group commit's), part of it: the group undoes what a write that
    raised had done (`stores.sqlite.group_commit.commit_group`)."""
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


def connect(path: str, op_timeout: float, synchronous: str = "normal") -> sqlite3.Connection:
    """Open in WAL mode with the schema in place, migrating an older file in place.

    A file of an unknown (newer) schema is refused.
    """
    deadline = time.monotonic() + op_timeout
    while True:
        conn = sqlite3.connect(
            path, timeout=op_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # a new file: before it has pages
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {check_synchronous(synchronous).upper()}")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            if _schema_version(conn, path) != SCHEMA_VERSION:
                with transaction(conn):  # re-read: another process may have done it meanwhile
                    _create_or_migrate(conn, _schema_version(conn, path))
            if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
                _make_incremental(conn, path)
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


def connect_quick(path: str, synchronous: str = "normal") -> sqlite3.Connection:
    """A second connection to a file `connect` has opened, for work on the event loop's thread:
    it fails at once with "database is locked" instead of waiting for another process, and
    leaves checkpoints (which write and sync the database file) to `checkpoint`."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA synchronous = {check_synchronous(synchronous).upper()}")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    except BaseException:
        conn.close()
        raise
    return conn


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether another connection holds the database (the operation did nothing)."""
    code = getattr(exc, "sqlite_errorcode", 0) or 0
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def checkpoint(conn: sqlite3.Connection, mode: str = "PASSIVE") -> int:
    """Copy the write-ahead log into the database file, as far as readers allow; the number of
    frames (pages) the log holds. ``TRUNCATE`` copies all of it or nothing, and then cuts the
    log file to nothing, giving its space back to the disk: -1 when readers kept it from that."""
    busy, frames, _ = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    return -1 if busy else int(frames)


def is_failure(exc: sqlite3.DatabaseError) -> bool:
    """Whether the database is to blame rather than the caller: locked, full, an I/O error, or
    a file that reads as damaged since its disk failed ("database disk image is malformed");
    not a broken constraint, nor a misused API."""
    return isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def is_full(exc: sqlite3.Error) -> bool:
    """Whether SQLite found no room: the disk, or ``max_page_count``, is full."""
    code = getattr(exc, "sqlite_errorcode", 0) or 0
    return code & 0xFF == sqlite3.SQLITE_FULL


INCREMENTAL = 2
"""``PRAGMA auto_vacuum`` of a file whose free pages can be handed back to the disk."""


def _make_incremental(conn: sqlite3.Connection, path: str) -> None:
    """A file made before the store gave space back: switched, once, by rewriting it
    (``VACUUM``, which the mode needs once a file has tables). Busy (another process holds it):
    tried again at the next open; the file meanwhile reuses its free pages but keeps them."""
    log.info("SQLite store %r: rewriting it once so that it can give space back", path)
    try:
        conn.executescript("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
    except sqlite3.OperationalError as exc:
        log.warning(
            "SQLite store %r not rewritten yet (%s); tried again at the next open", path, exc
        )


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


# --- the health probe and purges ---

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
        conn.execute(
            "INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?)",
            (*_HEALTH_KEY, bytes(HEALTH_PROBE_BYTES), clock() + 60.0),
        )
    with transaction(conn):
        conn.execute("DELETE FROM blobs WHERE call_id = ? AND blob_id = ?", _HEALTH_KEY)


_PURGE_JOURNAL = (
    "DELETE FROM journal WHERE call_id IN (SELECT call_id FROM journal AS f"
    " WHERE seq = 0 AND expires_at <= :now AND (SELECT expires_at FROM journal AS l"
    " WHERE l.call_id = f.call_id ORDER BY seq DESC LIMIT 1) <= :now)"
)
"""The calls whose last row has expired, among those whose first has: a call whose later
event had a shorter ttl than its first stays until both have passed (unread from the first)."""


def purge(conn: sqlite3.Connection, clock: Clock) -> None:
    now = clock()
    with transaction(conn):
        conn.execute("DELETE FROM blobs WHERE expires_at <= ?", (now,))
        conn.execute("DELETE FROM rounds WHERE expires_at <= ?", (now,))
        conn.execute(_PURGE_JOURNAL, {"now": now})
        conn.execute("DELETE FROM tasks WHERE expires_at <= ?", (now,))
    conn.executescript("PRAGMA incremental_vacuum;")  # the space of what expired, to the disk
