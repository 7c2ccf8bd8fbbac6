"""The scripts of a serving `RedisStore`, multiplexed over one connection.

Every retry of a multi-round call claims its round and every finished round keeps its response:
two Redis round trips on the request's path, and journal batches besides. A round trip through
redis-py costs far more CPU than the script it carries (a connection checked out of the pool, a
timeout per reply, a task woken per reply), and under load many requests need one at the same
moment. So they share one connection. A script is packed and queued when submitted; what was
queued in one turn of the event loop goes out in one write; Redis answers in order, and each
reply is parsed (by hiredis) and handed to its caller's future as it arrives, in the protocol's
``data_received``. The busier the server, the more scripts share each write and each read.

Every script carries its caller's deadline (the operation timeout from when it was submitted);
one whose reply has not come by then fails with ``TimeoutError`` (its reply, when it comes, is
read and dropped). A connection that has sent nothing for a whole operation timeout while
replies are owed is stalled: everything waiting on it fails and it is closed; the next script
opens a new one. A lost connection fails the scripts in flight as unavailable: they may or may
not have run, as on any connection lost. A script Redis does not know (it restarted, or was
flushed) is sent again in full with ``EVAL``, which also loads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import hiredis
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.commands.core import AsyncScript

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
    "MASTERDOWN": rx.MasterDownError,
    "CLUSTERDOWN": rx.ClusterDownError,
    "EXECABORT": rx.ExecAbortError,
    "NOAUTH": rx.AuthenticationError,
    "WRONGPASS": rx.AuthenticationError,
    "NOPERM": rx.NoPermissionError,
}
"""Error replies by their first word, as the redis-py exceptions the store already handles."""

_ERR_MESSAGES: dict[str, type[rx.RedisError]] = {
    "max number of clients reached": rx.ConnectionError,
    "invalid password": rx.AuthenticationError,
    "Client sent AUTH, but no password is set": rx.AuthenticationError,
}
"""``ERR`` replies that redis-py gives a class of their own, by how their text starts."""


def reply_error(message: str) -> rx.RedisError:
    """The redis-py exception for an error reply (``ResponseError`` unless it has a class)."""
    code, _, rest = message.partition(" ")
    kind = _ERRORS.get(code)
    if kind is not None:
        return kind(rest)
    if code == "ERR":
        for start, kind in _ERR_MESSAGES.items():
            if rest.startswith(start):
                return kind(rest)
    return rx.ResponseError(message)


def _protocol_error(message: str) -> rx.ConnectionError:
    return rx.ConnectionError(f"Redis sent something that is not RESP: {message}")


_ENDPOINTS = (Connection, SSLConnection, UnixDomainSocketConnection)
"""Connection classes whose address the mux can read and dial itself (a Sentinel-managed
connection, say, finds its server while connecting: its scripts go through redis-py)."""


def can_multiplex(client: Redis) -> bool:
    """Whether `ScriptMux` can carry ``client``'s scripts exactly as redis-py would."""
    pool = client.connection_pool
    return pool.connection_class in _ENDPOINTS and not pool.connection_kwargs.get(
        "decode_responses", False
    )


@dataclass(slots=True)
class _Sent:
    reply: asyncio.Future[Any]
    deadline: float
    """Loop time by which the reply must have come; the caller then gets ``TimeoutError``."""
    script: AsyncScript | None
    """Sent again in full when Redis does not know it (``None``: a plain command)."""
    args: tuple[Any, ...]
    """The command after its name and SHA: the number of keys, the keys, the arguments."""
    packed: bytes


