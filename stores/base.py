"""The storage protocol the engine runs on, and the small types it speaks.

A store holds opaque bytes and small dicts for a call that any replica may resume: large state
kept by reference (blobs), the single-use record of each round (claims), a per-call event log
(journal), the records of calls that run in the background (tasks) and cross-replica
notifications (bus). Each of these is a protocol of its own (a facet: `BlobStore`,
`ClaimStore`, `JournalStore`, `TaskStore`, `BusStore`, and `StoreLifecycle` for the clock,
health and closing); `Store` is their union. It knows nothing about MCP.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

DEFAULT_OP_TIMEOUT = 2.0
"""Seconds any single store operation may take before it fails with `StoreUnavailable`."""


class Claim(enum.Enum):
    """What `Store.claim` found for a round."""

    FRESH = "fresh"
    """No record existed: this attempt now owns the round and must run it."""
    DUPLICATE = "duplicate"
    """The same request already completed: answer with the recorded response."""
    IN_PROGRESS = "in_progress"
    """The same request is running elsewhere: wait for it (`Store.wait_complete`)."""
    CONFLICT = "conflict"
    """The round was claimed by a different request: this one must be refused."""


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Outcome of `Store.claim`; `response` is set only for `Claim.DUPLICATE`."""

    status: Claim
    response: bytes | None = None


@dataclass(frozen=True, slots=True)
class CallSummary:
    """One row of the journal listing, built from the events' optional index keys."""

    call_id: str
    target: str | None
    """The first ``"target"`` any event of the call carried (e.g. the tool name)."""
    first_ts: float
    last_ts: float
    events: int
    last_kind: str | None = None
    """The ``"kind"`` of the latest event (by ``ts``) that had one, e.g. to show how a call
    ended: an event appended late (a replica wrote it after another's later one) does not
    replace it."""


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One task as a store keeps it: what a listing shows in the clear, and its record.

    ``version`` counts the writes of the task (1 for the first): `Store.put_task` writes a row
    only over the version before it, so two writers never both win. ``record`` is opaque to the
    store (the engine seals it).

    ``fence`` is the fencing token of the task's hold: the engine raises it each time a run
    takes the task, and the store refuses a write that carries a lower one, and a higher one
    while the hold it replaces is still live on the store's clock (see `Store.put_task`).
    """

    task_id: str
    version: int
    status: str
    target: str
    created: float
    """Epoch seconds."""
    updated: float
    record: bytes
    fence: int = 0
    due_in: float | None = field(default=None, compare=False)
    """Set by reads: seconds until the task is due on the store's clock (0 or less: due now,
    its hold has lapsed), or ``None`` when it is not due. Ignored by writes."""


class StoreUnavailable(Exception):
    """The backend is down, or slower than the operation timeout.

    Nothing was promised: the operation may or may not have happened, and the request that
    needed it can be retried once the store answers again.
    """


class StoreMisconfigured(StoreUnavailable):
    """The backend answers, but is set up so that the store cannot keep its promises (a Redis
    that evicts keys would drop claims, and rounds would run twice). The message says what to
    change; a server refuses to start on it, and its health check fails while it lasts."""


def unavailable(backend: str, what: str, detail: str) -> StoreUnavailable:
    """Build the one error message shape every store uses, so operators see the same thing."""
    return StoreUnavailable(
        f"{backend} store unavailable: {what} failed ({detail}). "
        "The request can be retried once the store is reachable again."
    )


@runtime_checkable
class BlobStore(Protocol):
    """State kept by reference: a call's large state, and the sessions of the 2025-11-25 era."""

    async def put_blob(self, call_id: str, blob_id: str, data: bytes, ttl: float) -> None:
        """Keep `data` for `ttl` seconds, replacing any blob with the same ids."""
        ...

    async def get_blob(self, call_id: str, blob_id: str) -> bytes | None:
        """The blob's bytes, or None when it is missing or expired."""
        ...


@runtime_checkable
class ClaimStore(Protocol):
    """Single-use rounds: each round claimed by one request, its response kept for duplicates."""

    async def claim(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        ttl: float,
        *,
        owner: bytes | None = None,
    ) -> ClaimResult:
        """Atomically take a round for the request identified by `fingerprint`.

        No record: one is created (in progress, kept `ttl` s) and the result is FRESH. Same
        fingerprint: DUPLICATE with the response when done, else IN_PROGRESS. A different
        fingerprint: CONFLICT.

        `owner` is a token unique to this attempt (e.g. 16 random bytes; non-empty). It is
        recorded only when the record is created (FRESH); a claim that finds a record leaves
        that record's owner alone. Pass it to `release` to give back exactly this claim, which
        is the only safe release after a claim whose outcome is unknown (`StoreUnavailable`).
        """
        ...

    async def complete(
        self, call_id: str, round_no: int, fingerprint: bytes, response: bytes, ttl: float
    ) -> None:
        """Record the response of a claimed round, kept `ttl` s, and wake waiters.

        Does nothing when another fingerprint holds the round. The first response recorded
        wins: completing an already completed round keeps the earlier response. When the claim
        has expired meanwhile the response is still recorded, so retries see DUPLICATE.
        """
        ...

    async def release(
        self, call_id: str, round_no: int, fingerprint: bytes, *, owner: bytes | None = None
    ) -> None:
        """Drop our in-progress claim (the attempt failed) so a retry can run the round.

        Only an in-progress record of `fingerprint` is dropped; a completed round never is.
        With `owner`, the record must also have been created by a claim with that same owner:
        a claim taken by another attempt of the same request (or without an owner) is kept.
        Without `owner`, any in-progress claim of `fingerprint` is dropped, whoever took it.
        """
        ...

    async def renew(
        self, call_id: str, round_no: int, fingerprint: bytes, owner: bytes, ttl: float
    ) -> bool:
        """Extend an in-progress claim held by ``owner`` to ``ttl`` s from now.

        A claim is taken with a short lease and renewed while its round runs, so a claim whose
        owner died expires soon instead of blocking the round for its whole TTL. False when the
        claim is not ours anymore (completed, released, expired or someone else's).
        """
        ...

    async def wait_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        timeout: float,  # noqa: ASYNC109 - a bound on the wait, which then returns None
    ) -> bytes | None:
        """Wait up to `timeout` s for a concurrent attempt of the same request to complete.

        Returns its response, or None on timeout, release, or when no such claim exists.
        """
        ...


