"""Round scripts of concurrent requests, sent to Redis as shared pipelines.

Every retry of a multi-round call claims its round and every finished round keeps its response:
two Redis round trips on the request's path. A round trip costs far more CPU than the script it
carries (the socket write, the wake-up, the read), and under load many requests need one at the
same moment. So while one pipeline is in flight, the scripts issued meanwhile queue up and go
together in the next one: the busier the server, the more requests share each round trip, and a
lone request waits for nothing but its own.

The pipelines go over one connection of their own, written and read with redis-py's connection
primitives (and hiredis's packer when it is installed) rather than through a ``Pipeline``: that
object's per-command packing, per-reply timeouts and pool checkout cost several times what the
scripts themselves cost Redis. Each queued script carries its caller's deadline, and a pipeline
is read under the earliest deadline it carries, so no caller waits longer than the operation
timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript

from ._redis_client import UNAVAILABLE


def _c_packer() -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis's command packer, when installed; redis-py packs without it, more slowly."""
    try:
        from hiredis import pack_command
    except ImportError:  # pragma: no cover
        return None
    return pack_command


_hiredis_pack = _c_packer()

log = logging.getLogger(__name__)

MAX_BATCH = 256
"""Scripts per pipeline; a longer queue goes in the next one."""


class BatcherStopped(Exception):
    """The batcher stopped before sending this script; the caller sends it by itself."""


ScriptCall = tuple[AsyncScript, list[str], list[Any]]
"""A script with its keys and arguments."""


@dataclass(slots=True)
class _Queued:
    script: AsyncScript
    keys: list[str]
    args: list[Any]
    reply: asyncio.Future[Any]
    deadline: float
    """Loop time by which the caller must have its reply (or a ``TimeoutError``)."""


