"""Group commit: the quick writes that reach the SQLite store in one event-loop turn share one
transaction.

A commit of the write-ahead log costs more than the few rows a claim, a completion or a journal
batch writes; concurrent rounds pay it once between them. The first writer of a turn leads: it
yields one turn (the others join its group meanwhile), takes the store's lock, and commits the
group; a write that fails leaves the others' rows and raises to its own caller only
(`commit_group`). Nobody learns a result before the transaction holding it commits:
a claim is on disk, as far as ``synchronous`` promises, before its round's body runs.

A writer cancelled before its group is taken leaves it (its write never runs): a cancelled caller
stops at its first wait, the leader's yield or a follower's wait for the commit, before any write
of its group runs. A leader cancelled before it takes the group hands the lead to the next
writer. Once taken, a group commits even if its leader is cancelled: the others wait for it.

The waits are asyncio futures rather than anyio events and cancel scopes: a write pays for
them on every round, and the store runs on anyio's asyncio backend only, as Redis's does.
"""

from __future__ import annotations

import asyncio
import copy
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from .schema import Clock, transaction

T = TypeVar("T")

Op = Callable[[sqlite3.Connection, Clock], T]
"""An SQL function of a facet (`stores.sqlite.claims`, ...) on one connection, with the store's
clock."""


class Pending(Generic[T]):
    """One write waiting for its group's commit, and then its result."""

    __slots__ = ("done", "error", "op", "value", "wake", "what")

    def __init__(self, what: str, op: Op[T], wake: asyncio.Future[None] | None = None) -> None:
        self.what = what
        self.op = op
        self.wake = wake
        """Done when the write's result is known, or when it is asked to lead (``None``: no
        writer waits, as for a group made by hand)."""
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None

    def settle(self, value: T | None = None, error: BaseException | None = None) -> None:
        self.done, self.value, self.error = True, value, error
        self.call()

    def call(self) -> None:
        """Wake the writer (it may have stopped waiting: a cancelled wait cancels the future)."""
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # done without error: op's value


Commit = Callable[[list[Pending[Any]]], Awaitable[None]]
"""Runs a group's writes under the store's lock and settles every one of them. It must finish
once begun, whatever happens to its caller: anything it waits for is shielded from
cancellation (as a worker thread run by ``anyio.to_thread`` is)."""
Acquire = Callable[[str], Awaitable[None]]
"""Takes the store's lock (within the operation timeout, else raises `StoreUnavailable`)."""


class GroupCommit:
    """Forms the groups and chooses their leaders; the store commits them (`Commit`)."""

    def __init__(self, acquire: Acquire, release: Callable[[], None], commit: Commit) -> None:
        self._acquire = acquire
        self._release = release
        self._commit = commit
        self._queue: list[Pending[Any]] = []
        self._leader: Pending[Any] | None = None

    async def run(self, what: str, op: Op[T]) -> T:
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        me: Pending[T] = Pending(what, op, wake)
        self._queue.append(me)
        if self._leader is None:
            self._leader = me
        try:
            if self._leader is not me:
                await wake  # woken once: settled by a commit, or asked to lead (`_leave`)
            if not me.done:
                await self._lead(me)  # which settles its whole group, this write with it
        except BaseException:
            self._leave(me)
            raise
        return me.result()

    async def _lead(self, me: Pending[Any]) -> None:
        await asyncio.sleep(0)  # the other writers of this turn join meanwhile
        try:
            await self._acquire(me.what)
        except Exception as exc:  # the lock stayed held: every writer waiting behind it fails
            group, self._queue, self._leader = self._queue, [], None
            fail_all(group, exc)
            return
        try:
            group, self._queue, self._leader = self._queue, [], None
            try:
                await self._commit(group)
            except Exception as exc:
                fail_all([pending for pending in group if not pending.done], exc)
            finally:  # even on an interrupt: nobody is left waiting
                for pending in group:
                    if not pending.done:
                        pending.settle(error=RuntimeError("the commit was interrupted"))
        finally:
            self._release()

    def _leave(self, me: Pending[Any]) -> None:
        """A writer that stops waiting (cancelled) before its group is taken: its write is
        withdrawn, and the lead passes on if it was its."""
        if me.done:
            return
        if me in self._queue:
            self._queue.remove(me)
        if self._leader is me:
            self._leader = self._queue[0] if self._queue else None
            if self._leader is not None:
                self._leader.call()


def fail_all(group: list[Pending[Any]], error: Exception) -> None:
    """Settle every write of ``group`` with ``error``: a copy each, since each caller raises
    its own (one exception raised in several tasks would gather all their tracebacks)."""
    for pending in group:
        own = copy.copy(error)
        own.__cause__ = error.__cause__
        pending.settle(error=own)


def commit_group(
    conn: sqlite3.Connection,
    clock: Clock,
    group: list[Pending[Any]],
    failed: Callable[[Pending[Any], Exception], BaseException],
) -> None:
    """The group's writes in one ``BEGIN IMMEDIATE`` transaction; settles them once it commits,
    a write that raised with ``failed(pending, exc)``. Writes seldom fail, so they first run
    without savepoints; when one raises, that transaction is rolled back and the group runs
    again with a savepoint per write, so only the failed one's caller sees its error. Raises
    (settling none) when the transaction as a whole fails: the database was busy at ``BEGIN``
    (nothing ran), or it could not commit (nothing is kept)."""
    try:
        with transaction(conn):
            outcomes: list[tuple[Any, BaseException | None]] = [
                (_run(pending, conn, clock), None) for pending in group
            ]
    except _WriteRaised:
        with transaction(conn):
            outcomes = [_in_savepoint(pending, conn, clock, failed) for pending in group]
    for pending, (value, error) in zip(group, outcomes, strict=True):
        pending.settle(value, error)


class _WriteRaised(Exception):
    """A write of the group raised (its transaction is then rolled back)."""


def _run(pending: Pending[Any], conn: sqlite3.Connection, clock: Clock) -> Any:
    try:
        return pending.op(conn, clock)
    except Exception as exc:
        if not conn.in_transaction:  # SQLite gave the whole transaction up
            raise
        raise _WriteRaised from exc


def _in_savepoint(
    pending: Pending[Any],
    conn: sqlite3.Connection,
    clock: Clock,
    failed: Callable[[Pending[Any], Exception], BaseException],
) -> tuple[Any, BaseException | None]:
    """One write undone alone if it raises: its value, or the error its caller gets."""
    conn.execute("SAVEPOINT group_write")
    try:
        outcome: tuple[Any, BaseException | None] = (pending.op(conn, clock), None)
    except Exception as exc:
        if not conn.in_transaction:
            raise
        conn.execute("ROLLBACK TO group_write")
        outcome = (None, failed(pending, exc))
    conn.execute("RELEASE group_write")
    return outcome
