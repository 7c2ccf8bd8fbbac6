"""State by reference: a round's state too large for its token is kept in the store.

The token then carries a `StateRef` (the blob's id and its SHA-256) instead of the state, so it
stays small; the next round, on any replica, fetches the blob and checks it against the digest.
When the store does not answer, a state that still fits the token travels inline instead: the
round has run by then (a ``once=True`` resolver's side effect among what it did), so failing it
with "retry" would make the client run it again.
The blob is sealed with the server's key ring: the store holds no answer in the clear. The seal
binds the call's principal too, so a blob opens only for the user whose call it is, whatever
token names it.
"""

from __future__ import annotations

import hashlib
import logging
from time import perf_counter

from engine._internal.metrics import Metrics
from engine._internal.random_pool import random_bytes
from engine.errors import InvalidRequestState
from engine.state.claims import StateRef
from engine.state.seal import KeyRing
from stores import BlobStore, StoreUnavailable

log = logging.getLogger(__name__)

SPILLED_STATE = b"engine/spilled-state/v1"
"""Bound to a spilled state's seal: it opens as a spilled state and as nothing else."""


def _purpose(principal: str | None) -> bytes:
    """What a spilled state's seal binds: that it is one, and whose call it belongs to."""
    if principal is None:
        return SPILLED_STATE
    return SPILLED_STATE + b"\0" + principal.encode("utf-8", "surrogatepass")


class StateSpill:
    """Spills a call's state to the store and fetches it back.

    A store outage while fetching raises `StoreUnavailable`: the protocol layer answers it with a
    retryable error, since nothing was recorded. While spilling, see :meth:`keep`.
    """

    def __init__(
        self, store: BlobStore, *, keys: KeyRing, ttl: int, metrics: Metrics | None = None
    ) -> None:
        self.store = store
        self.keys = keys
        self.ttl = ttl
        """How long a spilled state is kept: as long as the token that refers to it is valid."""
        self.metrics = metrics

    async def spill(self, call_id: str, state: bytes, principal: str | None = None) -> StateRef:
        blob_id = random_bytes(9).hex()
        sealed = self.keys.seal_record(state, _purpose(principal))
        started = perf_counter()
        await self.store.put_blob(call_id, blob_id, sealed, self.ttl)
        if self.metrics is not None:
            self.metrics.store_operation("spill", perf_counter() - started)
            self.metrics.inc("engine_state_spills_total")
        return StateRef(blob_id, hashlib.sha256(state).digest())

    async def keep(
        self, call_id: str, state: bytes, *, inline_limit: int, principal: str | None = None
    ) -> bytes | StateRef:
        """What the next token carries: a reference to the spilled state, or, when the store
        does not answer and the state is at most ``inline_limit`` bytes, the state itself.

        A state over ``inline_limit`` that cannot be spilled raises `StoreUnavailable`.
        """
        try:
            return await self.spill(call_id, state, principal)
        except StoreUnavailable as exc:
            if self.metrics is not None:
                self.metrics.inc("engine_store_errors_total")
            if len(state) > inline_limit:
                raise
            log.warning(
                "state of call %s carried inline, the store did not answer: %s", call_id, exc
            )
            return state

    async def fetch(self, call_id: str, ref: StateRef, principal: str | None = None) -> bytes:
        started = perf_counter()
        blob = await self.store.get_blob(call_id, ref.blob_id)
        if self.metrics is not None:
            self.metrics.store_operation("fetch_state", perf_counter() - started)
        if blob is None:
            raise InvalidRequestState("state blob missing or expired")
        blob = self.keys.open_record(blob, _purpose(principal))
        if hashlib.sha256(blob).digest() != ref.sha256:
            raise InvalidRequestState("state blob does not match its digest")
        return blob
