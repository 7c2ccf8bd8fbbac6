"""`MemoryStore`: everything in this process's memory, for tests, demos and single replicas.

Nothing survives a restart and nothing is shared with other processes. Expiry uses the monotonic
clock (or the ``clock`` given, e.g. a test's fake one); expired entries are ignored on read and
swept from time to time on writes. The store is meant for one event loop and is not thread-safe.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio.lowlevel

from ._bus import DEFAULT_BUFFER, LocalBus
from ._checks import (
    check_call_id,
    check_fence,
    check_lease,
    check_limit,
    check_owner,
    check_round_key,
    check_round_op,
    check_task_id,
    check_task_write,
    check_ttl,
)
from ._claims import FRESH, claim_found
from ._fences import fence_allows, seconds_until
from ._journal import decode_event, encode_batch
from ._waiters import Waiters, wait_settled
from .base import CallSummary, ClaimResult, TaskRow


class _Expiring(Protocol):
    expires: float


_K = TypeVar("_K")
_V = TypeVar("_V", bound=_Expiring)


def _sweep(table: dict[_K, _V], now: float) -> None:
    for key in [key for key, value in table.items() if value.expires <= now]:
        del table[key]


@dataclass(slots=True)
class _Blob:
    data: bytes
    expires: float


@dataclass(slots=True)
class _Round:
    fingerprint: bytes
    response: bytes | None  # None while in progress
    expires: float
    owner: bytes | None = None  # set by the claim that created the record


@dataclass(slots=True)
class _Journal:
    events: list[bytes]
    target: str | None
    first_ts: float
    last_ts: float
    last_kind: str | None
    expires: float


@dataclass(slots=True)
class _Task:
    row: TaskRow
    due: float | None
    expires: float


class MemoryStore:
    """A `Store` held in dicts; operations never block and never fail for backend reasons."""

    def __init__(
        self,
        *,
        bus_buffer: int = DEFAULT_BUFFER,
        purge_interval: float = 60.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`clock` reads the time, in seconds, for expiry and purges; defaults to monotonic."""
        self._clock = time.monotonic if clock is None else clock
        self._blobs: dict[tuple[str, str], _Blob] = {}
        self._rounds: dict[tuple[str, int], _Round] = {}
        self._journals: dict[str, _Journal] = {}
        self._tasks: dict[str, _Task] = {}
        self._bus = LocalBus(bus_buffer)
        self._waiters = Waiters()
        self._purge_interval = purge_interval
        self._next_purge = self._clock() + purge_interval
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryStore(calls={len(self._journals)}, rounds={len(self._rounds)})"

    async def _enter(self) -> float:
        """Every operation is a checkpoint (cancellable, fair to other tasks), then reads now."""
        if self._closed:
            raise RuntimeError("this MemoryStore is closed; open a new store")
        await anyio.lowlevel.checkpoint()
        return self._clock()

    def _purge(self, now: float) -> None:
        """Sweep expired entries now and then so an idle key cannot pin memory forever."""
        if now < self._next_purge:
            return
        self._next_purge = now + self._purge_interval
        _sweep(self._blobs, now)
        _sweep(self._rounds, now)
        _sweep(self._journals, now)
        _sweep(self._tasks, now)

    # --- blobs ---

    async def put_blob(self, call_id: str, blob_id: str, data: bytes, ttl: float) -> None:
        check_call_id(call_id)
        check_ttl(ttl)
        now = await self._enter()
        self._blobs[call_id, blob_id] = _Blob(bytes(data), now + ttl)
        self._purge(now)

    async def get_blob(self, call_id: str, blob_id: str) -> bytes | None:
        now = await self._enter()
        blob = self._blobs.get((call_id, blob_id))
        return blob.data if blob is not None and blob.expires > now else None

    # --- rounds ---

    def _live_round(self, call_id: str, round_no: int, now: float) -> _Round | None:
        record = self._rounds.get((call_id, round_no))
        if record is not None and record.expires <= now:
            del self._rounds[call_id, round_no]
            return None
        return record

    async def claim(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        ttl: float,
        *,
        owner: bytes | None = None,
    ) -> ClaimResult:
        owner = check_round_op(call_id, round_no, ttl, owner)
        now = await self._enter()
        # No await from here on: the read-and-create is atomic within the event loop.
        record = self._live_round(call_id, round_no, now)
        if record is None:
            self._rounds[call_id, round_no] = _Round(bytes(fingerprint), None, now + ttl, owner)
            self._purge(now)
            return FRESH
        return claim_found(record.fingerprint, record.response, fingerprint)

    async def complete(
        self, call_id: str, round_no: int, fingerprint: bytes, response: bytes, ttl: float
    ) -> None:
        check_round_op(call_id, round_no, ttl)
        now = await self._enter()
        record = self._live_round(call_id, round_no, now)
        if record is None:
            self._rounds[call_id, round_no] = _Round(bytes(fingerprint), bytes(response), now + ttl)
        elif record.fingerprint == fingerprint and record.response is None:
            record.response = bytes(response)
            record.expires = now + ttl
        else:
            return
        self._waiters.notify((call_id, round_no))

    async def release(
        self, call_id: str, round_no: int, fingerprint: bytes, *, owner: bytes | None = None
    ) -> None:
        check_round_key(call_id, round_no)
        owner = check_owner(owner)
        now = await self._enter()
        record = self._live_round(call_id, round_no, now)
        if (
            record is not None
            and record.fingerprint == fingerprint
            and record.response is None
            and (owner is None or record.owner == owner)
        ):
            del self._rounds[call_id, round_no]
            self._waiters.notify((call_id, round_no))

    async def renew(
        self, call_id: str, round_no: int, fingerprint: bytes, owner: bytes, ttl: float
    ) -> bool:
        own = check_round_op(call_id, round_no, ttl, owner)
        now = await self._enter()
        record = self._live_round(call_id, round_no, now)
        if (
            record is None
            or own is None
            or record.fingerprint != fingerprint
            or record.response is not None
            or record.owner != own
        ):
            return False
        record.expires = now + ttl
        return True

    async def wait_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        timeout: float,  # noqa: ASYNC109 - a bound on the wait, which then returns None
    ) -> bytes | None:
        check_round_key(call_id, round_no)

        async def read() -> tuple[bytes, bytes | None] | None:
            record = self._live_round(call_id, round_no, await self._enter())
            return None if record is None else (record.fingerprint, record.response)

        return await wait_settled(read, fingerprint, self._waiters, (call_id, round_no), timeout)

    # --- journal ---

    async def append(self, call_id: str, event: dict[str, Any], ttl: float) -> None:
        await self.append_many([(call_id, event)], ttl)

    async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
        """All the events at one checkpoint, as one round trip would."""
        check_ttl(ttl)
        encoded = encode_batch(items)
        now = await self._enter()
        for call_id, data, fields in encoded:
            journal = self._journals.get(call_id)
            if journal is None or journal.expires <= now:
                journal = _Journal([], fields.target, fields.ts, fields.ts, None, now + ttl)
                self._journals[call_id] = journal
            journal.events.append(data)
            if journal.target is None:
                journal.target = fields.target
            if fields.kind is not None and (
                journal.last_kind is None or fields.ts >= journal.last_ts
            ):
                journal.last_kind = fields.kind
            journal.first_ts = min(journal.first_ts, fields.ts)
            journal.last_ts = max(journal.last_ts, fields.ts)
            journal.expires = now + ttl
        self._purge(now)

    async def events(self, call_id: str) -> list[dict[str, Any]]:
        now = await self._enter()
        journal = self._journals.get(call_id)
        if journal is None or journal.expires <= now:
            return []
        return [decode_event(data) for data in journal.events]

    async def trim_journal(self, max_bytes: int) -> int:
        """Keep the journal's encoded events within ``max_bytes``: past it, the oldest calls
        (the first journaled) are dropped until it is back to 90% of it. The number dropped."""
        await self._enter()
        total = sum(len(data) for journal in self._journals.values() for data in journal.events)
        if total <= max_bytes:
            return 0
        target = max_bytes * 9 // 10
        purged = 0
        for call_id in list(self._journals):
            if total <= target:
                break
            total -= sum(len(data) for data in self._journals.pop(call_id).events)
            purged += 1
        return purged

    async def calls(
        self,
        *,
        limit: int = 50,
        since: float | None = None,
        target: str | None = None,
        before: float | None = None,
    ) -> list[CallSummary]:
        check_limit(limit)
        now = await self._enter()
        rows = [
            CallSummary(
                call_id, j.target, j.first_ts, j.last_ts, len(j.events), last_kind=j.last_kind
            )
            for call_id, j in self._journals.items()
            if j.expires > now
            and (since is None or j.last_ts >= since)
            and (before is None or j.last_ts < before)
            and (target is None or j.target == target)
        ]
        rows.sort(key=lambda row: row.last_ts, reverse=True)
        return rows[:limit]

    # --- tasks ---

    def _live_task(self, task_id: str, now: float) -> _Task | None:
        task = self._tasks.get(task_id)
        if task is not None and task.expires <= now:
            del self._tasks[task_id]
            return None
        return task

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        check_task_write(row, ttl, due_in)
        now = await self._enter()
        # No await from here on: the compare and the write are atomic within the event loop.
        current = self._live_task(row.task_id, now)
        if current is None:
            if row.version != 1:
                return False
        elif row.version != current.row.version + 1 or not fence_allows(
            current.row.fence, current.due, now, row.fence
        ):
            return False
        stored = dataclasses.replace(row, due_in=None)
        self._tasks[row.task_id] = _Task(
            stored, None if due_in is None else now + due_in, now + ttl
        )
        self._purge(now)
        return True

    async def renew_task(self, task_id: str, fence: int, lease: float) -> bool:
        check_task_id(task_id)
        check_fence(fence)
        check_lease(lease)
        now = await self._enter()
        task = self._live_task(task_id, now)
        if task is None or task.row.fence != fence or task.due is None:
            return False
        task.due = now + lease
        return True

    async def get_task(self, task_id: str) -> TaskRow | None:
        check_task_id(task_id)
        now = await self._enter()
        task = self._live_task(task_id, now)
        if task is None:
            return None
        return dataclasses.replace(task.row, due_in=seconds_until(task.due, now))

    async def due_tasks(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        now = await self._enter()
        due = [
            (task.due, task_id)
            for task_id, task in self._tasks.items()
            if task.due is not None and task.due <= now and task.expires > now
        ]
        return [task_id for _, task_id in sorted(due)[:limit]]

    async def tasks(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        check_limit(limit)
        now = await self._enter()
        rows = [
            task.row
            for task in self._tasks.values()
            if task.expires > now and (status is None or task.row.status == status)
        ]
        rows.sort(key=lambda row: row.created, reverse=True)
        return rows[:limit]

    # --- bus ---

    async def publish(self, topic: str, message: bytes) -> None:
        await self._enter()
        self._bus.publish(topic, bytes(message))

    def subscribe(self, topic: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self._bus.subscribe(topic)

    # --- lifecycle ---

    async def clock(self) -> float:
        await self._enter()
        return time.time()  # this process's: no replica is ever skewed from it

    async def ping(self) -> None:
        await self._enter()  # memory always takes a write

    async def aclose(self) -> None:
        self._closed = True
        self._bus.close()
