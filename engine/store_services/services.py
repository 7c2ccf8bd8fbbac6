"""The store services of one server, built together and started and stopped together."""

from __future__ import annotations

from typing import Any

import anyio

from engine._internal.metrics import Metrics
from engine.settings import DEFAULT_CLAIM_LEASE, JOURNAL_MAX_EVENT_BYTES
from engine.state.seal import KeyRing
from engine.store_services.journal_writer import JournalWriter
from engine.store_services.retries import DeferredWrites
from engine.store_services.single_use import RoundClaims
from engine.store_services.spill import StateSpill
from engine.store_services.store_clock import StoreClock
from stores import Store


class StoreServices:
    """What a store adds to a server's calls: single-use rounds (``claims``), state by
    reference (``state``), the journal (``journal``), the writes retried while the store
    is down (``retries``), and how far this replica's clock is from the store's (``clock``)."""

    __slots__ = ("claims", "clock", "journal", "retries", "state")

    def __init__(
        self,
        store: Store,
        *,
        keys: KeyRing,
        ttl: int,
        wait_duplicates: float,
        journal_ttl: float,
        metrics: Metrics | None = None,
        lease: float = DEFAULT_CLAIM_LEASE,
        journal_sample: float = 1.0,
        journal_max_event_bytes: int = JOURNAL_MAX_EVENT_BYTES,
        journal_max_bytes: int = 0,
        skew_tolerance: float | None = None,
    ) -> None:
        self.retries = DeferredWrites(ttl=ttl)
        self.claims = RoundClaims(
            store,
            self.retries,
            keys=keys,
            ttl=ttl,
            wait_duplicates=wait_duplicates,
            lease=lease,
            metrics=metrics,
        )
        self.state = StateSpill(store, keys=keys, ttl=ttl, metrics=metrics)
        self.journal = JournalWriter(
            store,
            keys=keys,
            ttl=journal_ttl,
            sample=journal_sample,
            metrics=metrics,
            max_event_bytes=journal_max_event_bytes,
            max_bytes=journal_max_bytes,
        )
        tolerance = lease / 4 if skew_tolerance is None else skew_tolerance
        self.clock = StoreClock(store, tolerance=tolerance)
        if metrics is not None:
            metrics.gauges.append(self.clock.gauge)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The background work, until cancelled: retrying failed writes, writing the journal,
        renewing the leases of held claims, measuring the store's clock."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.clock.run)
            await tg.start(self.retries.run)
            await tg.start(self.journal.run)
            await tg.start(self.claims.run)
            task_status.started()

    async def flush(self, within: float = 2.0) -> None:
        """At shutdown, within ``within`` seconds: the writes that failed while the store was
        down are retried, and the journal writers write the events queued so far; then what
        is still to retry is logged."""
        closed = self.journal.close()
        # Shielded: a shutdown that comes as a cancellation (Ctrl-C on stdio) drains too.
        with anyio.CancelScope(shield=True), anyio.move_on_after(within):
            await self.retries.wait_retried()
            if closed:
                await self.journal.wait_written()
        self.retries.warn_left()
