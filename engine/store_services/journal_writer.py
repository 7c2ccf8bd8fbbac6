"""The journal: every round of a sampled call, written to the store off the response's path.

A round's event goes to a background writer's queue, and writers seal what has gathered, a
record per call (:mod:`engine.store_services.journal_records`), and send it in one round trip.
The rounds of a call still open wait in their writer for its end (`JOURNAL_HOLD`), so a call
that ends soon is one record: one row, one seal, one compressed payload. A journal
failure never fails a call: the events the store refused, and under overload those beyond what
the queues hold, are dropped rather than slowing the calls down, and counted
(:mod:`engine.store_services.journal_drops`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import zlib
from collections import deque
from time import perf_counter
from typing import Any

import anyio

from engine._internal.metrics import Metrics
from engine.settings import JOURNAL_MAX_EVENT_BYTES
from engine.state.seal import KeyRing
from engine.store_services.journal_drops import JournalDrops, refused
from engine.store_services.journal_records import seal_rounds
from stores import JournalStore, StoreUnavailable

log = logging.getLogger(__name__)

JOURNAL_LINGER = 0.005
"""Seconds a journal writer waits after an event for others to share its round trip (not when
a whole batch is already waiting: under load it writes back to back)."""
JOURNAL_BATCH = 200
"""Events a journal writer sends in one round trip at most."""
JOURNAL_QUEUE = 2048
"""Events waiting for a journal writer beyond which new ones are dropped (and counted)."""

JOURNAL_HOLD = 1.0
"""Seconds the rounds of a call still open (its last round asked for input) wait in their
writer for the call to end, so that a call that ends soon is written as one record; a call
open longer has its rounds so far written then, as a record of their own."""
JOURNAL_HOLD_ROUNDS = 16
"""Rounds of one call a writer holds at most: a call of more is written in records of this
many."""
INPUT_REQUIRED = "input_required"
TRIM_EVERY = 64
"""A writer asks the store to trim the journal each time it has written this share of the cap
(1/64): the store's size is then past the cap by about that much at most, between checks."""
ROW_BYTES = 200
"""What a record takes in the store beyond its sealed part, about (its listing fields, keys,
index entries)."""

BEHIND = "the journal writers are behind the calls (the store is too slow or too far for this load)"


