"""The journal on Redis (`JournalStore`): each call's events, and the listing of calls in global
index keys under the prefix's own tag (written in a separate step on a cluster, where they live
on another node).

On a single Redis, a batch of events is one script per ~1 MiB (`lua.APPEND_MANY`): the events go
into one batch key, and each call's summary points to where its events are, until a call has
more than `JOURNAL_POINTERS` of them there and they move to a list of its own. Expired calls
leave the listing index a bounded number at a time, after writes and listings.
"""

from __future__ import annotations

import logging
import os
import time
from functools import partial
from typing import Any, NamedTuple

import anyio
import msgpack
from redis.asyncio import Redis

from .._checks import check_call_id, check_limit, check_ttl
from .._journal import (
    EncodedEvent,
    IndexFields,
    decode_event,
    encode_batch,
    encode_event,
    index_fields,
)
from ..base import CallSummary, StoreUnavailable
from . import lua
from .client import as_bytes
from .core import RedisCore, milliseconds
from .mux import ScriptCall

log = logging.getLogger(__name__)

_PRUNE_BATCH = 500
"""Calls the pruning script looks at in one go."""
_PRUNE_RUNS = 4
"""Pruning scripts per run; a run whose last window had wholly expired is followed by another
after the next write or listing, so a busy store keeps up however many calls expire."""
CLUSTER_JOURNAL_CONCURRENCY = 16
"""Calls whose journal events a cluster store writes at once."""
JOURNAL_BLOB_BYTES = 1024 * 1024
"""Events per journal script on a single Redis, by size: each script's events are one batch key."""
JOURNAL_POINTERS = 4
"""Events of a call read from the batches they came in before they move to its own list: a call
of up to this many rounds costs no key of its own, and a longer one's summary, rewritten at each
of its events, stays small (each event extends at most this many batches)."""


