"""The journal's calls as a listing shows them: each call's row, with who made it and which
server served it, filtered and paged.

The store lists calls by time and tool (`stores.Store.calls`); the rest of a row (the server,
the principal, sealed with the server's keys) is in the call's events. ``python -m engine
calls`` and the journal's web page both list calls with :func:`list_calls`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from engine.store_services.journal_records import is_sealed, open_rounds, rounds_in
from stores import CallSummary, JournalStore

SEALED = "(sealed)"
"""The principal of a call whose events the keys given do not open (or no keys were given)."""

SCANNED_AT_MOST = 1000
"""Calls looked at, at most, for one page of a listing filtered by what the store does not
index (the server, the principal, the outcome): a page may then come out short."""

OUTCOMES = {
    "complete": ("complete",),
    "error": ("error", "failed"),
    "waiting": ("input_required", "task"),
    "cancelled": ("cancelled",),
}
"""The outcomes a listing filters by, and the last kinds of the calls each one takes."""


@dataclass(frozen=True)
class CallSource:
    """Which server served a call (``None`` in journals written before servers were named),
    and who made it."""

    server: str | None
    principal: str | None
    rounds: int
    """The rounds journaled (a record may hold several: counted in the clear)."""


@dataclass(frozen=True)
class ListedCall:
    """One row of a listing: the store's summary of the call and where it came from."""

    summary: CallSummary
    source: CallSource


@dataclass(frozen=True)
class CallFilter:
    """What a listing keeps: every field ``None`` keeps every call."""

    tool: str | None = None
    server: str | None = None
    principal: str | None = None
    outcome: str | None = None
    """A key of :data:`OUTCOMES`."""
    since: float | None = None
    until: float | None = None

    @property
    def beyond_the_store(self) -> bool:
        """Whether rows are kept by what the store does not index (so it is scanned)."""
        return any(v is not None for v in (self.server, self.principal, self.outcome))


@dataclass(frozen=True)
class Page:
    """Calls of a listing, and where the next page starts (``None``: this is the last)."""

    calls: list[ListedCall]
    next_before: float | None
    scanned_out: bool = False
    """The page stopped at :data:`SCANNED_AT_MOST` calls looked at, not at the end."""


def moment(text: str, now: float | None = None) -> float:
    """A time a person gives: an ISO time (UTC unless it has an offset), or an age before
    ``now``: 90 (seconds), 15m, 2h, 1d. :class:`ValueError` saying what to give instead."""
    now = time.time() if now is None else now
    value = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (value[:-1], units[value[-1]]) if value[-1:] in units else (value, 1)
    try:
        age = float(number)
    except ValueError:
        pass
    else:
        if not math.isfinite(age) or age < 0:
            raise ValueError("an age is a number of seconds, minutes, hours or days ago, 0 or more")
        return now - age * unit
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            "give a time like 2026-05-01T10:00 (UTC unless it has an offset) or an age like "
            "90 (seconds), 15m, 2h or 1d"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


async def call_source(store: JournalStore, call_id: str, keys: KeyRing | None) -> CallSource:
    events = await store.events(call_id)
    return source_of(events, keys)


def source_of(events: Sequence[dict[str, Any]], keys: KeyRing | None) -> CallSource:
    server = next((e["server"] for e in events if isinstance(e.get("server"), str)), None)
    rounds = sum(rounds_in(e) for e in events)
    return CallSource(server, principal_of(events, keys), rounds)


def principal_of(events: Sequence[dict[str, Any]], keys: KeyRing | None) -> str | None:
    """Who made a call, from its first journaled round that names one (``None``: nobody in
    particular; :data:`SEALED` when the keys to open it were not given)."""
    for record in events:
        if not is_sealed(record):
            rounds = [record]
        elif not record.get("has_principal"):
            continue
        elif keys is None:
            return SEALED
        else:
            try:
                rounds = open_rounds(record, keys)
            except InvalidRequestState:
                return SEALED
        for event in rounds:
            principal = event.get("principal")
            if isinstance(principal, str):
                return principal
    return None


async def list_calls(
    store: JournalStore,
    keys: KeyRing | None,
    wanted: CallFilter,
    *,
    limit: int,
    before: float | None = None,
) -> Page:
    """Up to ``limit`` calls ``wanted`` keeps, most recently active first, last active before
    ``before``: the store's listing by time and tool, each row's events read for the rest."""
    kinds = OUTCOMES.get(wanted.outcome or "", ())
    scanning = wanted.beyond_the_store
    batch = min(SCANNED_AT_MOST, max(limit * 4, 50)) if scanning else limit
    kept: list[ListedCall] = []
    scanned = 0
    cursor = before
    if wanted.until is not None:
        cursor = wanted.until if before is None else min(before, wanted.until)
    while True:
        found = await store.calls(
            limit=batch, since=wanted.since, target=wanted.tool, before=cursor
        )
        for summary in found:
            scanned += 1
            cursor = summary.last_ts
            if kinds and summary.last_kind not in kinds:
                continue
            source = await call_source(store, summary.call_id, keys)
            if wanted.server is not None and source.server != wanted.server:
                continue
            if wanted.principal is not None and source.principal != wanted.principal:
                continue
            kept.append(ListedCall(summary, source))
            if len(kept) == limit:
                return Page(kept, summary.last_ts)
        if len(found) < batch:
            return Page(kept, None)
        if scanned >= SCANNED_AT_MOST:
            return Page(kept, cursor, scanned_out=True)


__all__ = [
    "OUTCOMES",
    "SCANNED_AT_MOST",
    "SEALED",
    "CallFilter",
    "CallSource",
    "ListedCall",
    "Page",
    "call_source",
    "list_calls",
    "moment",
    "principal_of",
    "source_of",
]
