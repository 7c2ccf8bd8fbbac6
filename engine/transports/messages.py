"""A connection that carries one JSON-RPC message at a time, each way: stdio, or memory streams.

Requests are served concurrently, except a 2025-11-25 ``initialize``: the messages after it
wait for its session. ``notifications/cancelled`` cancels the request it names
(including a ``subscriptions/listen``). A connection speaks 2026-07-28 until its client sends a
2025-11-25 ``initialize``; then it is that session's. End of input ends the connection once
in-flight requests finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from engine.errors import MCPError
from engine.fleet.sessions import LegacySession
from engine.protocol import legacy
from engine.protocol.dispatch import dispatch
from engine.protocol.era import is_legacy
from engine.protocol.errors import error_of
from engine.protocol.jsonrpc import (
    error_bytes,
    loads,
    notification_bytes,
    parse,
    request_id_of,
    result_bytes,
)
from engine.protocol.modern import Exchange
from engine.transports._served import Hosted

Write = Callable[[bytes], Awaitable[None]]
"""Sends one serialized message to the client."""


class MessageSession:
    """One client connection: its requests in flight, and its 2025-11-25 session once opened."""

    def __init__(self, server: Hosted, write: Write) -> None:
        self.server = server
        self.write = write
        self.inflight: dict[Any, anyio.CancelScope] = {}
        self.listens: set[anyio.CancelScope] = set()
        self.session: LegacySession | None = None
        """Set by a 2025-11-25 ``initialize``: this process then speaks that era."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.write(notification_bytes(method, params))

    async def handle_line(self, line: bytes, tg: TaskGroup) -> None:
        if not line.strip():
            return
        try:
            raw = loads(line)
        except MCPError as exc:
            await self.write(error_bytes(None, exc))
            return
        if isinstance(raw, dict) and "method" not in raw and ("result" in raw or "error" in raw):
            # a response to one of our requests
            session_id = self.session.id if self.session is not None else None
            await self.server.backchannel.deliver(raw, session_id)
            return
        if isinstance(raw, dict) and raw.get("method") == "notifications/cancelled":
            params = raw.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            scope = self.inflight.get(target)
            if scope is not None:
                scope.cancel()
            if not self.server.middleware:
                return  # with middleware, it is served (observed) as any other notification
        if self.session is None and is_legacy(raw) and raw.get("method") == "initialize":
            # What follows belongs to the session this opens: a client that sends its first
            # call without waiting for the answer must not see that call served outside it.
            await self.serve(raw)
            return
        tg.start_soon(self.serve, raw)

    async def serve(self, raw: Any) -> None:
        request_id = request_id_of(raw)
        with anyio.CancelScope() as scope:
            if request_id is not None:
                self.inflight[request_id] = scope
            try:
                if isinstance(raw, dict) and raw.get("method") == "subscriptions/listen":
                    self.listens.add(scope)
                    await self.listen(raw)
                    return
                if is_legacy(raw, in_session=self.session is not None):
                    await self.serve_legacy(raw)
                    return
                response = await dispatch(self.server, raw, Exchange(notify=self.notify))
                if response.body is not None:
                    await self.write(response.body)
            finally:
                self.inflight.pop(request_id, None)
                self.listens.discard(scope)

    async def serve_legacy(self, raw: Any) -> None:
        request_id = request_id_of(raw)
        if not (isinstance(raw, dict) and "id" in raw):
            # notifications/initialized and other notifications need no answer
            if self.server.middleware:
                await self.observe_legacy(raw)
            return
        exchange = legacy.LegacyExchange(self.session, outbox=self.write, notify=self.notify)
        try:
            message = parse(raw)
            body = result_bytes(message.id, await legacy.handle(self.server, message, exchange))
        except Exception as exc:  # whatever a request ends in, the process serves on
            body = error_bytes(request_id, error_of(exc, self.server.metrics))
        if exchange.new_session is not None:
            self.session = exchange.new_session
            self.server.add_session_stream(self.session.id, self.notify)
            self.server.add_listener(self.session_notification)
        await self.write(body)

    async def observe_legacy(self, raw: Any) -> None:
        """A 2025-11-25 notification, through the server's middleware."""
        try:
            message = parse(raw)
        except MCPError:
            return  # not a notification at all: nothing to observe, nobody to tell
        await legacy.observe(self.server, message, self.session)

    async def session_notification(self, method: str, params: dict[str, Any]) -> None:
        """List changes, and updates of resources this session subscribed to."""
        if self.session is None:
            return
        if method == "notifications/resources/updated":
            current = await self.server.sessions.get(self.session.id)
            if current is None or params.get("uri") not in current.subscriptions:
                return
        await self.notify(method, params)

    async def listen(self, raw: dict[str, Any]) -> None:
        from engine.protocol.subscriptions import Subscription
        from engine.protocol.subscriptions import listen as serve_listen

        streaming = False

        async def stream(subscription: Subscription) -> None:
            nonlocal streaming
            streaming = True
            sender, events = anyio.create_memory_object_stream[bytes](256)
            async with anyio.create_task_group() as tg:
                tg.start_soon(subscription.run, sender)
                async with events:
                    async for event in events:
                        await self.write(event)

        request_id = raw.get("id")
        try:
            answered = await serve_listen(self.server, raw, Exchange(), stream)
        except Exception as exc:  # whatever a request ends in, the process serves on
            error = error_of(exc, self.server.metrics)
            if not streaming:  # once the stream has begun, there is no response left to send
                await self.write(error_bytes(request_id, error))
            return
        if answered is not None:  # a middleware answered in the server's place
            await self.write(result_bytes(request_id, answered))


async def serve_messages(server: Hosted, messages: AsyncIterable[bytes], write: Write) -> None:
    """Serve one connection: ``messages`` are the client's, each answer goes to ``write``.

    Runs the server's lifespan around the connection; returns when ``messages`` ends and the
    requests in flight have been answered.
    """
    session = MessageSession(server, write)
    async with server.running(), anyio.create_task_group() as tg:
        async for message in messages:
            await session.handle_line(message, tg)
        for scope in list(session.listens):
            scope.cancel()
