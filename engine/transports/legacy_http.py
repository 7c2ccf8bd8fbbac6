"""Streamable HTTP for 2025-11-25 clients: sessions, the back-channel, resumable streams.

A legacy POST is answered with JSON when nothing has to precede its result; as soon as the call
sends a notification or a server→client request, the response becomes an event stream whose
events carry ids. Events are kept (in this process and, with a store, in the store) so a client
that lost the stream resumes it with ``GET`` + ``Last-Event-ID`` on any replica. A disconnect is
not a cancellation in this era: the call goes on and its events wait to be resumed.

This module answers a POST's request on its stream (what the request is, the protocol entry
decides: :mod:`engine.protocol.entry`) and serves ``GET`` and ``DELETE``; the streams and their
resumption are in :mod:`engine.transports._legacy_streams`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio

from engine.auth.provider import AccessToken
from engine.errors import INVALID_REQUEST, MCPError
from engine.fleet.sessions import LegacySession
from engine.protocol.dispatch import Response
from engine.protocol.entry import REFUSED, Serve, requester_session
from engine.protocol.errors import id_in_use, status_of, store_error
from engine.protocol.jsonrpc import error_bytes, notification_bytes
from engine.transports._asgi import Header, Receive, Send, cancel_on_disconnect, send_json
from engine.transports._legacy_streams import (
    CALL_EVENT_ID,
    RETRY_MS,
    STREAM_NOT_FOUND,
    EventLog,
    ResponseStream,
    StoredStream,
    find_stream,
    resume,
    state_of,
)
from engine.transports._served import Hosted
from engine.transports._sse import (
    KEEPALIVE_SECONDS,
    end_event_stream,
    priming_event,
    relay,
    start_event_stream,
    write,
)
from stores import StoreUnavailable

log = logging.getLogger("engine.http")

ENDED = (
    "Session ended: it was deleted (HTTP DELETE) before this request was answered; open a new "
    "session with initialize and send the request again"
)


async def session_request(
    server: Hosted,
    method: str,
    session_id: str,
    headers: Mapping[str, str],
    replica: Header,
    receive: Receive,
    send: Send,
    access_token: AccessToken | None = None,
) -> None:
    """``GET`` (the session's stream, or a resumed one) or ``DELETE`` of a session."""

    async def respond(response: Response) -> None:
        await send_json(send, response.status, response.body or b"", replica)

    held = await requester_session(
        server,
        lambda: server.request_principal(headers, access_token),
        None,
        session_id,
        None,
        respond,
    )
    if held is REFUSED:
        return
    session = held[1]
    assert session is not None  # named by session_id, and found
    if method == "DELETE":
        await delete(server, session_id, replica, send)
    else:
        await get(server, headers, session, replica, receive, send)


class Opening(Protocol):
    """The request a POST carries: the session it names, and the one its ``initialize``
    opened (returned as ``MCP-Session-Id``)."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def new_session(self) -> LegacySession | None: ...


async def answer(
    server: Hosted,
    raw: dict[str, Any],
    serve: Serve,
    channel: Opening,
    replica: Header,
    receive: Receive,
    send: Send,
) -> None:
    """Serve one 2025-11-25 request on its response stream, and answer it there. A hang-up
    does not end the request (its events wait to be resumed); a cancel does."""
    request_id = raw.get("id")
    session_id = channel.session_id
    stream = ResponseStream(server, send, replica, request_id, session_id)
    response = Response(200, b"")
    state = state_of(server)
    key = (session_id, request_id)
    if session_id is not None and key in state.inflight and isinstance(request_id, str | int):
        await send_json(send, 200, error_bytes(request_id, id_in_use(request_id)), replica)
        return
    with anyio.CancelScope() as cancel:
        state.inflight[key] = cancel
        try:
            async with anyio.create_task_group() as tg:
                if server.store is not None:
                    tg.start_soon(stream.heartbeat)
                tg.start_soon(stream.detach_on_disconnect, receive)
                response = await serve(stream)
                tg.cancel_scope.cancel()
        finally:
            state.inflight.pop(key, None)
    ended = key in state.ended
    state.ended.discard(key)
    if cancel.cancelled_caught:
        with anyio.CancelScope(shield=True):
            if ended:  # its session was deleted: say so, on what is left of the stream
                error = MCPError(INVALID_REQUEST, ENDED)
                await stream.finish(200, error_bytes(request_id, error), [])
            else:  # the client cancelled: no result, but end what was started
                await stream.abandon()
        return
    extra = []
    if channel.new_session is not None:
        extra.append((b"mcp-session-id", channel.new_session.id.encode()))
    await stream.finish(response.status, response.body, extra)


async def get(
    server: Hosted,
    headers: Mapping[str, str],
    session: LegacySession,
    replica: Header,
    receive: Receive,
    send: Send,
) -> None:
    """``GET``: resume a response stream of this session (``Last-Event-ID``), or open the
    session's stream. Another session's stream is not found (404), as an unknown one."""
    last = headers.get("last-event-id")
    stream: EventLog | StoredStream | None = None
    if last and CALL_EVENT_ID.fullmatch(last):
        try:
            stream = await find_stream(server, last.rpartition(".")[0], session.id)
        except StoreUnavailable as exc:
            error = store_error(exc, server.metrics)
            await send_json(send, status_of(error), error_bytes(None, error), replica)
            return
        if stream is None:
            error = MCPError(INVALID_REQUEST, STREAM_NOT_FOUND)
            await send_json(send, 404, error_bytes(None, error), replica)
            return
    await start_event_stream(send, replica)
    ends = state_of(server).session_stream
    async with anyio.create_task_group() as tg:
        with ends(session.id, tg.cancel_scope):
            tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
            if stream is not None:
                assert last is not None
                await resume(stream, int(last.rpartition(".")[2]), server, send)
            else:
                await _session_stream(server, session, send)
            tg.cancel_scope.cancel()
    await end_event_stream(send)


async def _session_stream(server: Hosted, session: LegacySession, send: Send) -> None:
    """The session's standalone stream: list changes, resource updates, session messages."""
    sender, events = anyio.create_memory_object_stream[bytes](256)

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/resources/updated":
            current = await server.sessions.get(session.id)
            if current is None or params.get("uri") not in current.subscriptions:
                return
        with contextlib.suppress(anyio.WouldBlock):
            sender.send_nowait(notification_bytes(method, params))

    server.add_listener(on_notification)
    server.add_session_stream(session.id, on_notification)
    try:
        await write(send, priming_event("session", RETRY_MS))
        await relay(events, send, KEEPALIVE_SECONDS)
    finally:
        server.remove_listener(on_notification)
        server.remove_session_stream(session.id, on_notification)


async def delete(server: Hosted, session_id: str, replica: Header, send: Send) -> None:
    """End the session, and on every replica its requests still running and its streams."""
    await server.sessions.delete(session_id)
    await server.bus.publish("session-ended", session_id)
    await send_json(send, 200, b"", replica)


__all__ = ["answer", "delete", "get", "session_request"]
