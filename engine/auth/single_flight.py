"""One request to the authorization server for every request that needs its answer, and a pause
after it fails.

A verifier that must ask its provider (for the key set, or about a token) while many requests
wait would otherwise ask once per request, one after another when the provider hangs, each
waiting out the timeout. A :class:`Flight` is the one question in the air: the request that
starts it runs it to its end in a shielded scope under its own deadline (so the others do not
lose it when that request goes away), and every request waiting on it gets its answer, or its
failure, at the same moment. After a failure, :class:`Backoff` keeps the verifier from asking
again for a while; a request that needs the provider meanwhile is refused at once with
:class:`VerifierUnavailable` and the time to retry after.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")

FIRST_BACKOFF = 1.0
"""Seconds without asking after a first failure; each further failure doubles it."""
LONGEST_BACKOFF = 30.0
"""The pause stops doubling here."""


class VerifierUnavailable(Exception):
    """The verifier cannot decide now: the request is answered 503, with ``Retry-After``.

    ``limit`` names the limit that refused the request without asking the provider (a backoff,
    a rate), for the metrics; ``None`` when the provider was asked and did not answer.
    """

    def __init__(self, message: str, *, retry_after: float = 5.0, limit: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.limit = limit

    @property
    def retry_after_header(self) -> bytes:
        """Whole seconds, at least one (``Retry-After`` takes no fraction)."""
        return b"%d" % max(1, math.ceil(self.retry_after))


class Flight(Generic[T]):
    """One question to the provider, and its outcome once answered."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: T | None = None
        self.failure: str | None = None
        """Why it failed, for every waiter's error (each raises an exception of its own)."""

    async def fly(
        self, ask: Callable[[], Awaitable[T]], within: float, errors: tuple[type[Exception], ...]
    ) -> None:
        """Ask, shielded from the caller's cancellation and given ``within`` seconds; the outcome
        is set and the waiters woken whatever happens. ``errors`` are the provider's failures
        (others are bugs, and propagate to the caller too)."""
        self.failure = "the verifier failed"
        try:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(within) as deadline:
                    try:
                        self.value = await ask()
                        self.failure = None
                    except errors as exc:
                        self.failure = str(exc) or type(exc).__name__
                if deadline.cancelled_caught:
                    self.failure = f"no answer within {within:g} s"
        finally:
            self.done.set()

    async def outcome(self) -> tuple[T | None, str | None]:
        """Wait for the answer: ``(value, None)``, or ``(None, why it failed)``."""
        await self.done.wait()
        return self.value, self.failure


class Backoff:
    """After a failure, no question for ``FIRST_BACKOFF`` seconds, doubling with each further
    failure up to ``LONGEST_BACKOFF``; an answer resets it."""

    def __init__(self) -> None:
        self.until = 0.0
        self.pause = 0.0

    def failed(self) -> None:
        self.pause = min(LONGEST_BACKOFF, self.pause * 2 or FIRST_BACKOFF)
        self.until = time.monotonic() + self.pause

    def succeeded(self) -> None:
        self.pause = 0.0
        self.until = 0.0

    def remaining(self) -> float:
        """Seconds until the provider may be asked again (0: now)."""
        if not self.until:
            return 0.0
        return max(0.0, self.until - time.monotonic())


__all__ = ["Backoff", "Flight", "VerifierUnavailable"]
