"""What a store adds to a call: state by reference, single-use rounds, one body run, a journal.

With a store configured, each retry first *claims* the round its token was minted for. The first
attempt runs; a duplicate with the same answers gets the first attempt's response byte for byte;
a concurrent duplicate waits (bounded) for it, then gets a state-only ``input_required`` that
tells the client to retry; different answers for an already used round are refused. So a tool
body never runs twice for one call, whichever replicas the duplicates reach.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from pydantic_core import to_json

from engine._internal.metrics import Metrics
from engine._internal.random_pool import random_bytes
from engine.errors import InvalidRequestState, MCPError, StoreOutage
from engine.state.claims import StateRef, _sorted
from stores import Claim, Store, StoreUnavailable

log = logging.getLogger("engine.store_services.ledger")

JOURNAL_LINGER = 0.005
"""Seconds a journal writer waits after an event for others to share its round trip (not when
a whole batch is already waiting: under load it writes back to back)."""
JOURNAL_BATCH = 200
"""Events a journal writer sends in one round trip at most."""
JOURNAL_QUEUE = 2048
"""Events waiting for a journal writer beyond which new ones are dropped (and counted)."""

DROP_WARNING_INTERVAL = 10.0
"""Seconds between warnings about journal events dropped under overload."""
_NOT_HELD = contextlib.nullcontext()

Deferred = tuple[Callable[[], Awaitable[None]], str, float]
"""A store write to retry: the write, what it is (for the log), until when (monotonic)."""


def store_error(exc: StoreUnavailable, metrics: Metrics | None = None) -> MCPError:
    log.error("store unavailable: %s", exc)
    if metrics is not None:
        metrics.inc("engine_store_errors_total")
    return StoreOutage()


def check_journal_sample(sample: float) -> float:
    """The share of calls to journal, checked: a number from 0 (none) to 1 (every call)."""
    if (
        isinstance(sample, bool)
        or not isinstance(sample, (int, float))
        or not math.isfinite(sample)
        or not 0 <= sample <= 1
    ):
        raise ValueError(
            "journal_sample (ENGINE_JOURNAL_SAMPLE) must be a number from 0 (journal no call) "
            f"to 1 (every call), got {sample!r}; 0.1 journals one call in ten, each with all its "
            "rounds"
        )
    return float(sample)


def responses_fingerprint(responses: Any) -> bytes:
    """What makes two retries of one round the same request: their answers."""
    canonical = to_json(_sorted(responses) if responses is not None else None, fallback=str)
    return hashlib.sha256(canonical).digest()[:16]


@dataclass(slots=True, eq=False)
class Hold:
    """A round this attempt claimed: what it must settle, renew or give back (never changed
    once made; not frozen, since a frozen dataclass costs twice as much to build, every round).

    Compared and hashed by identity: each attempt's hold is its own, even for the same round.
    """

    call_id: str
    round_no: int
    fingerprint: bytes
    owner: bytes


class _Holding:
    """Keeps a claim in the renewer's set while a round runs (a class: a generator-based
    context manager costs several times more on every claimed round)."""

    __slots__ = ("held", "hold")

    def __init__(self, held: set[Hold], hold: Hold) -> None:
        self.held = held
        self.hold = hold

    def __enter__(self) -> None:
        self.held.add(self.hold)

    def __exit__(self, *exc_info: object) -> None:
        self.held.discard(self.hold)


class _EventQueue:
    """One journal writer's queue: events in order, dropped when ``limit`` are waiting.

    A deque and a wake-up rather than a memory object stream: every round puts an event here,
    and this single-consumer, never-blocking case needs none of a stream's machinery.
    """

    __slots__ = ("closed", "events", "limit", "wake")

    def __init__(self, limit: int) -> None:
        self.events: deque[tuple[str, dict[str, Any]]] = deque()
        self.limit = limit
        self.wake = anyio.Event()
        self.closed = False

    def put(self, item: tuple[str, dict[str, Any]]) -> bool:
        """Queue an event; ``False`` when the queue is full (the event is not queued)."""
        if len(self.events) >= self.limit:
            return False
        self.events.append(item)
        wake = self.wake
        if not wake.is_set():
            wake.set()
        return True

    def close(self) -> None:
        """The writer ends once it has written what is queued."""
        self.closed = True
        self.wake.set()


@dataclass(slots=True)
class Admission:
    """The claim's verdict: run (``hold``), answer from ``cached`` bytes, or ask to ``retry``."""

    hold: Hold | None = None
    cached: bytes | None = None
    retry: bool = False


