"""A clock that moves only when a test moves it, for the stores that take a ``clock``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Elapse = Callable[[float], Awaitable[None]]
"""Lets that many seconds of a store's time pass (see the ``elapse`` fixture)."""


class FakeClock:
    """Seconds from 1e9: far from both the wall clock and the monotonic one, so that a store
    reading either instead of this clock, even in one place, gets its expiries wrong."""

    def __init__(self) -> None:
        self._now = 1e9

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time only moves forward, got {seconds}")
        self._now += seconds