class _EventQueue:
    """One journal writer's queue: events in order, dropped when ``limit`` are waiting.

    A deque and a future rather than a memory object stream or an event: every round puts an
    event here, and this single-consumer, never-blocking case needs none of their machinery.
    """

    __slots__ = ("closed", "events", "limit", "timer", "until", "waiter")

    def __init__(self, limit: int) -> None:
        self.events: deque[tuple[str, dict[str, Any], Any, float | None]] = deque()
        """``(call id, event, the span of its round or None, when its hold ends or None:
        a hold from when the writer takes it)``."""
        self.limit = limit
        self.waiter: asyncio.Future[None] | None = None
        """What the writer awaits while it waits (``None``: it is not waiting)."""
        self.until = math.inf
        """When the writer's wait ends at the latest (the loop's clock)."""
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def put(self, call_id: str, event: dict[str, Any], link: Any, hold: bool = False) -> bool:
        """Queue an event; ``False`` when the queue is full (the event is not queued).

        A ``hold`` event (its call goes on) wakes a waiting writer only at the end of the
        hold: the writer would only hold it, and the call's next round wakes it anyway."""
        if len(self.events) >= self.limit:
            return False
        waiter = self.waiter
        if waiter is None:  # the writer is busy: it takes this event in turn
            self.events.append((call_id, event, link, None))
        elif not hold:
            self.events.append((call_id, event, link, None))
            self.wake()
        else:
            loop = waiter.get_loop()
            due = loop.time() + JOURNAL_HOLD
            self.events.append((call_id, event, link, due))
            if due < self.until:
                self._wake_at(loop, due)
        return True

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """The writer ends once it has written what is queued."""
        self.closed = True
        self.wake()

    async def wait(self, until: float) -> None:
        """Until an event is queued (but a held one: see :meth:`put`), the queue closes, or
        the loop's clock reaches ``until``."""
        loop = asyncio.get_running_loop()
        self.waiter = loop.create_future()
        self.until = math.inf
        if until != math.inf:
            self._wake_at(loop, until)
        try:
            await self.waiter
        finally:
            self.waiter = None
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def _wake_at(self, loop: asyncio.AbstractEventLoop, until: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.until = until
        self.timer = loop.call_at(until, self.wake)


class _HeldCall:
    """The rounds of one call a writer has not written yet, and when they are due."""

    __slots__ = ("call_id", "due", "events", "links")

    def __init__(self, call_id: str, due: float) -> None:
        self.call_id = call_id
        self.due = due
        self.events: list[dict[str, Any]] = []
        self.links: list[Any] = []


def _take_due(held: dict[str, _HeldCall], now: float) -> list[_HeldCall]:
    """The held calls due by ``now`` (the longest waiting come first), out of ``held``."""
    due = []
    while held:
        call = next(iter(held.values()))
        if call.due > now:
            break
        due.append(held.pop(call.call_id))
    return due


class JournalWriter:
    """Which calls are journaled, and the writers that put their rounds in the store."""

    def __init__(
        self,
        store: JournalStore,
        *,
        keys: KeyRing,
        ttl: float,
        sample: float,
        metrics: Metrics | None,
        max_event_bytes: int = JOURNAL_MAX_EVENT_BYTES,
        max_bytes: int = 0,
    ) -> None:
        self.store = store
        self.keys = keys
        """Seals each event's payload: the store keeps no arguments, answers or results in
        the clear."""
        self.max_event_bytes = max_event_bytes
        """A payload larger than this loses its largest parts, named as truncated."""
        self.ttl = ttl
        """How long the store keeps journal events."""
        self.sample = sample
        """The share of calls journaled (checked in `engine.settings`)."""
        self._below = None if sample >= 1 else int(sample * 2**32)
        """Calls whose id hashes (CRC-32) below this are journaled; ``None``: every call."""
        self.metrics = metrics
        self._writers: list[_EventQueue] = []
        self._drained = anyio.Event()
        self.drops = JournalDrops(metrics)
        self.max_bytes = max_bytes
        """The cap on the journal's size in the store (0: none): `_trim` keeps it there."""
        self._trim = getattr(store, "trim_journal", None) if max_bytes else None
        self._written = max_bytes  # unknown at startup: checked at the first write
        """Bytes written since the store was last trimmed (what the records took, about)."""
        self._trimming = False
        self._trimmed_before = False

    def journals(self, call_id: str) -> bool:
        """Whether this call's rounds go to the journal: all of them or none, and the same
        answer on every replica, since it follows from the call id alone."""
        below = self._below
        return below is None or zlib.crc32(call_id.encode()) < below

    async def record(self, call_id: str, event: dict[str, Any]) -> None:
        """Journal a round, off the response's path when the writers run (see
        :meth:`run`); a journal failure is logged, never fails the call."""
        if not self.enqueue(call_id, event):
            await self._append(call_id, event)

    def enqueue(self, call_id: str, event: dict[str, Any]) -> bool:
        """Hand a round's event to the journal writers; ``False`` when none are running."""
        writers = self._writers
        if not writers:
            return False
        # One writer per call, so a call's events stay in order.
        writer = writers[0] if len(writers) == 1 else writers[hash(call_id) % len(writers)]
        metrics = self.metrics
        link = None if metrics is None or metrics.store_spans is None else metrics.trace_link()
        if not writer.put(call_id, event, link, event.get("kind") == INPUT_REQUIRED):
            self.drops.dropped(1, BEHIND)
        return True

    async def run(self, writers: int = 1, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Write journal events in the background, so a response never waits for them."""
        queues = [_EventQueue(JOURNAL_QUEUE) for _ in range(writers)]
        self._writers = queues
        self._drained = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                for queue in queues:
                    tg.start_soon(self._write_journal, queue)
                task_status.started()
        finally:
            self._writers = []
            self._drained.set()

    def close(self) -> bool:
        """Take no more events (a round then writes its own); the writers end once they have
        written what is queued. Whether any writers were running."""
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.close()
        return bool(writers)

    async def wait_written(self) -> None:
        """Until the writers that :meth:`close` ended have written their queues."""
        await self._drained.wait()

    async def _write_journal(self, queue: _EventQueue) -> None:
        events = queue.events
        held: dict[str, _HeldCall] = {}
        """The calls whose rounds wait for their end, the longest waiting first."""
        loop = asyncio.get_running_loop()
        while True:
            if not events:
                if queue.closed:
                    await self._write(_take_due(held, math.inf))
                    return
                if held:
                    await queue.wait(next(iter(held.values())).due)
                    if not events:
                        await self._write(_take_due(held, loop.time()))
                else:
                    await queue.wait(math.inf)
                continue
            if len(events) < JOURNAL_BATCH:  # let a batch gather: one round trip for many
                await asyncio.sleep(JOURNAL_LINGER)
            batch = [events.popleft() for _ in range(min(len(events), JOURNAL_BATCH))]
            now = loop.time()
            records: list[_HeldCall] = []
            for call_id, event, link, due in batch:
                call = held.get(call_id)
                if call is None:
                    call = _HeldCall(call_id, now + JOURNAL_HOLD if due is None else due)
                    if event.get("kind") == INPUT_REQUIRED:
                        held[call_id] = call
                    else:
                        records.append(call)
                elif event.get("kind") != INPUT_REQUIRED or len(call.events) >= JOURNAL_HOLD_ROUNDS:
                    del held[call_id]
                    records.append(call)
                call.events.append(event)
                if link is not None:
                    call.links.append(link)
            records += _take_due(held, now)
            while len(held) > JOURNAL_QUEUE:  # a burst of open calls: the longest held go now
                records.append(held.pop(next(iter(held))))
            await self._write(records)

    async def _write(self, records: list[_HeldCall]) -> None:
        """One round trip for the records of these calls (each its rounds so far)."""
        if not records:
            return
        rounds = sum(len(call.events) for call in records)
        try:
            sealed = [(call.call_id, self.sealed(call.events)) for call in records]
            started = perf_counter()
            await self.store.append_many(sealed, self.ttl)
        except StoreUnavailable as exc:  # a batch the store wrote in part counts whole
            self.drops.dropped(rounds, refused(exc))
            return
        except TypeError as exc:
            self.drops.dropped(rounds, f"not serialisable: {exc}")
            return
        except Exception as exc:  # a store's own bug: the journal must not stop the server
            log.exception("journal write failed unexpectedly")
            self.drops.dropped(rounds, f"the store failed ({type(exc).__name__})")
            return
        self.drops.written()
        if self.metrics is not None:
            links = [link for call in records for link in call.links]
            self.metrics.store_operation("journal", perf_counter() - started, links)
        if self._trim is not None:
            self._written += sum(len(record["sealed"]) + ROW_BYTES for _, record in sealed)
            if self._written * TRIM_EVERY >= self.max_bytes and not self._trimming:
                await self._trim_store(self._trim)

    async def _trim_store(self, trim: Any) -> None:
        """Purge the journal's oldest calls if it is past its cap; one line the first time,
        the count in the metric always."""
        self._trimming = True
        self._written = 0
        try:
            purged = await trim(self.max_bytes)
        except StoreUnavailable as exc:
            log.debug("journal not trimmed: %s", exc)
            return
        finally:
            self._trimming = False
        if not purged:
            return
        if self.metrics is not None:
            self.metrics.add("engine_journal_calls_purged_total", purged)
        if not self._trimmed_before:
            self._trimmed_before = True
            log.warning(
                "the journal reached journal_max_bytes (%d bytes): its oldest calls are purged "
                "as new ones come (%d now; counted in engine_journal_calls_purged_total, not "
                "logged again); raise journal_max_bytes (ENGINE_JOURNAL_MAX_BYTES) to keep more",
                self.max_bytes,
                purged,
            )

    def sealed(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        """A call's rounds as the store keeps them: one record, sealed, each round capped."""
        return seal_rounds(events, self.keys, self.max_event_bytes)

    async def _append(self, call_id: str, event: dict[str, Any]) -> None:
        try:
            await self.store.append(call_id, self.sealed([event]), self.ttl)
        except StoreUnavailable as exc:
            self.drops.dropped(1, refused(exc))
        except TypeError as exc:
            self.drops.dropped(1, f"not serialisable: {exc}")
        else:
            self.drops.written()
