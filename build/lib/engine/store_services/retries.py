"""Store writes that must outlive a short store outage, retried in the background.

Some writes cannot fail with the request that made them: a round's response to keep (its body
has run) and a claim to give back. When the store does not answer, such a write is queued and
retried, oldest first, with a backoff, for up to one TTL while the process runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from stores import StoreUnavailable

log = logging.getLogger(__name__)

Write = Callable[[], Awaitable[None]]
"""One store write, ready to be tried again."""
Deferred = tuple[Write, str, float]
"""A store write to retry: the write, what it is (for the log), until when (monotonic)."""

DEFERRED_LIMIT = 10_000
"""Writes waiting to be retried beyond which a new one is lost (and logged)."""


class DeferredWrites:
    """The writes that failed while the store was down, retried by :meth:`run`."""

    def __init__(self, *, ttl: float) -> None:
        self.ttl = ttl
        """How long a write is retried: the life of what it writes."""
        self._send, self._receive = anyio.create_memory_object_stream[Deferred](DEFERRED_LIMIT)
        self.pending = 0
        """Writes deferred and not yet done or given up."""
        self._retried: anyio.Event | None = None
        """Set when nothing is left to retry, while :meth:`wait_retried` waits for that."""
        self._hurry = anyio.Event()
        """Set by :meth:`wait_retried`: a retry waiting out its backoff tries again at once."""

    async def write_or_defer(self, write: Write, what: str) -> None:
        """Write now, or later if the store does not answer."""
        try:
            await write()
        except StoreUnavailable as exc:
            self.retry_later(write, what, exc)

    def retry_later(self, write: Write, what: str, exc: StoreUnavailable) -> None:
        """Defer a write that just failed with ``exc``, saying so in the log."""
        log.warning("store unavailable, will retry writing %s: %s", what, exc)
        self.defer(write, what)

    def defer(self, write: Write, what: str) -> None:
        """Queue a write for :meth:`run` to retry."""
        try:
            self._send.send_nowait((write, what, time.monotonic() + self.ttl))
        except anyio.WouldBlock:
            log.error("too many deferred store writes; %s is lost", what)
        else:
            self.pending += 1

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Retry the writes that failed while the store was down, oldest first."""
        task_status.started()
        async for write, what, deadline in self._receive:
            try:
                await self._retry(write, what, deadline)
            finally:
                self.pending -= 1
                if not self.pending and self._retried is not None:
                    self._retried.set()

    async def _retry(self, write: Write, what: str, deadline: float) -> None:
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

    async def wait_retried(self) -> None:
        """Until no write is left to retry; at shutdown, since the store may be back, a retry
        waiting out its backoff tries again at once (bound it with a timeout)."""
        if not self.pending:
            return
        self._retried = retried = anyio.Event()
        self._hurry.set()
        self._hurry = anyio.Event()
        try:
            await retried.wait()
        finally:
            self._retried = None

    def warn_left(self) -> None:
        """At shutdown, say what is left to retry, and what that means for the calls."""
        if self.pending:
            log.warning(
                "shutting down with %d store writes that failed still to retry (responses kept "
                "for duplicate retries, claims given back): once the claims of those rounds "
                "lapse, a retry runs the round again",
                self.pending,
            )
