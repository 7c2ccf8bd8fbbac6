"""`RedisStore`: shared state for many replicas, on Redis or Redis Cluster.

(One class over 400 lines: the whole Store protocol on Redis; its scripts are in
`_redis_lua.py`, its shared connection in `_redis_mux.py`.)

Every key of a call carries the call id as its hash tag (``{prefix}:{<call id>}:round:3``), so
the atomic scripts, which only ever touch one call's keys, work on a cluster. The call listing
lives in global index keys under their own tag and is written in a separate step.

Each store object owns one connection pool (closed by `aclose`). It is a blocking pool: a burst
of operations beyond `max_connections` queues for a connection (within the operation timeout)
instead of opening ever more sockets. Connections are made on demand, so the store carries on by
itself after Redis restarts. Operations are retried a few times with exponential backoff on
connection errors, but never beyond the operation timeout, after which they raise
`StoreUnavailable`. redis.asyncio requires the asyncio backend of anyio.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, NamedTuple, TypeVar

import anyio
import msgpack
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from .._checks import (
    check_call_id,
    check_fence,
    check_lease,
    check_limit,
    check_owner,
    check_round_key,
    check_round_op,
    check_task_id,
    check_task_write,
    check_ttl,
)
from .._journal import (
    EncodedEvent,
    IndexFields,
    decode_event,
    encode_batch,
    encode_event,
    index_fields,
)
from .._urls import redacted, split_flag, split_prefix
from .._waiters import Waiters, wait_settled
from ..base import (
    DEFAULT_OP_TIMEOUT,
    CallSummary,
    Claim,
    ClaimResult,
    StoreUnavailable,
    TaskRow,
    unavailable,
)
from . import lua
from .client import UNAVAILABLE, Messages, RedisClient, as_bytes, client_from_url
from .health import HEALTH_KEY_TTL_MS, WRITES_REFUSED, health_key, refuse_eviction
from .mux import MuxStopped, ScriptCall, ScriptMux, can_multiplex, run_scripts
from .tasks import RedisTasks

log = logging.getLogger(__name__)

T = TypeVar("T")

_PRUNE_BATCH = 500
"""Calls the pruning script looks at in one go."""
_PRUNE_RUNS = 4
"""Pruning scripts per run; a run whose last window had wholly expired is followed by another
after the next write or listing, so a busy store keeps up however many calls expire."""


def _tag(call_id: str) -> str:
    """Escape the call id so it can neither end its hash tag early nor forge another key."""
    if "%" not in call_id and "}" not in call_id:  # the engine's own (hex) call ids
        return call_id
    return call_id.replace("%", "%25").replace("}", "%7D")


CLUSTER_JOURNAL_CONCURRENCY = 16
"""Calls whose journal events a cluster store writes at once."""
JOURNAL_BLOB_BYTES = 1024 * 1024
"""Events per journal script on a single Redis, by size: each script's events are one batch key."""
JOURNAL_POINTERS = 4
"""Events of a call read from the batches they came in before they move to its own list: a call
of up to this many rounds costs no key of its own, and a longer one's summary, rewritten at each
of its events, stays small (each event extends at most this many batches)."""


_CLAIMS = {claim.value.encode(): claim for claim in Claim}
"""The claim script's replies, as Redis sends them."""


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


