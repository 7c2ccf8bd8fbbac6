"""Single-use rounds: each retry claims the round its token was minted for.

The first attempt runs; a duplicate with the same answers gets the first attempt's response byte
for byte; a concurrent duplicate waits (bounded) for it, then gets a state-only
``input_required`` that tells the client to retry; different answers for an already used round
are refused. So a tool body never runs twice for one call, whichever replicas the duplicates
reach. A claim is a short lease, renewed while its round runs, so the round of a replica that
died is soon free to run again.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any

import anyio
from pydantic_core import to_json

from engine._internal.metrics import Metrics
from engine._internal.random_pool import random_bytes
from engine.errors import INTERNAL_ERROR, InvalidRequestState, MCPError, StoreOutage
from engine.settings import DEFAULT_CLAIM_LEASE
from engine.state.claims import sorted_keys
from engine.state.seal import KeyRing
from engine.store_services.retries import DeferredWrites, Write
from stores import Claim, ClaimStore, StoreUnavailable

log = logging.getLogger(__name__)

KEPT_RESPONSE = b"engine/kept-response/v1"
"""Bound to a kept response's seal: it opens as a kept response and as nothing else."""

RENEWALS_PER_LEASE = 4
"""A held claim is renewed this many times a lease, so a renewal or two may fail or come late (a
store operation may take its whole timeout) before the lease lapses under a live round."""


def responses_fingerprint(responses: Any) -> bytes:
    """What makes two retries of one round the same request: their answers."""
    canonical = to_json(sorted_keys(responses) if responses is not None else None, fallback=str)
    return hashlib.sha256(canonical).digest()[:16]


@dataclass(slots=True, eq=False)
class Hold:
    """A round this attempt claimed: what it must settle, renew or give back (not frozen,
    since one is built every claimed round and a frozen dataclass is slower to build).

    Compared and hashed by identity: each attempt's hold is its own, even for the same round.
    The owner token is the hold's fence: a claim that lapsed and was taken again has another.
    """

    call_id: str
    round_no: int
    fingerprint: bytes
    owner: bytes
    renewed: float
    """When (``perf_counter``) the last claim or renewal the store took was sent: the claim
    lives at least a lease from then, on the store's clock."""


class ClaimLapsed(StoreOutage):
    """A round's claim lapsed under it, so a ``once`` step did not run: a retry runs the round
    where it is held now, or gets its response."""

    def __init__(self) -> None:
        MCPError.__init__(
            self,
            INTERNAL_ERROR,
            "This round's claim lapsed while it ran (the replica was paused or lost the store "
            "for longer than claim_lease), so it stopped before a once step. Retry the request.",
        )


@dataclass(slots=True)
class Admission:
    """The claim's verdict: run (``hold``), answer from ``cached`` bytes, or ask to ``retry``."""

    hold: Hold | None = None
    cached: bytes | None = None
    retry: bool = False