class RedisJournal(RedisCore):
    """`JournalStore` of `RedisStore`."""

    def _open_journal(self, purge_interval: float) -> None:
        """Called by `RedisStore.__init__`."""
        self._index_keys = [self._index_key("by_ts"), self._index_key("calls")]
        """What the listing scripts are given: the by-time zset and the calls hash."""
        self._target_prefix = self._target_key("")
        self._purge_interval = purge_interval
        self._next_prune = 0.0
        self._prune_from = 0
        """Where in the by-time index the last pruning run stopped, past calls still live."""
        self._append = self._client.register_script(lua.APPEND)
        self._index = self._client.register_script(lua.INDEX)
        self._append_many = self._client.register_script(lua.APPEND_MANY)
        self._prune = self._client.register_script(lua.PRUNE)

    def _target_key(self, target: str) -> str:
        return self._index_key(f"target:{target}")

    async def append(self, call_id: str, event: dict[str, Any], ttl: float) -> None:
        if isinstance(self._client, Redis):  # one script on a single Redis
            await self.append_many([(call_id, event)], ttl)
            return
        check_call_id(call_id)
        check_ttl(ttl)
        await self._append_one(call_id, encode_event(event), index_fields(event), ttl)
        await self._maybe_prune()

    async def _append_one(self, call_id: str, data: bytes, fields: IndexFields, ttl: float) -> None:
        """One event on a cluster: its journal, then its listing (another slot, another node)."""
        what = f"append to the journal of call {call_id!r}"
        journal = [self._key(call_id, "journal")]
        n = await self._call(
            what, lambda: self._append(keys=journal, args=[data, milliseconds(ttl)])
        )
        index_args: list[bytes | str | int] = [
            call_id,
            n,
            repr(fields.ts),
            fields.target or "",
            fields.kind or "",
            repr(time.time() + ttl),
            self._target_prefix,
        ]
        await self._call(what, lambda: self._index(keys=self._index_keys, args=index_args))

    async def append_many(self, items: list[tuple[str, dict[str, Any]]], ttl: float) -> None:
        """On a single Redis, one round trip: a script per ~1 MiB of events writes each event's
        journal and listing entry. On a cluster, two scripts per event (the listing lives on
        another node), one call's events in order, several calls at once."""
        check_ttl(ttl)
        if not items:
            return
        expiry = repr(time.time() + ttl)
        index_keys = self._index_keys
        if isinstance(self._client, Redis):
            now = repr(time.time())
            calls: list[ScriptCall] = [
                (
                    self._append_many,
                    index_keys,
                    [
                        batch,
                        entries,
                        milliseconds(ttl),
                        expiry,
                        self._target_prefix,
                        f"{self.prefix}:journal:{{{self.prefix}}}:{os.urandom(9).hex()}",
                        now,
                        JOURNAL_POINTERS,
                    ],
                )
                for batch, entries in self._journal_batches(encode_batch(items))
            ]

            async def run_single() -> None:
                replies = await self._scripts(calls)
                failed = next((r for r in replies if isinstance(r, Exception)), None)
                if failed is not None:
                    raise failed

            await self._call(f"append of {len(items)} journal events", run_single)
            await self._maybe_prune()
            return
        # A cluster runs no scripts in pipelines.
        by_call: dict[str, list[tuple[bytes, IndexFields]]] = {}
        for call_id, data, fields in encode_batch(items):
            by_call.setdefault(call_id, []).append((data, fields))
        limiter = anyio.CapacityLimiter(CLUSTER_JOURNAL_CONCURRENCY)
        failures: list[StoreUnavailable] = []

        async def append_in_order(call_id: str, events: list[tuple[bytes, IndexFields]]) -> None:
            async with limiter:
                try:
                    for data, fields in events:
                        await self._append_one(call_id, data, fields, ttl)
                except StoreUnavailable as exc:
                    failures.append(exc)

        async with anyio.create_task_group() as tg:
            for call_id, events in by_call.items():
                tg.start_soon(append_in_order, call_id, events)
        if failures:
            raise failures[0]
        await self._maybe_prune()

    def _journal_batches(self, encoded: list[EncodedEvent]) -> list[tuple[bytes, bytes]]:
        """The events of `lua.APPEND_MANY` scripts, about ``JOURNAL_BLOB_BYTES`` a script (an
        event larger than that travels alone): each script's events concatenated, and their
        entries, msgpack-packed."""
        batches: list[tuple[bytes, bytes]] = []
        events: list[bytes] = []
        entries: list[tuple[str | float | int, ...]] = []
        size = 0
        for call_id, data, fields in encoded:
            if entries and size + len(data) > JOURNAL_BLOB_BYTES:
                batches.append((b"".join(events), msgpack.packb(entries, use_bin_type=False)))
                events, entries, size = [], [], 0
            events.append(data)
            entries.append(
                (
                    call_id,
                    f"{self._call_keys(call_id)}:journal",
                    fields.ts,
                    fields.target or "",
                    fields.kind or "",
                    len(data),
                )
            )
            size += len(data)
        batches.append((b"".join(events), msgpack.packb(entries, use_bin_type=False)))
        return batches

    async def events(self, call_id: str) -> list[dict[str, Any]]:
        """The call's events: those at the start of its list, then those its summary points to
        in the batches they came in (see `lua.APPEND_MANY`); on a cluster, its list."""
        key = self._key(call_id, "journal")
        what = f"reading the journal of call {call_id!r}"

        async def summary_and_list() -> list[Any]:
            # One transaction on a single Redis: an id used again cannot come between the two.
            async with self._client.pipeline(transaction=isinstance(self._client, Redis)) as pipe:
                pipe.hget(self._index_key("calls"), call_id)
                pipe.lrange(key, 0, -1)
                replies: list[Any] = await pipe.execute()
            return replies

        packed, items = await self._call(what, summary_and_list)
        head, pointers = _journal_layout(packed, len(items))
        found: list[Any] = []
        if pointers:

            async def read_batches() -> list[Any]:
                async with self._client.pipeline(transaction=False) as pipe:
                    for batch, offset, length in pointers:
                        pipe.getrange(batch, offset, offset + length - 1)
                    parts: list[Any] = await pipe.execute()
                return parts

            found = [part for part in await self._call(what, read_batches) if part]
        ordered = [*items[:head], *found]
        return [decode_event(as_bytes(item, "a journal event")) for item in ordered]

    async def calls(
        self,
        *,
        limit: int = 50,
        since: float | None = None,
        target: str | None = None,
        before: float | None = None,
    ) -> list[CallSummary]:
        check_limit(limit)
        await self._maybe_prune()
        index = self._index_key("by_ts") if target is None else self._target_key(target)
        low: float | str = "-inf" if since is None else since
        high = "+inf" if before is None else f"({before!r}"
        found: list[CallSummary] = []

        async def page(start: int, size: int) -> tuple[list[bytes], list[Any]]:
            ids = await self._client.zrevrangebyscore(index, high, low, start=start, num=size)
            names = [as_bytes(i, "the call index") for i in ids]
            listed = await self._client.hmget(self._index_key("calls"), names) if names else []
            return names, listed

        start = 0
        while len(found) < limit:
            size = max(limit - len(found), 16)
            names, listed = await self._call("listing calls", partial(page, start, size))
            now = time.time()
            for name, packed in zip(names, listed, strict=True):
                call = _Listed.read(name, packed)
                if call is None or len(found) >= limit:
                    continue
                if call.expiry <= now:  # its journal has expired; pruning will drop it
                    continue
                if target is None or call.target == target:  # else listed in an earlier life
                    found.append(call.summary(name.decode()))
            if len(names) < size:
                break
            start += size
        return found

    async def _maybe_prune(self) -> None:
        """Housekeeping after writes; a failure only postpones it."""
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + self._purge_interval
        try:
            behind = await self._call("pruning the call index", self._prune_index)
        except StoreUnavailable as exc:  # never fail the operation that triggered it
            log.debug("Redis call index pruning postponed: %s", exc)
        except Exception:
            log.warning("Redis call index pruning failed; will try again", exc_info=True)
        else:
            if behind:  # more expired than one run drops: go on after the next write
                self._next_prune = 0.0

    async def _prune_index(self) -> bool:
        """Drop expired calls from the listing index, a bounded number per run (this runs on a
        journal writer's path); whether the run stopped with expired calls left.

        With one journal TTL, calls expire in the order of their last activity: the first
        window is the least recently active, and once it holds a live call nothing after it has
        expired. Calls kept longer (replicas with different TTLs on one prefix, or summaries
        written by something else) would then block the front, so the rest of each run walks
        on from where the last run stopped, and starts over at the end of the index.
        """
        keys = [*self._index_keys, self._index_key("expiry")]
        start = 0
        removed_at_front = 0  # the saved position moved down by as many
        for _ in range(_PRUNE_RUNS):
            reply = await self._prune(
                keys=keys, args=[repr(time.time()), start, _PRUNE_BATCH, self._target_prefix]
            )
            removed, looked_at = (int(n) for n in reply)
            if looked_at < _PRUNE_BATCH:  # the end of the index
                self._prune_from = 0
                return False
            kept = looked_at - removed
            if start == 0:
                removed_at_front += removed
                if kept:  # live calls from here: go on from where the last run stopped
                    start = self._prune_from = max(kept, self._prune_from - removed_at_front)
            elif kept:
                start = self._prune_from = start + kept
        return kept == 0  # a whole window had expired: more may have