@runtime_checkable
class JournalStore(Protocol):
    """The journal: an append-only event log per call, for replay and debugging."""

    async def append(self, call_id: str, event: dict[str, Any], ttl: float) -> None:
        """Append a msgpack-serialisable event; the call's journal is kept `ttl` s after it.

        The optional keys ``"ts"`` (epoch seconds), ``"target"`` and ``"kind"`` feed the listing
        of `calls`; the event itself is stored as given.
        """
        ...

    async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
        """Append several events, each to its call's journal, in order.

        The same as calling :meth:`append` for each, in fewer round trips where the backend
        allows (one pipeline on Redis).
        """
        ...

    async def events(self, call_id: str) -> list[dict[str, Any]]:
        """The call's events in append order; [] when unknown or expired."""
        ...

    async def calls(
        self,
        *,
        limit: int = 50,
        since: float | None = None,
        target: str | None = None,
        before: float | None = None,
    ) -> list[CallSummary]:
        """Journaled calls, most recently active first, optionally active since `since`, and
        last active before `before` (strictly: the ``last_ts`` of a page's last row gives the
        next page)."""
        ...


@runtime_checkable
class TaskStore(Protocol):
    """The records of calls that run in the background, written compare-and-set."""

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        """Write `row` if the stored task is at version ``row.version - 1`` (no task, or an
        expired one, for version 1), and its fence allows it: never lower than the stored
        fence, and higher only when the stored task is not due later than now (no live hold).
        The task is then kept `ttl` s, and is due `due_in` seconds from now on the store's
        clock (``None``: not due). False, writing nothing, when another write came first or
        the fence refused it.
        """
        ...

    async def renew_task(self, task_id: str, fence: int, lease: float) -> bool:
        """Make the task due `lease` seconds from now on the store's clock, if its fence is
        still `fence` and it is due (held); False otherwise, changing nothing. The version is
        left as it is: a renewal never makes another write of the task lose. ``lease=0``
        gives the hold back (the task is due at once)."""
        ...

    async def get_task(self, task_id: str) -> TaskRow | None:
        """The task, or None when it is unknown or expired."""
        ...

    async def due_tasks(self, *, limit: int = 100) -> list[str]:
        """Ids of live tasks due now or earlier on the store's clock, the earliest first."""
        ...

    async def tasks(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        """Live tasks, the most recently created first; only those in `status`, if given."""
        ...


@runtime_checkable
class BusStore(Protocol):
    """Notifications between replicas."""

    async def publish(self, topic: str, message: bytes) -> None:
        """Send `message` to current subscribers of `topic`; nobody listening is fine."""
        ...

    def subscribe(self, topic: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """Receive the messages published on `topic` after the context is entered."""
        ...


@runtime_checkable
class StoreLifecycle(Protocol):
    """The store as a whole: its clock, its health, and closing it."""

    async def clock(self) -> float:
        """The store's time, in epoch seconds: the clock its expiries and due times are
        decided on (Redis: ``TIME``; SQLite and memory: this host's wall clock). A replica
        compares it with its own to see how far apart they are."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless the backend answers; SQLite also checks that it takes
        a write (a full disk refuses every round while reads still answer)."""
        ...

    async def aclose(self) -> None:
        """Release connections and end open subscriptions; the store is unusable after."""
        ...


@runtime_checkable
class Store(BlobStore, ClaimStore, JournalStore, TaskStore, BusStore, StoreLifecycle, Protocol):
    """Async storage used by every replica; all three implementations keep this contract.

    It is the union of its facets (`BlobStore`, `ClaimStore`, `JournalStore`, `TaskStore`,
    `BusStore`, `StoreLifecycle`); each part of the engine asks for the facet it uses.

    Every operation is bounded by the store's operation timeout and raises `StoreUnavailable`
    when the backend cannot answer in time. TTLs are seconds and chosen by the caller.

    A store may also offer ``async def serve(self, *, task_status)``: background work to run
    while a server uses it (``RedisStore`` sends the scripts of concurrent requests over one
    shared connection; ``SQLiteStore`` checkpoints its log beside the writes). The server starts
    it in its task group and cancels it on the way out;
    it is not part of the contract, so a store without it is still a `Store`. Nor is
    ``async def trim_journal(self, max_bytes) -> int`` (the memory and SQLite stores): the
    journal's oldest calls purged once it is past ``max_bytes``, the number purged returned; a
    store without it keeps its journal by ``journal_ttl`` alone, whatever ``journal_max_bytes``.
    """
