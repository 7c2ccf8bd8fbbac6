"""How far this replica's clock is from its store's.

Leases and hold expiries are decided on the store's clock, so a replica whose clock is off
neither takes over live tasks nor lets its own holds lapse; but its tokens' times, its logs and
its journal's times are its own. The skew is measured now and then (the store's time, against
this clock at the middle of the round trip) and shown: a gauge for ``/metrics``, and a line in
``/healthz`` once it is beyond a quarter of a lease.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio

from stores import StoreLifecycle, StoreUnavailable

log = logging.getLogger(__name__)

CHECK_INTERVAL = 10.0
"""Seconds between two measurements."""
MAX_ROUND_TRIP = 1.0
"""A measurement whose round trip took longer says too little about the skew: not taken."""


class StoreClock:
    """The skew of this replica's wall clock from its store's, measured every `CHECK_INTERVAL`."""

    def __init__(self, store: StoreLifecycle, *, tolerance: float) -> None:
        self.store = store
        self.tolerance = tolerance
        """Skew beyond this (a quarter of a lease) is reported."""
        self.skew: float | None = None
        """Seconds this replica's clock is ahead of the store's (behind: negative); ``None``
        until measured."""
        self._reported = False

    async def measure(self) -> float | None:
        """Measure the skew once; the new value, or ``None`` when the store did not answer
        quickly enough to tell."""
        clock = getattr(self.store, "clock", None)  # a store of one's own may not tell its time
        if clock is None:
            return None
        started = time.monotonic()
        wall = time.time()
        try:
            theirs: float = await clock()
        except StoreUnavailable:
            return None
        trip = time.monotonic() - started
        if trip > MAX_ROUND_TRIP:
            return None
        self.skew = skew = wall + trip / 2 - theirs
        beyond = abs(skew) > self.tolerance
        if beyond and not self._reported:
            log.warning(
                "this replica's clock is %+.1f s from the store's, more than a quarter of a "
                "lease (%g s): synchronise it (NTP). Leases are decided on the store's clock, but "
                "other replicas refuse its requestStates once it is off by more than clock_skew",
                skew,
                self.tolerance,
            )
        elif not beyond and self._reported:
            log.info("this replica's clock is back within %g s of the store's", self.tolerance)
        self._reported = beyond
        return skew

    def details(self) -> dict[str, Any] | None:
        """What ``/healthz`` shows of the skew: nothing while it is within the tolerance."""
        skew = self.skew
        if skew is None or abs(skew) <= self.tolerance:
            return None
        return {"seconds": round(skew, 3), "tolerance": self.tolerance}

    def gauge(self) -> list[str]:
        """The skew as a Prometheus gauge, for ``/metrics``."""
        name = "engine_store_clock_skew_seconds"
        lines = [
            f"# HELP {name} Seconds this replica's clock is ahead of the store's (measured).",
            f"# TYPE {name} gauge",
        ]
        if self.skew is not None:
            lines.append(f"{name} {self.skew:.6f}")
        return lines

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.measure()
            await anyio.sleep(CHECK_INTERVAL)


__all__ = ["StoreClock"]
