"""Single-use rounds on SQLite (`ClaimStore`): a row per round in ``rounds``, written on the
event loop's thread in the group commit of its turn (see `stores.sqlite.core`).

A duplicate waiting for a round (`wait_complete`) is woken at once by a completion or release in
this process, and sees those of other processes on the file by reading the round again every
``poll_interval`` seconds.
"""

from __future__ import annotations

import sqlite3

from .._checks import check_owner, check_round_key, check_round_op
from .._claims import FRESH, claim_found
from .._waiters import Waiters, wait_settled
from ..base import ClaimResult
from .core import SQLiteCore
from .schema import Clock, transaction


class SQLiteClaims(SQLiteCore):
    """`ClaimStore` of `SQLiteStore`."""

    def _open_claims(self, poll_interval: float) -> None:
        """Called by `SQLiteStore.__init__`."""
        self._poll_interval = poll_interval
        self._waiters = Waiters()

    async def claim(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        ttl: float,
        *,
        owner: bytes | None = None,
    ) -> ClaimResult:
        own = check_round_op(call_id, round_no, ttl, owner)
        key, fp = (call_id, round_no), bytes(fingerprint)
        return await self._run_quick(
            "claim", lambda conn, clock: take_round(conn, clock, key, fp, ttl, own), write=True
        )

    async def complete(
        self, call_id: str, round_no: int, fingerprint: bytes, response: bytes, ttl: float
    ) -> None:
        check_round_op(call_id, round_no, ttl)
        key, fp, resp = (call_id, round_no), bytes(fingerprint), bytes(response)
        if await self._run_quick(
            "complete",
            lambda conn, clock: complete_round(conn, clock, key, fp, resp, ttl),
            write=True,
        ):
            self._waiters.notify(key)

    async def release(
        self, call_id: str, round_no: int, fingerprint: bytes, *, owner: bytes | None = None
    ) -> None:
        check_round_key(call_id, round_no)
        key, fp, own = (call_id, round_no), bytes(fingerprint), check_owner(owner)
        if await self._run_quick(
            "release", lambda conn, _: release_round(conn, key, fp, own), write=True
        ):
            self._waiters.notify(key)

    async def renew(
        self, call_id: str, round_no: int, fingerprint: bytes, owner: bytes, ttl: float
    ) -> bool:
        own = check_round_op(call_id, round_no, ttl, owner)
        if own is None:
            return False
        key, fp = (call_id, round_no), bytes(fingerprint)
        renewed: bool = await self._run_quick(
            "renew", lambda conn, clock: renew_round(conn, clock, key, fp, own, ttl), write=True
        )
        return renewed

    async def wait_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        timeout: float,  # noqa: ASYNC109 - a bound on the wait, which then returns None
    ) -> bytes | None:
        check_round_key(call_id, round_no)
        key = (call_id, round_no)

        async def read() -> tuple[bytes, bytes | None] | None:
            return await self._run_quick(
                "wait_complete",
                lambda conn, clock: read_round(conn, key, clock()),
                write=False,
            )

        return await wait_settled(
            read, fingerprint, self._waiters, key, timeout, poll=self._poll_interval
        )


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


def take_round(
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
        return take_round(conn, clock, key, fingerprint, ttl, owner)
    theirs, response = record
    return claim_found(theirs, response, fingerprint)


_COMPLETE_CLAIMED = (
    "UPDATE rounds SET response = ?, expires_at = ?, owner = NULL"
    " WHERE call_id = ? AND round_no = ? AND fingerprint = ? AND response IS NULL"
)
"""The common completion, of the record its claim made, in one statement."""


def complete_round(
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


def release_round(
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


def renew_round(
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
