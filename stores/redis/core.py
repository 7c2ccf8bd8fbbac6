"""What every facet of `RedisStore` runs on: its client, key names, timeouts and the shared
connection of a serving store; and the store as a whole (`serve`, `clock`, `ping`, `aclose`).

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
import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import anyio
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from .._checks import check_ttl
from .._urls import redacted, split_flag, split_prefix
from ..base import StoreUnavailable, unavailable
from . import lua
from .client import UNAVAILABLE, RedisClient, as_bytes, client_from_url
from .health import HEALTH_KEY_TTL_MS, WRITES_REFUSED, health_key, refuse_eviction
from .mux import MuxStopped, ScriptCall, ScriptMux, can_multiplex, run_scripts

T = TypeVar("T")


def _tag(call_id: str) -> str:
    """Escape the call id so it can neither end its hash tag early nor forge another key."""
    if "%" not in call_id and "}" not in call_id:  # the engine's own (hex) call ids
        return call_id
    return call_id.replace("%", "%25").replace("}", "%7D")


def milliseconds(seconds: float) -> int:
    """A TTL in whole milliseconds, at least one: what Redis expiries take."""
    return max(1, math.ceil(seconds * 1000))


class RedisCore:
    """The client of one `RedisStore` and how its operations reach Redis; each facet runs its
    operations through `_call` (one command or pipeline) or `_script` (one Lua script)."""

    def __init__(
        self,
        url_or_client: str | RedisClient,
        *,
        prefix: str | None,
        op_timeout: float,
        retries: int,
        max_connections: int,
        allow_eviction: bool,
    ) -> None:
        """Connect lazily to `url_or_client` (see `RedisStore`)."""
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
        self._op_timeout = op_timeout
        self._closed = False
        self._mux: ScriptMux | None = None
        self._time = self._client.register_script(lua.CLOCK)

    # --- keys ---

    def _call_keys(self, call_id: str) -> str:
        """What every key of one call starts with (its hash tag keeps them on one node)."""
        return f"{self.prefix}:{{{_tag(call_id)}}}"

    def _key(self, call_id: str, *parts: str | int) -> str:
        return ":".join([self._call_keys(call_id), *map(str, parts)])

    def _index_key(self, name: str) -> str:
        return f"{self.prefix}:index:{{{self.prefix}}}:{name}"

    # --- plumbing ---

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """While a server uses the store: the scripts of concurrent requests share one
        multiplexed connection (see `stores.redis.mux`).

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

    # --- the store as a whole ---

    async def clock(self) -> float:
        """The Redis server's ``TIME``: the clock task due times are decided on."""
        now = await self._script(self._time, [], [], "reading the time")
        return float(as_bytes(now, "the time").decode())

    async def ping(self) -> None:
        """Redis takes a write (see `stores.redis.health`): a Redis out of memory under
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
        if self._owns_client:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._op_timeout):
                await self._client.aclose()