class RoundClaims:
    """Claims on rounds for one server: taken, renewed, settled with the response, given back.

    A store outage while claiming raises `StoreUnavailable` (the protocol layer answers it with
    a retryable error); writes that must not be lost once a body has run or failed (the
    response, a release) go to ``retries`` when the store does not answer.
    """

    def __init__(
        self,
        store: ClaimStore,
        retries: DeferredWrites,
        *,
        keys: KeyRing,
        ttl: int,
        wait_duplicates: float,
        lease: float = DEFAULT_CLAIM_LEASE,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.keys = keys
        """Seals kept responses: the store holds no result in the clear."""
        self.retries = retries
        self.ttl = ttl
        """How long a round's response is kept for duplicates."""
        self.lease = min(lease, ttl)
        self.wait_duplicates = wait_duplicates
        self._held: set[Hold] = set()

    async def admit(self, call_id: str, round_no: int, fingerprint: bytes) -> Admission:
        """Claim a round for this attempt, with a short lease (see :meth:`hold`)."""
        started = perf_counter()
        hold = Hold(call_id, round_no, fingerprint, random_bytes(16), started)
        try:
            claim = await self.store.claim(
                call_id, round_no, fingerprint, self.lease, owner=hold.owner
            )
            if self.metrics is not None:
                self.metrics.store_operation("claim", perf_counter() - started)
        except StoreUnavailable:
            # The claim may have landed all the same: give it back once the store answers, or
            # every retry of this round would wait for an owner that is not running it.
            self.retries.defer(self._releaser(hold), f"the release of a claim on call {call_id}")
            raise
        if claim.status is Claim.FRESH:
            return Admission(hold=hold)
        if claim.status is Claim.DUPLICATE:
            return Admission(cached=self._opened(claim.response))
        if claim.status is Claim.CONFLICT:
            raise InvalidRequestState("round already answered with other inputResponses")
        response = await self.store.wait_complete(
            call_id, round_no, fingerprint, self.wait_duplicates
        )
        if response is not None:
            return Admission(cached=self._opened(response))
        return Admission(retry=True)

    def _opened(self, kept: bytes | None) -> bytes | None:
        return None if kept is None else self.keys.open_record(kept, KEPT_RESPONSE)

    def hold(self, hold: Hold) -> None:
        """Keep the claim's lease renewed while the round runs, until :meth:`let_go`.

        A claim lives ``lease`` seconds unless renewed, so a round whose replica died is free to
        run again soon, instead of answering "retry" until the full TTL passes. One renewer per
        process serves every held claim (see :meth:`run`), so holding one is a set insertion,
        not a task.
        """
        self._held.add(hold)

    def let_go(self, hold: Hold) -> None:
        """The round is over: its claim is no longer renewed (it is settled or given back)."""
        self._held.discard(hold)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """``RENEWALS_PER_LEASE`` times a lease, renew every claim this process holds.

        The renewals of one turn run concurrently, so a slow store delays each by its own
        round trip, not by those of every other held claim; a turn that overruns its interval
        is followed by the next at once.
        """
        task_status.started()
        interval = self.lease / RENEWALS_PER_LEASE
        turn = anyio.current_time() + interval
        while True:
            await anyio.sleep_until(turn)
            turn = anyio.current_time() + interval
            async with anyio.create_task_group() as tg:
                for hold in list(self._held):
                    tg.start_soon(self._renew, hold)

    async def confirm(self, hold: Hold, step: str) -> None:
        """Before the ``once`` step ``step`` of a claimed round: raise `ClaimLapsed` unless the
        claim is surely still this attempt's. Its last renewal must be younger than a lease on
        this process's clock, then the store must renew it for this owner (one compare-and-set),
        answering within a lease. A round that was paused past its lease stops here, so the step
        does not also run where a retry took the round."""
        if perf_counter() - hold.renewed < self.lease:
            sent = perf_counter()
            if (
                await self.store.renew(
                    hold.call_id, hold.round_no, hold.fingerprint, hold.owner, self.lease
                )
                and perf_counter() - sent < self.lease
            ):
                hold.renewed = sent
                return
        log.warning(
            "the claim on round %s of call %s lapsed or was taken while it ran (last renewed "
            "%.1f s ago; the lease is %g s): step %r does not run, the round stops",
            hold.round_no,
            hold.call_id,
            perf_counter() - hold.renewed,
            self.lease,
            step,
        )
        self._held.discard(hold)
        raise ClaimLapsed

    async def _renew(self, hold: Hold) -> None:
        sent = perf_counter()
        try:
            held = await self.store.renew(
                hold.call_id, hold.round_no, hold.fingerprint, hold.owner, self.lease
            )
        except StoreUnavailable as exc:
            log.warning("could not renew the claim on call %s: %s", hold.call_id, exc)
            return
        if held:
            hold.renewed = sent
        elif hold in self._held:
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
        response = self.keys.seal_record(response, KEPT_RESPONSE)
        started = perf_counter()
        try:
            await complete(hold.call_id, hold.round_no, hold.fingerprint, response, self.ttl)
            if self.metrics is not None:
                self.metrics.store_operation("complete", perf_counter() - started)
        except StoreUnavailable as exc:
            what = f"the response of round {hold.round_no} of call {hold.call_id}"
            write = partial(
                complete, hold.call_id, hold.round_no, hold.fingerprint, response, self.ttl
            )
            self.retries.retry_later(write, what, exc)

    async def abandon(self, hold: Hold) -> None:
        """Give the round back after a failure that produced no response to keep."""
        with anyio.CancelScope(shield=True):
            what = f"the release of round {hold.round_no} of call {hold.call_id}"
            await self.retries.write_or_defer(self._releaser(hold), what)

    def _releaser(self, hold: Hold) -> Write:
        async def write() -> None:
            await self.store.release(
                hold.call_id, hold.round_no, hold.fingerprint, owner=hold.owner
            )

        return write