class ScriptBatcher:
    """Queues scripts and sends them, a pipeline at a time, while :meth:`run` runs.

    Create it inside the event loop that runs it.
    """

    def __init__(self, client: Redis, op_timeout: float) -> None:
        self._client = client
        self._op_timeout = op_timeout
        self._loop = asyncio.get_running_loop()
        self._queue: list[_Queued] = []
        self._ready = asyncio.Event()
        self._stopped = False
        self._connection: AbstractConnection | None = None

    def submit(self, script: AsyncScript, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """The script's reply (or its error), within the operation timeout.

        The future always ends: with the reply, the error Redis gave, an unavailability error, or
        ``TimeoutError`` once the operation timeout has passed. A caller that gives up cancels it;
        the script may still run, as a script sent on its own may after its caller stopped
        listening.
        """
        if self._stopped:
            raise BatcherStopped
        loop = self._loop
        reply = loop.create_future()
        self._queue.append(_Queued(script, keys, args, reply, loop.time() + self._op_timeout))
        self._ready.set()
        return reply

    async def run(self) -> None:
        """Send what is queued, one pipeline at a time, until cancelled."""
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                while self._queue:
                    batch = self._queue[:MAX_BATCH]
                    del self._queue[:MAX_BATCH]
                    await self._send(batch)
        finally:
            self._stopped = True
            for queued in self._queue:
                _settle(queued.reply, BatcherStopped())
            self._queue.clear()
            if self._connection is not None:
                with anyio.CancelScope(shield=True):
                    await self._connection.disconnect(nowait=True)

    async def _send(self, batch: list[_Queued]) -> None:
        now = self._loop.time()
        live: list[_Queued] = []
        for queued in batch:
            if queued.reply.done():  # its caller gave up
                continue
            if queued.deadline <= now:
                _settle(queued.reply, TimeoutError())
                continue
            live.append(queued)
        if not live:
            return
        try:
            # Bounded by the earliest deadline it carries. Cancelling the batcher (the store
            # stops serving) fails the scripts in flight as unavailable: they may or may not
            # have run, as with a connection lost.
            async with asyncio.timeout_at(min(queued.deadline for queued in live)):
                replies = await self._pipeline([(q.script, q.keys, q.args) for q in live])
        except (*UNAVAILABLE, TimeoutError) as exc:
            for queued in live:
                _settle(queued.reply, exc)
            return
        except asyncio.CancelledError:
            stopped = rx.ConnectionError("the store stopped serving before Redis answered")
            for queued in live:
                _settle(queued.reply, stopped)
            raise
        except Exception as exc:  # a bug or a refused reply: each caller sees it, none hangs
            log.warning("a pipeline of %d round scripts failed", len(live), exc_info=True)
            for queued in live:
                _settle(queued.reply, exc)
            return
        for queued, reply in zip(live, replies, strict=True):
            _settle(queued.reply, reply)

    async def _pipeline(self, calls: list[ScriptCall]) -> list[Any]:
        """Replies of the scripts, errors in place; scripts Redis lost are loaded and resent."""
        return await _reloading(self._client, calls, self._exchange)

    async def _exchange(self, calls: list[ScriptCall]) -> list[Any]:
        """One round trip on the batcher's connection; a connection that turns out dead
        (Redis restarted since it was last used) is replaced once."""
        commands = [
            ("EVALSHA", script.sha, len(keys), *keys, *args) for script, keys, args in calls
        ]
        connection = self._connection
        fresh = connection is None
        if connection is None:
            connection = self._connection = self._new_connection()
        try:
            return await _round_trip(connection, commands)
        except rx.ConnectionError:
            if fresh:
                raise
        # Most often a connection left idle across a Redis restart, which fails before its
        # scripts reach Redis. A connection lost mid-reply is retried too (as redis-py retries a
        # pipeline), so a script may run twice: a claim then answers "in progress" (its caller is
        # told to retry until the claim's lease lapses; no body runs twice), a completion finds
        # the response already kept, and a journal batch may list its events twice.
        return await _round_trip(connection, commands)

    def _new_connection(self) -> AbstractConnection:
        """A connection outside the pool, with no per-read timeout: the batch has its deadline."""
        pool = self._client.connection_pool
        options = {**pool.connection_kwargs, "socket_timeout": None}
        connection: AbstractConnection = pool.connection_class(**options)
        return connection


async def _round_trip(
    connection: AbstractConnection, commands: Sequence[tuple[Any, ...]]
) -> list[Any]:
    encoder = connection.encoder
    utf8 = encoder.encoding == "utf-8" and encoder.encoding_errors == "strict"
    if _hiredis_pack is not None and utf8:  # hiredis encodes text as redis-py does by default
        packed: list[bytes] = [b"".join([_hiredis_pack(command) for command in commands])]
    else:
        packed = connection.pack_commands(commands)
    try:
        await connection.send_packed_command(packed, check_health=False)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await connection.read_response())
            except rx.ResponseError as exc:  # this script's error; the connection is fine
                replies.append(exc)
    except BaseException:
        await connection.disconnect(nowait=True)  # a half-read pipeline poisons the connection
        raise
    return replies


async def run_scripts(client: Redis, calls: list[ScriptCall]) -> list[Any]:
    """Replies of scripts sent in one pipeline of their own (no batcher running), errors in
    place of failed ones."""
    return await _reloading(client, calls, partial(_evalsha, client))


async def _reloading(
    client: Redis,
    calls: list[ScriptCall],
    send: Callable[[list[ScriptCall]], Awaitable[list[Any]]],
) -> list[Any]:
    """``send`` the scripts by their SHA; those Redis does not know (it restarted, or was
    flushed) are loaded and sent again, so no round trip is spent asking which are loaded."""
    replies = await send(calls)
    unloaded = [i for i, reply in enumerate(replies) if isinstance(reply, rx.NoScriptError)]
    if unloaded:
        retry = [calls[i] for i in unloaded]
        for script in {id(call[0]): call[0] for call in retry}.values():
            await client.script_load(script.script)
        for i, reply in zip(unloaded, await send(retry), strict=True):
            replies[i] = reply
    return replies


async def _evalsha(client: Redis, calls: list[ScriptCall]) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for script, keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


def _settle(reply: asyncio.Future[Any], value: Any) -> None:
    if reply.done():
        return
    if isinstance(value, BaseException):
        reply.set_exception(value)
    else:
        reply.set_result(value)