class Ledger:
    """The engine's use of a :class:`~stores.Store` for one server."""

    def __init__(
        self,
        store: Store,
        *,
        ttl: int,
        wait_duplicates: float,
        journal_ttl: float,
        metrics: Metrics | None = None,
        lease: float = 30.0,
        journal_sample: float = 1.0,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.lease = min(lease, ttl)
        self.wait_duplicates = wait_duplicates
        self.journal_ttl = journal_ttl
        self.journal_sample = journal_sample
        """The share of calls journaled (checked by the server: `check_journal_sample`)."""
        self._journal_below = None if journal_sample >= 1 else int(journal_sample * 2**32)
        """Calls whose id hashes (CRC-32) below this are journaled; ``None``: every call."""
        self.metrics = metrics
        self._deferred, self._pending = anyio.create_memory_object_stream[Deferred](10_000)
        self._writers: list[_EventQueue] = []
        self._held: set[Hold] = set()
        self._drained = anyio.Event()
        self._dropped = 0
        """Journal events dropped since the last warning about them."""
        self._warned_at = -DROP_WARNING_INTERVAL
        self._retrying = 0
        """Writes handed to :meth:`run_deferred` and not yet done or given up."""
        self._retried: anyio.Event | None = None
        """Set when nothing is left to retry, while :meth:`flush` waits for that."""
        self._hurry = anyio.Event()
        """Set by :meth:`flush`: a retry waiting out its backoff tries again at once."""

    async def admit(self, call_id: str, round_no: int, fingerprint: bytes) -> Admission:
        """Claim a round for this attempt, with a short lease (see :meth:`keep_alive`)."""
        hold = Hold(call_id, round_no, fingerprint, random_bytes(16))
        try:
            claim = await self.store.claim(
                call_id, round_no, fingerprint, self.lease, owner=hold.owner
            )
        except StoreUnavailable as exc:
            # The claim may have landed all the same: give it back once the store answers, or
            # every retry of this round would wait for an owner that is not running it.
            self._defer(self._releaser(hold), f"the release of a claim on call {call_id}")
            raise store_error(exc, self.metrics) from None
        try:
            if claim.status is Claim.FRESH:
                return Admission(hold=hold)
            if claim.status is Claim.DUPLICATE:
                return Admission(cached=claim.response)
            if claim.status is Claim.CONFLICT:
                raise InvalidRequestState("round already answered with other inputResponses")
            response = await self.store.wait_complete(
                call_id, round_no, fingerprint, self.wait_duplicates
            )
        except StoreUnavailable as exc:
            raise store_error(exc, self.metrics) from None
        if response is not None:
            return Admission(cached=response)
        return Admission(retry=True)

    def keep_alive(self, hold: Hold | None) -> contextlib.AbstractContextManager[None]:
        """Keep the claim's lease renewed while the round runs.

        A claim lives ``lease`` seconds unless renewed, so a round whose replica died is free to
        run again soon, instead of answering "retry" until the full TTL passes. One renewer per
        process serves every held claim (see :meth:`run_renewer`), so holding one costs a set
        insertion, not a task.
        """
        return _NOT_HELD if hold is None else _Holding(self._held, hold)

    async def run_renewer(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Every third of a lease, renew every claim this process holds."""
        task_status.started()
        while True:
            await anyio.sleep(self.lease / 3)
            for hold in list(self._held):
                try:
                    held = await self.store.renew(
                        hold.call_id, hold.round_no, hold.fingerprint, hold.owner, self.lease
                    )
                except StoreUnavailable as exc:
                    log.warning("could not renew the claim on call %s: %s", hold.call_id, exc)
                    continue
                if not held and hold in self._held:
                    log.warning(
                        "lost the claim on round %s of call %s while running it",
                        hold.round_no,
                        hold.call_id,
                    )
                    self._held.discard(hold)

    async def settle(self, hold: Hold, response: bytes) -> None:
        """Keep the round's response for duplicates, for the full TTL.

        The body has run by now, so the response is delivered even when the store is down;
        keeping it is then retried in the background while the process runs (for one TTL).
        """
        complete = self.store.complete
        try:
            await complete(hold.call_id, hold.round_no, hold.fingerprint, response, self.ttl)
        except StoreUnavailable as exc:
            what = f"the response of round {hold.round_no} of call {hold.call_id}"
            write = partial(
                complete, hold.call_id, hold.round_no, hold.fingerprint, response, self.ttl
            )
            self._retry_later(write, what, exc)

    async def abandon(self, hold: Hold) -> None:
        """Give the round back after a failure that produced no response to keep."""
        with anyio.CancelScope(shield=True):
            what = f"the release of round {hold.round_no} of call {hold.call_id}"
            await self._write_or_defer(self._releaser(hold), what)

    def _releaser(self, hold: Hold) -> Callable[[], Awaitable[None]]:
        async def write() -> None:
            await self.store.release(
                hold.call_id, hold.round_no, hold.fingerprint, owner=hold.owner
            )

        return write

    async def _write_or_defer(self, write: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            await write()
        except StoreUnavailable as exc:
            self._retry_later(write, what, exc)

    def _retry_later(
        self, write: Callable[[], Awaitable[None]], what: str, exc: StoreUnavailable
    ) -> None:
        log.warning("store unavailable, will retry writing %s: %s", what, exc)
        self._defer(write, what)

    def _defer(self, write: Callable[[], Awaitable[None]], what: str) -> None:
        try:
            self._deferred.send_nowait((write, what, time.monotonic() + self.ttl))
        except anyio.WouldBlock:
            log.error("too many deferred store writes; %s is lost", what)
        else:
            self._retrying += 1

    async def run_deferred(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Retry the writes that failed while the store was down, oldest first."""
        task_status.started()
        async for write, what, deadline in self._pending:
            try:
                await self._retry(write, what, deadline)
            finally:
                self._retrying -= 1
                if not self._retrying and self._retried is not None:
                    self._retried.set()

    async def _retry(
        self, write: Callable[[], Awaitable[None]], what: str, deadline: float
    ) -> None:
        delay = 0.2
        while True:
            try:
                await write()
            except StoreUnavailable:
                if time.monotonic() + delay > deadline:
                    log.error("gave up writing %s: the store stayed unavailable", what)
                    return
                hurry = self._hurry
                with anyio.move_on_after(delay):
                    await hurry.wait()
                delay = 0.2 if hurry.is_set() else min(delay * 2, 5.0)
            except Exception:  # one write the store refuses must not end the others' retries
                log.exception("gave up writing %s: the store refused it", what)
                return
            else:
                log.info("wrote %s once the store was back", what)
                return

    async def spill(self, call_id: str, state: bytes) -> StateRef:
        blob_id = random_bytes(9).hex()
        try:
            await self.store.put_blob(call_id, blob_id, state, self.ttl)
        except StoreUnavailable as exc:
            raise store_error(exc, self.metrics) from None
        if self.metrics is not None:
            self.metrics.inc("engine_state_spills_total")
        return StateRef(blob_id, hashlib.sha256(state).digest())

    async def fetch(self, call_id: str, ref: StateRef) -> bytes:
        try:
            blob = await self.store.get_blob(call_id, ref.blob_id)
        except StoreUnavailable as exc:
            raise store_error(exc, self.metrics) from None
        if blob is None:
            raise InvalidRequestState("state blob missing or expired")
        if hashlib.sha256(blob).digest() != ref.sha256:
            raise InvalidRequestState("state blob does not match its digest")
        return blob

    def journals(self, call_id: str) -> bool:
        """Whether this call's rounds go to the journal: all of them or none, and the same
        answer on every replica, since it follows from the call id alone."""
        below = self._journal_below
        return below is None or zlib.crc32(call_id.encode()) < below

    async def record(self, call_id: str, event: dict[str, Any]) -> None:
        """Journal a round, off the response's path when the writers run (see
        :meth:`run_journal`); a journal failure is logged, never fails the call."""
        if not self.enqueue(call_id, event):
            await self._append(call_id, event)

    def enqueue(self, call_id: str, event: dict[str, Any]) -> bool:
        """Hand a round's event to the journal writers; ``False`` when none are running."""
        writers = self._writers
        if not writers:
            return False
        # One writer per call, so a call's events stay in order.
        writer = writers[0] if len(writers) == 1 else writers[hash(call_id) % len(writers)]
        if not writer.put((call_id, event)):
            self._dropped_event()
        return True

    def _dropped_event(self) -> None:
        """Count a journal event dropped because the writers are behind; warn at most every
        ``DROP_WARNING_INTERVAL`` seconds (a warning per event would add to the overload)."""
        self._dropped += 1
        if self.metrics is not None:
            self.metrics.inc("engine_journal_events_dropped_total")
        now = time.monotonic()
        if now - self._warned_at >= DROP_WARNING_INTERVAL:
            log.warning(
                "journal writers are behind the calls: %d journal events not written; the "
                "store is too slow or too far for this load (engine_journal_events_dropped_total "
                "counts them)",
                self._dropped,
            )
            self._dropped = 0
            self._warned_at = now

    async def run_journal(
        self, writers: int = 1, *, task_status: Any = anyio.TASK_STATUS_IGNORED
    ) -> None:
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

    async def flush(self, within: float = 2.0) -> None:
        """At shutdown, within ``within`` seconds: the writes that failed while the store was
        down are retried, and the journal writers write the events queued so far."""
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.close()
        # Shielded: a shutdown that comes as a cancellation (Ctrl-C on stdio) drains too.
        with anyio.CancelScope(shield=True), anyio.move_on_after(within):
            if self._retrying:
                self._retried = anyio.Event()
                self._hurry.set()  # the store may be back: no retry waits out its backoff
                self._hurry = anyio.Event()
                await self._retried.wait()
            if writers:
                await self._drained.wait()
        self._retried = None
        if self._retrying:
            log.warning(
                "shutting down with %d store writes that failed still to retry (responses kept "
                "for duplicate retries, claims given back): once the claims of those rounds "
                "lapse, a retry runs the round again",
                self._retrying,
            )

    async def _write_journal(self, queue: _EventQueue) -> None:
        events = queue.events
        while True:
            if not events:
                if queue.closed:
                    return
                queue.wake = anyio.Event()
                await queue.wake.wait()
                continue
            if len(events) < JOURNAL_BATCH:  # let a batch gather: one round trip for many
                await anyio.sleep(JOURNAL_LINGER)
            batch = [events.popleft() for _ in range(min(len(events), JOURNAL_BATCH))]
            try:
                await self.store.append_many(batch, self.journal_ttl)
            except StoreUnavailable as exc:
                log.warning("%d journal events not written: %s", len(batch), exc)
            except TypeError as exc:
                log.warning("journal events not serialisable: %s", exc)

    async def _append(self, call_id: str, event: dict[str, Any]) -> None:
        try:
            await self.store.append(call_id, event, self.journal_ttl)
        except StoreUnavailable as exc:
            log.warning("journal event for call %s not written: %s", call_id, exc)
        except TypeError as exc:
            log.warning("journal event for call %s not serialisable: %s", call_id, exc)
