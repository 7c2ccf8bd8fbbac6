"""What every facet of `SQLiteStore` runs on: its connections, its lock, group commit,
housekeeping and checkpoints; and the store as a whole (`serve`, `clock`, `ping`, `aclose`).

Other processes may open the same file while a server writes it (a CLI reading journals, say):
the database runs in WAL mode, so readers never block the writer.

Threading: one operation at a time, under an `anyio.Lock` (SQLite admits a single writer per
file anyway). The round operations (claim, complete, release, renew, the read of a round) and
the journal's transactions (up to `QUICK_JOURNAL_BATCH` events each) are a few rows each, and a
trip to a worker thread costs more than their work: they run on the event loop's thread, in
turn, on a "quick" connection that never waits for a lock. One that finds the database held by
another process runs again in a worker thread on the other connection, which waits up to the
operation timeout (``busy_timeout``), as blobs, listings and very large events always do. The
quick connection leaves checkpoints of the write-ahead log (they write and sync the database
file: milliseconds) to a worker thread, every `CHECKPOINT_EVERY` quick writes: `serve`, while a
server runs the store, else the write that reaches the count. Disk writes still happen on the
loop's thread: a commit appends to the log, and the first commit after the log starts over syncs
its header. The quick writes of one loop turn commit together (`stores.sqlite.group_commit`):
one ``BEGIN IMMEDIATE`` transaction, atomic across processes too.

Expiry uses the wall clock (the file outlives the process, a monotonic clock does not), or the
``clock`` given (e.g. a test's fake one): expired rows are ignored on read and purged now and then
after writes.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sqlite3
import time
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._checks import check_synchronous, check_ttl
from ..base import StoreUnavailable, unavailable
from . import schema as sql
from .group_commit import GroupCommit, Op, Pending, commit_group, fail_all

log = logging.getLogger(__name__)

T = TypeVar("T")

CHECKPOINT_EVERY = 1000
"""Quick writes between two checkpoints of the write-ahead log (in a worker thread)."""
CATCH_UP_FRAMES = 4096
"""Log size, in pages, from which `serve` holds the writes for a checkpoint that copies the rest
(all of it unless another process reads an older snapshot)."""
CHECKPOINT_RETRY = 1.0
"""Seconds between two tries, in `serve`, of a checkpoint that cuts the log back to nothing,
once a checkpoint has failed or a write found the disk full (see `_truncate_log`)."""
QUICK_JOURNAL_BYTES = 256 * 1024
"""A write of up to this many bytes runs on the event loop's thread (a journal batch is cut into
transactions of this size at most); a larger one goes to a worker thread."""


class SQLiteCore:
    """The connections to one SQLite file and the discipline they are used under; each facet
    of `SQLiteStore` runs its operations through `_run`, `_run_quick` or `_write_sized`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        op_timeout: float,
        purge_interval: float,
        clock: sql.Clock | None,
        synchronous: str,
    ) -> None:
        """Open (creating if needed) the database at `path` (see `SQLiteStore`)."""
        check_ttl(op_timeout, "op_timeout")
        self.synchronous = check_synchronous(synchronous)
        self.path = os.fspath(path)
        self._clock: sql.Clock = time.time if clock is None else clock
        self._purge_clock: sql.Clock = time.monotonic if clock is None else clock
        self._op_timeout = op_timeout
        self._purge_interval = purge_interval
        self._next_purge = 0.0
        try:
            sql.make_private(self.path)
            self._conn: sqlite3.Connection | None = sql.connect(
                self.path, op_timeout, self.synchronous
            )
            sql.private_side_files(self.path)
            try:
                self._quick: sqlite3.Connection | None = sql.connect_quick(
                    self.path, self.synchronous
                )
            except BaseException:
                self._conn.close()
                raise
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(
                f"cannot open SQLite store at {self.path!r} ({exc}). "
                "Check that the directory exists and this process may write to it."
            ) from exc
        self._lock = anyio.Lock()
        self._group = GroupCommit(self._acquire, self._lock.release, self._commit_group)
        self._quick_writes = 0
        self._checkpoint_wanted: anyio.Event | None = None
        """Set to ask `serve` for a checkpoint; ``None`` when it does not run."""
        self._log_stuck = False
        """A checkpoint failed, or a write found the disk full: `serve` tries to cut the log
        back every `CHECKPOINT_RETRY` s until it has."""
        self._cap_too_small_said = False
        """`trim_journal` has said the cap cannot hold the file's other records (said once)."""

    async def _run(self, what: str, op: Op[T], write: bool) -> T:
        """Run `op` in a worker thread, one at a time, mapping lock and I/O trouble."""
        await self._acquire(what)
        try:
            result = await self._in_thread(what, op)
            if write and self._housekeeping_due():
                await self._housekeeping()
            return result
        finally:
            self._lock.release()

    async def _acquire(self, what: str) -> None:
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            try:
                with anyio.fail_after(self._op_timeout):
                    await self._lock.acquire()
            except TimeoutError:
                raise unavailable(
                    "SQLite", what, f"other operations held the database for {self._op_timeout} s"
                ) from None

    async def _run_quick(self, what: str, op: Op[T], write: bool) -> T:
        """Run a short operation on this thread, after the operations before it (a write in
        the group commit of its loop turn); in a worker thread when another process holds the
        database, as `_run` does."""
        if write:
            return await self._group.run(what, op)
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller stops here
        await self._acquire(what)
        try:
            return await self._quick_op(what, op)
        finally:
            self._lock.release()

    async def _quick_op(self, what: str, op: Op[T]) -> T:
        """`op` on the quick connection, under the lock; on the waiting one if it is busy."""
        quick = self._quick
        if quick is None:
            raise RuntimeError("this SQLiteStore is closed; open a new store")
        try:
            return op(quick, self._clock)
        except sqlite3.DatabaseError as exc:
            self._end_quick_transaction(quick)
            if not sql.is_failure(exc):
                raise
            if not sql.is_busy(exc):
                raise self._failed(what, exc) from exc
            return await self._in_thread(what, op)  # another process holds it: wait
        except BaseException:
            self._end_quick_transaction(quick)
            raise

    async def _commit_group(self, group: list[Pending[Any]]) -> None:
        """A group of quick writes (`GroupCommit`), under the lock: one alone as it is, more
        in one transaction; then housekeeping."""
        if len(group) == 1:
            (one,) = group
            try:
                one.settle(await self._quick_op(one.what, one.op))
            except Exception as exc:
                one.settle(error=exc)
        else:
            commit = functools.partial(commit_group, group=group, failed=self._failed_write)
            try:
                await self._quick_op(group[0].what, commit)
            except Exception as exc:
                fail_all(group, exc)
        self._quick_writes += len(group)
        if self._housekeeping_due():  # seldom: most writes need none, nor a coroutine
            await self._housekeeping()

    def _failed(self, what: str, exc: sqlite3.DatabaseError) -> StoreUnavailable:
        if sql.is_full(exc) and not self._log_stuck:  # the log may be what fills the disk
            self._log_stuck = True
            if self._checkpoint_wanted is not None:
                self._checkpoint_wanted.set()
        return unavailable("SQLite", f"{what} on {self.path!r}", str(exc))

    def _failed_write(self, pending: Pending[Any], exc: Exception) -> BaseException:
        """What the caller of one write of a group that raised sees: as if it ran alone."""
        if isinstance(exc, sqlite3.DatabaseError) and sql.is_failure(exc):
            return self._failed(pending.what, exc)
        return exc

    async def _write_sized(self, what: str, op: Op[T], size: int) -> T:
        """A write of `size` bytes: on this thread up to `QUICK_JOURNAL_BYTES`, in a worker
        thread beyond (a large write must not stall the event loop)."""
        if size > QUICK_JOURNAL_BYTES:
            return await self._run(what, op, write=True)
        return await self._run_quick(what, op, write=True)

    def _end_quick_transaction(self, quick: sqlite3.Connection) -> None:
        """Leave no transaction open on the quick connection after a failed operation: it
        would hold the write lock and refuse every later ``BEGIN``. If even a rollback fails,
        the connection is replaced (closing one rolls back)."""
        if not quick.in_transaction:
            return
        try:
            quick.execute("ROLLBACK")
        except sqlite3.Error as exc:
            log.warning("SQLite rollback failed (%s); reopening the connection", exc)
        if quick.in_transaction:
            quick.close()
            self._quick = None
            try:
                self._quick = sql.connect_quick(self.path, self.synchronous)
            except sqlite3.Error as exc:  # the worker-thread connection serves meanwhile
                log.warning("SQLite connection not reopened: %s", exc)

    async def _in_thread(self, what: str, op: Op[T]) -> T:
        """``op`` on the waiting connection in a worker thread; the caller holds the lock."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("this SQLiteStore is closed; open a new store")
        try:
            return await anyio.to_thread.run_sync(op, conn, self._clock)
        except sqlite3.DatabaseError as exc:
            if not sql.is_failure(exc):
                raise
            raise self._failed(what, exc) from exc

    def _housekeeping_due(self) -> bool:
        return self._quick_writes >= CHECKPOINT_EVERY or self._purge_clock() >= self._next_purge

    async def _housekeeping(self) -> None:
        """After a write, under the lock: purge expired rows now and then, and checkpoint the
        log after `CHECKPOINT_EVERY` quick writes. The write is done: nothing here fails it, and
        a cancelled caller waits for the worker thread rather than lose its result. Called when
        `_housekeeping_due`."""
        purge = self._purge_clock() >= self._next_purge
        checkpoint = self._quick_writes >= CHECKPOINT_EVERY
        conn = self._conn
        if conn is None:
            return
        if checkpoint:
            self._quick_writes = 0
            if self._checkpoint_wanted is not None:
                self._checkpoint_wanted.set()  # `serve` does it beside the writes
                checkpoint = False
        if purge:
            self._next_purge = self._purge_clock() + self._purge_interval
        with anyio.CancelScope(shield=True):
            if purge:
                await anyio.to_thread.run_sync(self._purge_quietly, conn, self._clock)
            if checkpoint:
                await anyio.to_thread.run_sync(self._checkpoint_quietly, conn)

    def _checkpoint_quietly(self, conn: sqlite3.Connection) -> int:
        """The frames the log holds after a checkpoint (0 when it could not run: no catch-up
        then; `serve` tries again until the log is cut back)."""
        try:
            return sql.checkpoint(conn)
        except sqlite3.Error as exc:
            if not self._log_stuck:
                log.warning(
                    "SQLite checkpoint failed, the log grows meanwhile: %s; tried again every %g s",
                    exc,
                    CHECKPOINT_RETRY,
                )
            self._log_stuck = True
            return 0

    async def _truncate_log(self, conn: sqlite3.Connection) -> None:
        """After a failed checkpoint or a full disk: all of the log copied into the database
        and its file cut to nothing, under the lock (no write of ours in between), so the space
        it took is the disk's again. Fails, and is tried again, until there is room for the
        database file to take the log's pages."""
        async with self._lock:
            if self._conn is None:
                return
            try:
                frames = await anyio.to_thread.run_sync(sql.checkpoint, conn, "TRUNCATE")
            except sqlite3.Error as exc:
                log.debug("SQLite log not cut back yet: %s", exc)
                return
        if frames == 0:  # -1: a reader in another process held part of it
            self._log_stuck = False
            log.warning("SQLite checkpoint done: the log of %r is cut back to nothing", self.path)

    @staticmethod
    def _purge_quietly(conn: sqlite3.Connection, clock: sql.Clock) -> None:
        """Purging is housekeeping: a busy database only postpones it."""
        try:
            sql.purge(conn, clock)
        except sqlite3.Error as exc:
            log.debug("SQLite purge postponed: %s", exc)

    # --- the store as a whole ---

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """While a server uses the store: checkpoints of the log run here, beside the writes.
        One that runs while writes go on never quite catches up with them, and the log starts
        over only once all of it is in the database file: so once the log has grown past
        `CATCH_UP_FRAMES`, a second checkpoint runs under the lock and copies the rest."""
        if self._checkpoint_wanted is not None:  # another server's serve() does it already
            task_status.started()
            return
        wanted = self._checkpoint_wanted = anyio.Event()  # before any await: claims the job
        conn: sqlite3.Connection | None = None
        try:
            try:
                conn = await anyio.to_thread.run_sync(
                    sql.connect_quick, self.path, self.synchronous
                )
            except sqlite3.Error as exc:
                raise unavailable("SQLite", f"checkpoints of {self.path!r}", str(exc)) from exc
            task_status.started()
            while True:
                with anyio.move_on_after(CHECKPOINT_RETRY if self._log_stuck else math.inf):
                    await wanted.wait()
                wanted = self._checkpoint_wanted = anyio.Event()
                if self._log_stuck:
                    await self._truncate_log(conn)
                    continue
                frames = await anyio.to_thread.run_sync(self._checkpoint_quietly, conn)
                if frames < CATCH_UP_FRAMES:
                    continue
                async with self._lock:
                    if self._conn is None:
                        return
                    await anyio.to_thread.run_sync(self._checkpoint_quietly, conn)
        finally:
            if self._checkpoint_wanted is wanted:
                self._checkpoint_wanted = None
            if conn is not None:  # the last connection to close checkpoints: not on the loop
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(conn.close)

    async def clock(self) -> float:
        """This host's wall clock (or the ``clock`` given): every process on the file reads
        the same one."""
        if self._conn is None:
            raise RuntimeError("this SQLiteStore is closed; open a new store")
        await anyio.lowlevel.checkpoint()
        return self._clock()

    async def ping(self) -> None:
        """The file accepts a write (see `stores.sqlite.schema.probe_write`): a full disk refuses
        every round while a read still answers."""
        await self._run("health write", sql.probe_write, write=True)

    async def aclose(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            quick, self._quick = self._quick, None
            if quick is not None:
                quick.close()
            if conn is not None:
                await anyio.to_thread.run_sync(conn.close)