def _journal_layout(packed: Any, listed: int) -> tuple[int, list[tuple[bytes, int, int]]]:
    """Where a call's events are, from its summary: how many of its list are its own (the
    list may hold the end of an earlier life of its id), and the ``(batch key, offset,
    length)`` of those in batches. A summary of an older layout, or none, or one the store
    cannot read, puts every event in the list."""
    if packed is None:
        return listed, []
    try:
        summary = msgpack.unpackb(as_bytes(packed, "a call summary"), raw=True)
        if len(summary) < 8:
            return listed, []
        head, flat = int(summary[6]), summary[7]
        pointers = [
            (bytes(flat[i]), int(flat[i + 1]), int(flat[i + 2])) for i in range(0, len(flat), 3)
        ]
    except (ValueError, TypeError, IndexError, msgpack.UnpackException):
        return listed, []
    return min(head, listed), pointers


class _Listed(NamedTuple):
    """A call's entry in the calls hash, as the listing script packs it."""

    first_ts: float
    last_ts: float
    events: int
    expiry: float
    kind: str
    target: str

    @classmethod
    def read(cls, call_id: bytes, packed: Any) -> _Listed | None:
        """The entry; ``None`` when there is none, or (logged) when something else wrote it:
        one bad entry must not break every listing, nor stop the pruning of the others."""
        if packed is None:
            return None
        data = as_bytes(packed, "a call summary")
        try:
            first, last, events, expiry, kind, target = msgpack.unpackb(data, raw=True)[:6]
            return cls(
                float(first),
                float(last),
                int(events),
                float(expiry),
                kind.decode(errors="replace"),
                target.decode(errors="replace"),
            )
        except (ValueError, TypeError, AttributeError, msgpack.UnpackException):
            log.warning(
                "the listing entry of call %r is not one this store wrote; it is skipped (delete "
                "it from the calls hash of the index to silence this)",
                call_id.decode(errors="replace"),
            )
            return None

    def summary(self, call_id: str) -> CallSummary:
        return CallSummary(
            call_id=call_id,
            target=self.target or None,
            first_ts=self.first_ts,
            last_ts=self.last_ts,
            events=self.events,
            last_kind=self.kind or None,
        )