class _Wire(asyncio.Protocol):
    """One connection: packed commands out, replies in order to the futures waiting for them."""

    def __init__(self, mux: ScriptMux) -> None:
        self.mux = mux
        self.reader = hiredis.Reader(protocolError=_protocol_error, replyError=reply_error)
        self.transport: asyncio.Transport | None = None
        self.sent: deque[_Sent] = deque()
        self.queued: list[bytes] = []
        """Packed commands written at the end of this turn of the event loop (the last
        ``len(queued)`` entries of ``sent``)."""
        self.heard = mux.loop.time()
        """When Redis last sent something (or the connection opened)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def send(self, entry: _Sent) -> None:
        if not self.queued:
            self.mux.loop.call_soon(self.flush)
        self.queued.append(entry.packed)
        self.sent.append(entry)

    def flush(self) -> None:
        queued, self.queued = self.queued, []
        transport = self.transport
        if queued and transport is not None and not transport.is_closing():
            transport.write(b"".join(queued))

    def data_received(self, data: bytes) -> None:
        self.heard = self.mux.loop.time()
        reader = self.reader
        sent = self.sent
        try:
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                entry = sent.popleft()
                if isinstance(reply, rx.NoScriptError) and entry.script is not None:
                    entry.packed = self.mux.pack(("EVAL", entry.script.script, *entry.args))
                    entry.script = None  # once: a script that will not load is an error
                    self.send(entry)
                    continue
                _settle(entry.reply, reply)
        except (rx.ConnectionError, IndexError) as exc:  # not RESP, or a reply nobody asked for
            log.error("dropping the Redis connection of the round scripts: %s", exc)
            self.mux.drop(self, rx.ConnectionError(f"the connection to Redis broke: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "closed by Redis"
        self.mux.drop(self, rx.ConnectionError(f"lost the connection to Redis ({reason})"))


class ScriptMux:
    """Sends scripts over its connection while :meth:`run` runs (it opens the connection when
    a script needs one, and closes it when cancelled). Create it inside that event loop, for a
    client `can_multiplex` accepts."""

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

    def pack(self, command: tuple[Any, ...]) -> bytes:
        """RESP for ``command``, its text encoded as the client encodes it."""
        text = self._text
        if text is not None:
            command = tuple(a.encode(*text) if isinstance(a, str) else a for a in command)
        packed: bytes = hiredis.pack_command(command)
        return packed

    def submit(self, script: AsyncScript, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """The script's reply (or its error), within the operation timeout.

        The future always ends: with the reply, the error Redis gave, an unavailability error,
        ``TimeoutError`` once the operation timeout has passed, or `MuxStopped` when the mux
        stopped before sending it. A caller that gives up cancels it; the script may still run,
        as a script sent on its own may after its caller stopped listening. An argument that
        cannot be encoded raises here, before anything is sent.
        """
        if not self._serving:
            raise MuxStopped
        loop = self.loop
        rest = (len(keys), *keys, *args)
        command = ("EVALSHA", script.sha, *rest)
        packed = hiredis.pack_command(command) if self._text is None else self.pack(command)
        entry = _Sent(loop.create_future(), loop.time() + self._op_timeout, script, rest, packed)
        wire = self._wire
        if wire is None:
            self._waiting.append(entry)
            self._wanted.set()
        else:
            self._send(wire, entry)
        return entry.reply

    def _send(self, wire: _Wire, entry: _Sent) -> None:
        wire.send(entry)
        if self._watchdog is None:
            self._watchdog = self.loop.call_later(self._op_timeout / 4, self._watch)

    def _watch(self) -> None:
        """While replies are owed: fail those overdue, and drop a connection that has been
        silent for a whole operation timeout."""
        self._watchdog = None
        wire = self._wire
        if wire is None or not wire.sent:
            return
        now = self.loop.time()
        oldest = wire.sent[0]
        if now - max(wire.heard, oldest.deadline - self._op_timeout) >= self._op_timeout:
            log.warning("Redis did not answer within %s s; reconnecting", self._op_timeout)
            self.drop(wire, TimeoutError())
            return
        for entry in wire.sent:
            if entry.deadline > now:
                break
            _settle(entry.reply, TimeoutError())
        self._watchdog = self.loop.call_later(self._op_timeout / 4, self._watch)

    def drop(self, wire: _Wire, error: BaseException) -> None:
        """Fail what waits on ``wire`` with ``error`` and close it; the next script reconnects.

        Scripts not yet written fail with `MuxStopped` instead when the mux has stopped, so
        their callers send them by themselves.
        """
        if wire is self._wire:
            self._wire = None
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None
        sent, wire.sent = wire.sent, deque()
        unwritten = len(wire.queued)
        wire.queued = []
        for n, entry in enumerate(sent):
            written = n < len(sent) - unwritten
            _settle(entry.reply, error if written or self._serving else MuxStopped())
        if wire.transport is not None:
            wire.transport.abort()

    def close(self) -> None:
        """Close the connection (the store is closing); scripts in flight fail as unavailable."""
        if self._wire is not None:
            self.drop(self._wire, rx.ConnectionError("the store was closed before Redis answered"))

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
                except Exception as exc:
                    if not isinstance(exc, (rx.ConnectionError, TimeoutError)):
                        log.warning("could not connect the round scripts to Redis", exc_info=True)
                        exc = rx.ConnectionError(f"{type(exc).__name__}: {exc}")
                    self._fail_waiting(exc)
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
        """A connection to the client's Redis, answering, authenticated and on its database."""
        pool = self._client.connection_pool
        endpoint: AbstractConnection = pool.connection_class(**pool.connection_kwargs)
        factory = partial(_Wire, self)
        async with asyncio.timeout(self._op_timeout):
            if isinstance(endpoint, UnixDomainSocketConnection):
                _, wire = await self.loop.create_unix_connection(factory, endpoint.path)
            else:
                assert isinstance(endpoint, Connection)
                tls = endpoint.ssl_context.get() if isinstance(endpoint, SSLConnection) else None
                _, wire = await self.loop.create_connection(
                    factory, endpoint.host, endpoint.port, ssl=tls
                )
            try:
                await self._hello(wire, endpoint)
            except BaseException:
                self.drop(wire, rx.ConnectionError("the connection was not set up"))
                raise
        if wire.transport is None or wire.transport.is_closing():
            raise rx.ConnectionError("Redis closed the connection while it was set up")
        return wire

    async def _hello(self, wire: _Wire, endpoint: AbstractConnection) -> None:
        """Log in, select the database, name the client, and PING: the replies also take up
        anything Redis says unasked on a new connection (``max number of clients``, say)."""
        username, password = endpoint.username, endpoint.password
        provider = endpoint.credential_provider
        if provider is not None:
            credentials = await provider.get_credentials_async()
            username, password = credentials if len(credentials) == 2 else (None, credentials[0])
        commands: list[tuple[Any, ...]] = []
        if password:
            commands.append(("AUTH", username, password) if username else ("AUTH", password))
        if endpoint.db:
            commands.append(("SELECT", endpoint.db))
        if endpoint.client_name:
            commands.append(("CLIENT", "SETNAME", endpoint.client_name))
        commands.append(("PING",))
        replies = []
        for command in commands:
            entry = _Sent(self.loop.create_future(), 0.0, None, (), self.pack(command))
            wire.send(entry)
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
