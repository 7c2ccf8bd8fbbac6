"""The scripts of a serving `RedisStore`, multiplexed over one connection.

Every retry of a multi-round call claims its round and every finished round keeps its response:
two Redis round trips on the request's path, and journal batches besides. A round trip through
redis-py costs far more CPU than the script it carries (a connection checked out of the pool, a
timeout per reply, a task woken per reply), and under load many requests need one at the same
moment. So they share one connection. A script is packed and queued when submitted; what was
queued in one turn of the event loop goes out in one write; Redis answers in order, and each
reply is parsed (by hiredis) and handed to its caller's future as it arrives, in the protocol's
``data_received``. The busier the server, the more scripts share each write and each read.

A reply that has not come within the operation timeout means the connection is stalled: every
script waiting on it fails with ``TimeoutError`` and the connection is dropped (later replies
could no longer be matched to their callers); the next script opens a new one. A lost connection
fails the scripts in flight as unavailable: they may or may not have run, as on any connection
lost. A script Redis does not know (it restarted, or was flushed) is sent again in full with
``EVAL``, which also loads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import hiredis
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript

from ._redis_client import UNAVAILABLE

log = logging.getLogger(__name__)


class MuxStopped(Exception):
    """The connection is not serving, so this script was not sent: send it by itself."""


ScriptCall = tuple[AsyncScript, list[str], list[Any]]
"""A script with its keys and arguments."""

_ERRORS: dict[str, type[rx.RedisError]] = {
    "NOSCRIPT": rx.NoScriptError,
    "READONLY": rx.ReadOnlyError,
    "OOM": rx.OutOfMemoryError,
    "LOADING": rx.BusyLoadingError,
    "TRYAGAIN": rx.TryAgainError,
    "NOAUTH": rx.AuthenticationError,
    "WRONGPASS": rx.AuthenticationError,
    "NOPERM": rx.NoPermissionError,
}
"""Error replies by their first word, as the redis-py exceptions the store already handles."""


def reply_error(message: str) -> rx.RedisError:
    """The redis-py exception for an error reply (``ResponseError`` unless it has a class)."""
    code, _, rest = message.partition(" ")
    kind = _ERRORS.get(code)
    return kind(rest) if kind is not None else rx.ResponseError(message)


def _protocol_error(message: str) -> rx.ConnectionError:
    return rx.ConnectionError(f"Redis sent something that is not RESP: {message}")


@dataclass(slots=True)
class _Sent:
    reply: asyncio.Future[Any]
    deadline: float
    """Loop time by which the reply must have come, or the connection counts as stalled."""
    script: AsyncScript | None
    """Sent again in full when Redis does not know it (``None``: a plain command)."""
    command: tuple[Any, ...]


class _Wire(asyncio.Protocol):
    """One connection: packed commands out, replies in order to the futures waiting for them."""

    def __init__(self, mux: ScriptMux) -> None:
        self.mux = mux
        self.reader = hiredis.Reader(protocolError=_protocol_error, replyError=reply_error)
        self.transport: asyncio.Transport | None = None
        self.sent: deque[_Sent] = deque()
        self.queued: list[bytes] = []
        """Packed commands written at the end of this turn of the event loop."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def send(self, entry: _Sent, packed: bytes) -> None:
        if not self.queued:
            self.mux.loop.call_soon(self.flush)
        self.queued.append(packed)
        self.sent.append(entry)

    def flush(self) -> None:
        queued, self.queued = self.queued, []
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"".join(queued))

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        sent = self.sent
        try:
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                entry = sent.popleft()
                if isinstance(reply, rx.NoScriptError) and entry.script is not None:
                    self.send(entry, _eval_in_full(entry))
                    entry.script = None  # once: a script that will not load is an error
                    continue
                _settle(entry.reply, reply)
        except (rx.ConnectionError, IndexError) as exc:  # not RESP, or a reply nobody asked for
            log.error("dropping the Redis connection of the round scripts: %s", exc)
            self.mux.drop(self, rx.ConnectionError(f"the connection to Redis broke: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "closed by Redis"
        self.mux.drop(self, rx.ConnectionError(f"lost the connection to Redis ({reason})"))


def _eval_in_full(entry: _Sent) -> bytes:
    assert entry.script is not None
    packed: bytes = hiredis.pack_command(("EVAL", entry.script.script, *entry.command[2:]))
    return packed


class ScriptMux:
    """Sends scripts over its connection while :meth:`run` runs (it opens the connection when
    a script needs one, and closes it when cancelled). Create it inside that event loop."""

    def __init__(self, client: Redis, op_timeout: float) -> None:
        self._client = client
        self._op_timeout = op_timeout
        self.loop = asyncio.get_running_loop()
        self._wire: _Wire | None = None
        self._waiting: list[_Sent] = []
        """Scripts submitted while there was no connection, sent once there is one."""
        self._wanted = asyncio.Event()
        self._serving = False
        self._watchdog: asyncio.TimerHandle | None = None
        options = client.connection_pool.connection_kwargs
        encoding = (options.get("encoding", "utf-8"), options.get("encoding_errors", "strict"))
        self._text: tuple[str, str] | None = None if encoding == ("utf-8", "strict") else encoding
        """How the client encodes text, when not as hiredis does (UTF-8, strict)."""

    def submit(self, script: AsyncScript, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """The script's reply (or its error), within the operation timeout.

        The future always ends: with the reply, the error Redis gave, an unavailability error,
        ``TimeoutError`` once the operation timeout has passed, or `MuxStopped` when the mux
        stopped before sending it. A caller that gives up cancels it; the script may still run,
        as a script sent on its own may after its caller stopped listening.
        """
        if not self._serving:
            raise MuxStopped
        loop = self.loop
        command: tuple[Any, ...] = ("EVALSHA", script.sha, len(keys), *keys, *args)
        if self._text is not None:
            command = tuple(a.encode(*self._text) if isinstance(a, str) else a for a in command)
        entry = _Sent(loop.create_future(), loop.time() + self._op_timeout, script, command)
        wire = self._wire
        if wire is None:
            self._waiting.append(entry)
            self._wanted.set()
        else:
            self._send(wire, entry)
        return entry.reply

    def _send(self, wire: _Wire, entry: _Sent) -> None:
        wire.send(entry, hiredis.pack_command(entry.command))
        if self._watchdog is None:
            self._watchdog = self.loop.call_at(entry.deadline, self._watch)

    def _watch(self) -> None:
        """The oldest reply is due: drop a stalled connection, else look again when the next
        one is due."""
        self._watchdog = None
        wire = self._wire
        if wire is None or not wire.sent:
            return
        due = wire.sent[0].deadline
        if due <= self.loop.time():
            log.warning("Redis did not answer within %s s; reconnecting", self._op_timeout)
            self.drop(wire, TimeoutError())
        else:
            self._watchdog = self.loop.call_at(due, self._watch)

    def drop(self, wire: _Wire, error: BaseException) -> None:
        """Fail what waits on ``wire`` with ``error`` and close it; the next script reconnects."""
        if wire is self._wire:
            self._wire = None
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None
        sent, wire.sent = wire.sent, deque()
        for entry in sent:
            _settle(entry.reply, error)
        if wire.transport is not None:
            wire.transport.abort()

    async def run(self) -> None:
        """Connect whenever scripts wait for a connection, until cancelled."""
        self._serving = True
        try:
            while True:
                await self._wanted.wait()
                self._wanted.clear()
                if self._wire is not None or not self._waiting:
                    continue
                try:
                    wire = await self._connect()
                except (*UNAVAILABLE, TimeoutError, OSError) as exc:
                    error = exc if isinstance(exc, (*UNAVAILABLE, TimeoutError)) else None
                    self._fail_waiting(error or rx.ConnectionError(f"{type(exc).__name__}: {exc}"))
                    continue
                self._wire = wire
                waiting, self._waiting = self._waiting, []
                for entry in waiting:
                    if not entry.reply.done():
                        self._send(wire, entry)
        finally:
            self._serving = False
            self._fail_waiting(MuxStopped())
            if self._wire is not None:
                stopped = rx.ConnectionError("the store stopped serving before Redis answered")
                self.drop(self._wire, stopped)

    def _fail_waiting(self, error: BaseException) -> None:
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            _settle(entry.reply, error)

    async def _connect(self) -> _Wire:
        """A connection to the client's Redis, authenticated and on its database."""
        pool = self._client.connection_pool
        endpoint: AbstractConnection = pool.connection_class(**pool.connection_kwargs)
        factory = partial(_Wire, self)
        async with asyncio.timeout(self._op_timeout):
            path = getattr(endpoint, "path", None)
            if path:
                _, wire = await self.loop.create_unix_connection(factory, path)
            else:
                tls = getattr(endpoint, "ssl_context", None)
                _, wire = await self.loop.create_connection(
                    factory,
                    getattr(endpoint, "host", "localhost"),
                    getattr(endpoint, "port", 6379),
                    ssl=tls.get() if tls is not None else None,
                )
            try:
                await self._hello(wire, endpoint)
            except BaseException:
                self.drop(wire, rx.ConnectionError("the connection was not set up"))
                raise
        return wire

    async def _hello(self, wire: _Wire, endpoint: AbstractConnection) -> None:
        username, password = endpoint.username, endpoint.password
        provider = endpoint.credential_provider
        if provider is not None:
            credentials = await provider.get_credentials_async()
            username, password = credentials if len(credentials) == 2 else (None, credentials[0])
        commands: list[Sequence[Any]] = []
        if password:
            commands.append(("AUTH", username, password) if username else ("AUTH", password))
        db = getattr(endpoint, "db", 0)
        if db:
            commands.append(("SELECT", db))
        if endpoint.client_name:
            commands.append(("CLIENT", "SETNAME", endpoint.client_name))
        replies = []
        for command in commands:
            entry = _Sent(self.loop.create_future(), 0.0, None, tuple(command))
            wire.send(entry, hiredis.pack_command(entry.command))
            replies.append((command[0], entry.reply))
        for name, reply in replies:
            try:
                await reply
            except rx.ResponseError as exc:
                raise rx.ConnectionError(f"Redis refused {name}: {exc}") from exc


async def run_scripts(client: Redis, calls: list[ScriptCall]) -> list[Any]:
    """Replies of scripts sent in one pipeline of their own (no mux serving), errors in place
    of failed ones; scripts Redis lost are loaded and sent again."""
    replies = await _evalsha(client, calls)
    unloaded = [i for i, reply in enumerate(replies) if isinstance(reply, rx.NoScriptError)]
    if unloaded:
        retry = [calls[i] for i in unloaded]
        for script in {id(call[0]): call[0] for call in retry}.values():
            await client.script_load(script.script)
        for i, reply in zip(unloaded, await _evalsha(client, retry), strict=True):
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
