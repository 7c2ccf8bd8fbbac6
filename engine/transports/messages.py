"""A connection that carries one JSON-RPC message at a time, each way: stdio, or memory streams.

Each message goes to the protocol entry (:mod:`engine.protocol.entry`) with this connection as
its channel. Requests are served concurrently, except a 2025-11-25 ``initialize``: the messages
after it wait for its session. ``notifications/cancelled`` cancels the request it names
(including a ``subscriptions/listen``). A connection speaks 2026-07-28 until its client sends a
2025-11-25 ``initialize``; then it is that session's. End of input ends the connection once
in-flight requests finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from engine.auth.provider import AccessToken
from engine.errors import MCPError
from engine.fleet.sessions import LegacySession
from engine.protocol import entry
from engine.protocol.dispatch import Response
from engine.protocol.entry import Feed, Serve
from engine.protocol.era import Era
from engine.protocol.errors import id_in_use
from engine.protocol.jsonrpc import error_bytes, loads, notification_bytes, request_id_of
from engine.protocol.modern import Exchange, HeaderCheck
from engine.transports._served import Hosted

Write = Callable[[bytes], Awaitable[None]]
"""Sends one serialized message to the client."""


class MessageSession:
    """One client connection, the channel of each of its messages: its requests in flight,
    and its 2025-11-25 session once opened."""

    headers: Mapping[str, str] | None = None
    access_token: AccessToken | None = None
    client: str | None = None
    validate: HeaderCheck | None = None
    session_id: str | None = None
    connection = True
    stateless = False

    def __init__(self, server: Hosted, write: Write) -> None:
        self.server = server
        self.write = write
        self.inflight: dict[Any, anyio.CancelScope] = {}
        self.listens: set[anyio.CancelScope] = set()
        self.closing = False
        """Input ended: a listen that has not begun streaming does not begin."""
        self.session: LegacySession | None = None
        """Set by a 2025-11-25 ``initialize``: this process then speaks that era."""
        self.exchange = Exchange(None, self.notify)
        """Every 2026-07-28 request's: a connection has no headers, token or address."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.write(notification_bytes(method, params))

    async def message(self, data: bytes) -> None:
        """A server→client request of the 2025-11-25 era."""
        await self.write(data)

    async def close_connection(self) -> None:
        """Nothing to close: the connection is the only way messages travel."""

    async def handle_line(self, line: bytes, tg: TaskGroup) -> None:
        if not line.strip():
            return
        try:
            raw = loads(line)
        except MCPError as exc:
            await self.write(error_bytes(None, exc))
            return
        if entry.in_order(raw, self.session is not None):
            await self.serve(raw)
            return
        tg.start_soon(self.serve, raw)

    async def serve(self, raw: Any) -> None:
        if type(raw) is not dict or "method" not in raw:
            await entry.serve(self.server, raw, self)
            return
        request_id = request_id_of(raw)
        if request_id is not None and request_id in self.inflight:
            await self.write(error_bytes(request_id, id_in_use(request_id)))
            return
        with anyio.CancelScope() as scope:
            if request_id is not None:
                self.inflight[request_id] = scope
            try:
                await entry.serve(self.server, raw, self)
            finally:
                if request_id is not None:
                    del self.inflight[request_id]

    # --- the channel ---------------------------------------------------------------------------

    def principal(self) -> str | None:
        return None

    async def respond(self, response: Response) -> None:
        if response.body is not None:
            await self.write(response.body)

    async def request(self, era: Era, raw: dict[str, Any], notifies: bool, serve: Serve) -> None:
        await self.respond(await serve(self))

    async def stream(self, feed: Feed) -> None:
        if self.closing:
            return
        with anyio.CancelScope() as scope:
            self.listens.add(scope)
            try:
                sender, events = anyio.create_memory_object_stream[bytes](256)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(feed, sender)
                    async with events:
                        async for event in events:
                            await self.write(event)
            finally:
                self.listens.discard(scope)

    async def cancel(self, era: Era, request_id: Any) -> None:
        scope = self.inflight.get(request_id)
        if scope is not None:
            scope.cancel()

    def opened(self, session: LegacySession) -> None:
        self.session = session
        self.server.add_session_stream(session.id, self.notify)
        self.server.add_listener(self.session_notification)

    async def session_notification(self, method: str, params: dict[str, Any]) -> None:
        """List changes, and updates of resources this session subscribed to."""
        if self.session is None:
            return
        if method == "notifications/resources/updated":
            current = await self.server.sessions.get(self.session.id)
            if current is None or params.get("uri") not in current.subscriptions:
                return
        await self.notify(method, params)


async def serve_messages(server: Hosted, messages: AsyncIterable[bytes], write: Write) -> None:
    """Serve one connection: ``messages`` are the client's, each answer goes to ``write``.

    Runs the server's lifespan around the connection; returns when ``messages`` ends and the
    requests in flight have been answered.
    """
    session = MessageSession(server, write)
    async with server.running(), anyio.create_task_group() as tg:
        async for message in messages:
            await session.handle_line(message, tg)
        session.closing = True
        for scope in list(session.listens):
            scope.cancel()