class RedisStore:
    """A `Store` in Redis, shared by every replica that uses the same URL and prefix."""

    def __init__(
        self,
        url_or_client: str | RedisClient,
        *,
        prefix: str | None = None,
        op_timeout: float = DEFAULT_OP_TIMEOUT,
        retries: int = 3,
        max_connections: int = 100,
        poll_interval: float = 0.05,
        purge_interval: float = 60.0,
        allow_eviction: bool = False,
    ) -> None:
        """Connect lazily to `url_or_client`; a client passed in stays the caller's to close.

        The key prefix is ``prefix``, or the URL's ``?prefix=`` (as in `open_store`), or
        ``engine``. A Redis whose ``maxmemory-policy`` is not ``noeviction`` fails `ping`
        with `StoreMisconfigured` unless ``allow_eviction`` (or the URL's
        ``?allow_eviction=yes``) accepts that an evicted claim lets a round run twice. Each
        open subscription holds one of the `max_connections` for its lifetime.
        `wait_complete` re-reads the round every `poll_interval` s to see completions made by
        other replicas (completions in this process wake it at once).
        """
        check_ttl(op_timeout, "op_timeout")
        self._where = f"{type(url_or_client).__name__} client"
        """Where the store's Redis is, safe to show: its URL without passwords, or the client."""
        if isinstance(url_or_client, str):
            self._where = redacted(url_or_client).partition("?")[0]
            url, in_url = split_prefix(url_or_client)
            url, evictable = split_flag(url, "allow_eviction")
            allow_eviction = allow_eviction or evictable
            if in_url is not None and prefix is not None and in_url != prefix:
                raise ValueError(
                    f"Redis key prefix given twice: prefix={prefix!r} and ?prefix={in_url} in "
                    f"{redacted(url_or_client)!r}; give one"
                )
            url_or_client, prefix = url, in_url if in_url is not None else prefix
        prefix = "engine" if prefix is None else prefix
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"Redis key prefix must be non-empty without braces, got {prefix!r}")
        if isinstance(url_or_client, str):
            self._client = client_from_url(
                url_or_client,
                op_timeout=op_timeout,
                retries=retries,
                max_connections=max_connections,
            )
            self._owns_client = True
        else:
            self._client = url_or_client
            self._owns_client = False
        self.prefix = prefix
        self._allow_eviction = allow_eviction
        self._index_keys = [self._index_key("by_ts"), self._index_key("calls")]
        """What the listing scripts are given: the by-time zset and the calls hash."""
        self._target_prefix = self._target_key("")
        self._op_timeout = op_timeout
        self._poll_interval = poll_interval
        self._purge_interval = purge_interval
        self._next_prune = 0.0
        self._prune_from = 0
        """Where in the by-time index the last pruning run stopped, past calls still live."""
        self._closed = False
        self._subscriptions: set[Messages] = set()
        self._waiters = Waiters()
        self._mux: ScriptMux | None = None
        self._claim = self._client.register_script(lua.CLAIM)
        self._complete = self._client.register_script(lua.COMPLETE)
        self._release = self._client.register_script(lua.RELEASE)
        self._renew = self._client.register_script(lua.RENEW)
        self._append = self._client.register_script(lua.APPEND)
        self._index = self._client.register_script(lua.INDEX)
        self._append_many = self._client.register_script(lua.APPEND_MANY)
        self._prune = self._client.register_script(lua.PRUNE)
        self._publish = self._client.register_script(lua.PUBLISH)
        self._tasks = RedisTasks(
            self._client,
            task_key=lambda task_id: self._key(task_id, "task"),
            index_key=self._index_key,
            call=self._call,
            script=self._script,
        )

    def __repr__(self) -> str:
        return f"RedisStore({type(self._client).__name__}, prefix={self.prefix!r})"

    # --- keys ---

    def _call_keys(self, call_id: str) -> str:
        """What every key of one call starts with (its hash tag keeps them on one node)."""
        return f"{self.prefix}:{{{_tag(call_id)}}}"

    def _key(self, call_id: str, *parts: str | int) -> str:
        return ":".join([self._call_keys(call_id), *map(str, parts)])

    def _round_key(self, call_id: str, round_no: int) -> str:
        return f"{self._call_keys(call_id)}:round:{round_no}"

    def _index_key(self, name: str) -> str:
        return f"{self.prefix}:index:{{{self.prefix}}}:{name}"

    def _target_key(self, target: str) -> str:
        return self._index_key(f"target:{target}")

    # --- plumbing ---

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """While a server uses the store: the scripts of concurrent requests share one
        multiplexed connection (see `stores._redis_mux`).

        Without it, each claim and each completion is a round trip of its own through the pool.
        On a cluster the scripts of one connection would span nodes, so there they are always
        sent one by one, as they are for a client whose connections redis-py must make itself
        (Sentinel) or that decodes replies.
        """
        client = self._client
        if not isinstance(client, Redis) or not can_multiplex(client) or self._mux is not None:
            task_status.started()
            return
        mux = ScriptMux(client, self._op_timeout)
        self._mux = mux
        task_status.started()
        try:
            await mux.run()
        finally:
            self._mux = None

    async def _scripts(self, calls: list[ScriptCall]) -> list[Any]:
        """Replies (errors in place) of scripts sent together: over the shared connection while
        serving, else in one pipeline of their own."""
        assert isinstance(self._client, Redis)
        mux = self._mux
        if mux is None:
            return await run_scripts(self._client, calls)
        try:
            replies = [mux.submit(*call) for call in calls]
        except MuxStopped:
            return await run_scripts(self._client, calls)
        results: list[Any] = []
        try:
            for reply in replies:
                try:
                    results.append(await reply)
                except Exception as exc:
                    results.append(exc)
        finally:
            for reply in replies:  # cancelled: nobody will read the rest
                reply.cancel()
        unsent = [i for i, result in enumerate(results) if isinstance(result, MuxStopped)]
        if unsent:
            resent = await run_scripts(self._client, [calls[i] for i in unsent])
            for i, result in zip(unsent, resent, strict=True):
                results[i] = result
        return results

    async def _script(
        self, script: AsyncScript, keys: list[str], args: list[Any], what: str, *details: Any
    ) -> Any:
        """One script's reply: over the shared connection while serving (which answers within
        the operation timeout), else sent by itself under the timeout. ``what.format(*details)``
        names the operation in errors (formatted only then: this runs twice a round)."""
        mux = self._mux
        if mux is not None:
            if self._closed:
                self._check_open()
            try:
                return await mux.submit(script, keys, args)
            except MuxStopped:
                pass  # it stopped before sending this one
            except (TimeoutError, *UNAVAILABLE) as exc:
                raise self._unavailable(what.format(*details), exc) from exc
        return await self._call(what.format(*details), lambda: script(keys=keys, args=args))

    async def _call(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """Run one operation under the timeout, turning backend trouble into StoreUnavailable."""
        self._check_open()
        try:
            async with asyncio.timeout(self._op_timeout):  # redis.asyncio runs on asyncio only
                return await op()
        except (TimeoutError, *UNAVAILABLE) as exc:
            raise self._unavailable(what, exc) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this RedisStore is closed; open a new store")

    def _unavailable(self, what: str, exc: BaseException) -> StoreUnavailable:
        """A timeout or a lost connection, as the error every store raises for it."""
        if isinstance(exc, TimeoutError):
            return unavailable("Redis", what, f"no answer within {self._op_timeout} s")
        return unavailable("Redis", what, f"{type(exc).__name__}: {exc}")

    @asynccontextmanager
    async def _subscription(self, channel: str, what: str) -> AsyncIterator[Messages]:
        pubsub = self._client.pubsub()

        async def subscribed() -> None:
            await pubsub.subscribe(channel)
            while True:  # wait for the server's confirmation: from here on nothing is missed
                reply = await pubsub.get_message(timeout=self._op_timeout)
                if reply is not None and reply.get("type") == "subscribe":
                    return

        messages = Messages(pubsub, channel, retry_cap=max(self._op_timeout, 1.0))
        try:
            await self._call(what, subscribed)
            self._subscriptions.add(messages)
            yield messages
        finally:
            self._subscriptions.discard(messages)
            messages.end()
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._op_timeout):
                await pubsub.aclose()

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

    # --- blobs ---

    async def put_blob(self, call_id: str, blob_id: str, data: bytes, ttl: float) -> None:
        check_call_id(call_id)
        check_ttl(ttl)
        key = self._key(call_id, "blob", blob_id)
        await self._call(
            f"put_blob {blob_id!r} of call {call_id!r}",
            lambda: self._client.set(key, bytes(data), px=_ms(ttl)),
        )

    async def get_blob(self, call_id: str, blob_id: str) -> bytes | None:
        key = self._key(call_id, "blob", blob_id)
        value = await self._call(
            f"get_blob {blob_id!r} of call {call_id!r}", lambda: self._client.get(key)
        )
        return None if value is None else as_bytes(value, "a blob")

    # --- rounds ---

    async def claim(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        ttl: float,
        *,
        owner: bytes | None = None,
    ) -> ClaimResult:
        own = check_round_op(call_id, round_no, ttl, owner)
        key = self._round_key(call_id, round_no)
        args: list[bytes | int] = [bytes(fingerprint), _ms(ttl)]
        if own is not None:
            args.append(own)
        reply = await self._script(
            self._claim, [key], args, "claim of call {!r} round {}", call_id, round_no
        )
        status = _CLAIMS.get(as_bytes(reply[0], "a claim")) or Claim(reply[0].decode())
        response = as_bytes(reply[1], "a response") if status is Claim.DUPLICATE else None
        return ClaimResult(status, response)

    async def complete(
        self, call_id: str, round_no: int, fingerprint: bytes, response: bytes, ttl: float
    ) -> None:
        check_round_op(call_id, round_no, ttl)
        key = self._round_key(call_id, round_no)
        args = [bytes(fingerprint), bytes(response), _ms(ttl)]
        if await self._script(
            self._complete, [key], args, "complete of call {!r} round {}", call_id, round_no
        ):
            self._waiters.notify(key)

    async def release(
        self, call_id: str, round_no: int, fingerprint: bytes, *, owner: bytes | None = None
    ) -> None:
        check_round_key(call_id, round_no)
        own = check_owner(owner)
        key = self._round_key(call_id, round_no)
        args = [bytes(fingerprint)] if own is None else [bytes(fingerprint), own]
        if await self._call(
            f"release of call {call_id!r} round {round_no}",
            lambda: self._release(keys=[key], args=args),
        ):
            self._waiters.notify(key)

    async def renew(
        self, call_id: str, round_no: int, fingerprint: bytes, owner: bytes, ttl: float
    ) -> bool:
        own = check_round_op(call_id, round_no, ttl, owner)
        if own is None:
            return False
        key = self._round_key(call_id, round_no)
        renewed = await self._call(
            f"renewal of call {call_id!r} round {round_no}",
            lambda: self._renew(keys=[key], args=[bytes(fingerprint), own, _ms(ttl)]),
        )
        return bool(renewed)

    async def wait_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        timeout: float,  # noqa: ASYNC109 - a bound on the wait, which then returns None
    ) -> bytes | None:
        # Polling rather than a pub/sub notice: a waiter then holds no connection between
        # reads, so a storm of retries cannot drain the pool.
        check_round_key(call_id, round_no)
        key = self._round_key(call_id, round_no)

        async def read() -> tuple[object, bytes | None]:
            fp, response = await self._call(
                f"wait_complete of call {call_id!r} round {round_no}",
                lambda: self._client.hmget(key, ["fp", "response"]),
            )
            return fp, None if response is None else as_bytes(response, "a response")

        return await wait_settled(
            read, fingerprint, self._waiters, key, timeout, poll=self._poll_interval
        )

    # --- journal ---

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
        n = await self._call(what, lambda: self._append(keys=journal, args=[data, _ms(ttl)]))
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
                        _ms(ttl),
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

    # --- tasks (see `stores._redis_tasks`) ---

    async def put_task(self, row: TaskRow, *, ttl: float, due_in: float | None) -> bool:
        check_task_write(row, ttl, due_in)
        return await self._tasks.put(row, ttl, due_in)

    async def renew_task(self, task_id: str, fence: int, lease: float) -> bool:
        check_task_id(task_id)
        check_fence(fence)
        check_lease(lease)
        return await self._tasks.renew(task_id, fence, lease)

    async def get_task(self, task_id: str) -> TaskRow | None:
        check_task_id(task_id)
        return await self._tasks.get(task_id)

    async def due_tasks(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        return await self._tasks.due(limit)

    async def tasks(self, *, limit: int = 50, status: str | None = None) -> list[TaskRow]:
        check_limit(limit)
        return await self._tasks.listing(limit, status)

    # --- bus ---

    async def publish(self, topic: str, message: bytes) -> None:
        channel = f"{self.prefix}:bus:{topic}"
        if self._mux is not None:  # a script, so it shares the connection of the others
            await self._script(
                self._publish, [], [channel, bytes(message)], "publish on {!r}", topic
            )
            return
        await self._call(
            f"publish on {topic!r}", lambda: self._client.publish(channel, bytes(message))
        )

    def subscribe(self, topic: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self._subscription(f"{self.prefix}:bus:{topic}", f"subscribe to {topic!r}")

    # --- lifecycle ---

    async def clock(self) -> float:
        """The Redis server's ``TIME``: the clock task due times are decided on."""
        return await self._tasks.clock()

    async def ping(self) -> None:
        """Redis takes a write (see `stores._redis_health`): a Redis out of memory under
        ``noeviction``, a read-only replica or one refusing writes for any other reason fails
        it; and, unless eviction is allowed, Redis does not evict keys."""
        write = partial(self._client.set, health_key(self.prefix), b"1", px=HEALTH_KEY_TTL_MS)
        try:
            await self._call("health write", write)
        except rx.ResponseError as exc:
            if not str(exc).startswith(WRITES_REFUSED):
                raise
            raise self._unavailable("health write", exc) from exc
        if not self._allow_eviction:
            refuse_eviction(await self._call("health check", self._memory_info), self._where)

    async def _memory_info(self) -> Any:
        return await self._client.info("memory")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._mux is not None:
            self._mux.close()
        for messages in tuple(self._subscriptions):
            messages.end()
        if self._owns_client:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._op_timeout):
                await self._client.aclose()


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
