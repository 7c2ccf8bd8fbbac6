"""Budgets: how much of a replica one principal may hold, so no user takes what others need.

A budget is counted per principal key (:func:`principal_key`): the authenticated principal
when the server has one, else the client's network address. A request over a budget is refused
before it holds anything, with an error naming the limit and the setting that sets it, and
``engine_budget_refusals_total{budget=<setting>}`` counts it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from engine._internal.metrics import Metrics
from engine.errors import MCPError

BUDGET_REFUSALS = "engine_budget_refusals_total"

ANONYMOUS = "local"
"""The key of a request with neither a principal nor a network address (stdio, in-process)."""


def principal_key(principal: str | None, client: str | None) -> str:
    """Whose budget a request draws on: the principal, or else the client's address.

    Behind a proxy every client shares the proxy's address: give the server a ``principal``
    callback (or auth) to tell them apart.
    """
    if principal is not None:
        return "principal:" + principal
    if client is not None:
        return "address:" + client
    return ANONYMOUS


def over_budget(
    metrics: Metrics | None,
    code: int,
    setting: str,
    limit: float,
    text: str,
    reason: str = "over_budget",
) -> MCPError:
    """The refusal of a request over the budget ``setting`` (counted): ``text`` says what was
    reached and what to do; the limit and the setting are appended."""
    if metrics is not None:
        metrics.inc(BUDGET_REFUSALS, budget=setting)
    message = f"{text} (limit {limit:g}, set by {setting})"
    data: dict[str, Any] = {"reason": reason, "limit": limit, "setting": setting}
    return MCPError(code, message, data)


class ExpiringCounts:
    """Things each key holds until they expire, a fixed time after they were taken: how many a
    key holds now, and all keys together. Memory is bounded by ``total`` entries, which the
    caller bounds."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self._expiries: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def _prune(self, expiries: deque[float], now: float) -> None:
        while expiries and expiries[0] <= now:
            expiries.popleft()

    def held(self, key: str, now: float | None = None) -> int:
        """How many ``key`` holds that have not expired."""
        now = time.monotonic() if now is None else now
        expiries = self._expiries.get(key)
        if expiries is None:
            return 0
        self._prune(expiries, now)
        if not expiries:
            del self._expiries[key]
            return 0
        return len(expiries)

    def total(self, now: float | None = None) -> int:
        """How many all keys hold together."""
        self._prune(self._all, time.monotonic() if now is None else now)
        return len(self._all)

    def take(self, key: str, now: float | None = None) -> None:
        """``key`` holds one more, until ``lifetime`` from now."""
        until = (time.monotonic() if now is None else now) + self.lifetime
        self._expiries.setdefault(key, deque()).append(until)
        self._all.append(until)


class RateLimit:
    """A token bucket per key: ``per_minute`` at most in any minute, refilled evenly. A key is
    forgotten once its bucket is full again, so only keys active in the last minute are kept."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}
        """Tokens left, and when they were counted, by key."""

    def allow(self, key: str, now: float | None = None) -> bool:
        """Take one token of ``key``'s bucket; ``False`` (none taken) when it is empty."""
        now = time.monotonic() if now is None else now
        capacity = float(self.per_minute)
        left, at = self._buckets.get(key, (capacity, now))
        left = min(capacity, left + (now - at) * capacity / 60.0)
        if left < 1.0:
            self._buckets[key] = (left, now)
            return False
        self._buckets[key] = (left - 1.0, now)
        if len(self._buckets) > 4096:
            self._forget_full(now)
        return True

    def _forget_full(self, now: float) -> None:
        capacity = float(self.per_minute)
        full = [
            key
            for key, (left, at) in self._buckets.items()
            if left + (now - at) * capacity / 60.0 >= capacity
        ]
        for key in full:
            del self._buckets[key]


__all__ = [
    "ANONYMOUS",
    "BUDGET_REFUSALS",
    "ExpiringCounts",
    "RateLimit",
    "over_budget",
    "principal_key",
]
