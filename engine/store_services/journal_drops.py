"""Journal events that never reached the store: counted, and logged once per burst.

The journal is best effort, so an event is dropped rather than wait: when the writers are behind
the calls (their queue is full), or when the store refuses its write (down, out of memory,
locked by another process, its disk full). Every dropped event is counted in
``engine_journal_events_dropped_total``. A line per failed write would add to the trouble it
reports, so a burst of drops is logged twice: a warning at its first drop, naming the cause, and
a line with the count once the journal is written again.
"""

from __future__ import annotations

import logging
import time

from engine._internal.metrics import Metrics

log = logging.getLogger("engine.store_services.journal_writer")

BURST_QUIET = 1.0
"""Seconds without a drop after which a successful write ends a burst (under overload, writes
succeed between drops: the burst goes on)."""


def refused(exc: BaseException) -> str:
    """Why the store refused a write, without the advice to retry meant for a request."""
    said = str(exc).partition(" The request can be retried")[0].rstrip(". ")
    return f"the store refused them ({said})"


class JournalDrops:
    """The count of dropped journal events, and the burst the latest ones belong to."""

    __slots__ = ("_in_burst", "_last_drop", "metrics")

    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._in_burst = 0
        """Events dropped in the current burst (0: none is going on)."""
        self._last_drop = 0.0

    def dropped(self, count: int, why: str) -> None:
        """``count`` events were not written, because of ``why``."""
        if self.metrics is not None:
            self.metrics.add("engine_journal_events_dropped_total", count)
        if not self._in_burst:
            log.warning(
                "journal events dropped: %s; until the journal is written again, drops are "
                "counted in engine_journal_events_dropped_total and not logged",
                why,
            )
        self._in_burst += count
        self._last_drop = time.monotonic()

    def written(self) -> None:
        """A write of the journal succeeded: the end of a burst, if drops have stopped."""
        if self._in_burst and time.monotonic() - self._last_drop >= BURST_QUIET:
            log.warning(
                "the journal is written again; %d journal events were dropped "
                "(engine_journal_events_dropped_total)",
                self._in_burst,
            )
            self._in_burst = 0
