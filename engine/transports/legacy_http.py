"""Streamable HTTP for 2025-11-25 clients: sessions, the back-channel, resumable streams.

A legacy POST is answered with JSON when nothing has to precede its result; as soon as the call
sends a notification or a server→client request, the response becomes an event stream whose
events carry ids. Events are kept (in this process and, with a store, in the store) so a client
that lost the stream resumes it with ``GET`` + ``Last-Event-ID`` on any replica. A disconnect is
not a cancellation in this era: the call goes on and its events wait to be resumed.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import weakref
from collections.abc import Mapping
from typing import Any

import anyio

from engine.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError
from engine.fleet.sessions import LegacySession
from engine.protocol import legacy
from engine.protocol.dispatch import error_response
from engine.protocol.errors import error_of, status_of, store_error
from engine.protocol.jsonrpc import (
    dumps,
    error_bytes,
    loads,
    notification_bytes,
    parse,
    result_bytes,
)
from engine.transports._asgi import Receive, Send, send_json
from engine.transports._served import Hosted
from stores import StoreUnavailable

log = logging.getLogger("engine.http.legacy")


RETRY_MS = 1000
CALL_EVENT_ID = re.compile(r"[0-9a-f]{24}\.\d+")
"""Event ids of a call's stream: ``<stream id>.<n>``; anything else names a session stream."""
HEARTBEAT = 2.0
EVENT_TTL = 600.0


class LegacyState:
    """Per-server transport state: streams kept for resumption, requests that can be cancelled."""

    def __init__(self, server: Hosted) -> None:
        self.event_logs: dict[str, EventLog] = {}
        self.inflight: dict[tuple[str | None, Any], anyio.CancelScope] = {}
        server.bus.on("cancel", self._cancel_here)

    async def _cancel_here(self, session_id: str | None, request_id: Any) -> None:
        scope = self.inflight.get((session_id, request_id))
        if scope is not None:
            scope.cancel()


_STATES: weakref.WeakKeyDictionary[Hosted, LegacyState] = weakref.WeakKeyDictionary()


def state_of(server: Hosted) -> LegacyState:
    state = _STATES.get(server)
    if state is None:
        state = _STATES[server] = LegacyState(server)
    return state


class EventLog:
    """The events of one response stream, kept for resumption."""

    def __init__(self, server: Hosted, stream_id: str, request_id: Any) -> None:
        self.server = server
        self.stream_id = stream_id
        self.request_id = request_id
        self.events: list[bytes] = []
        self.done = False
        self.changed = anyio.Event()

    def event_id(self, index: int) -> str:
        return f"{self.stream_id}.{index}"

    async def add(self, data: bytes, *, final: bool = False) -> int:
        self.events.append(data)
        index = len(self.events)
        self.done = self.done or final
        self.changed.set()
        self.changed = anyio.Event()
        store = self.server.store
        if store is not None:
            try:
                key = f"sse-{self.stream_id}"
                await store.put_blob(key, str(index), data, EVENT_TTL)
                if final:
                    await store.put_blob(key, "end", str(index).encode(), EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream event not kept in the store: %s", exc)
        return index


class ResponseStream:
    """The answer to one legacy POST: plain JSON, or an event stream once something precedes
    the result."""

    def __init__(
        self, server: Hosted, send: Send, replica: tuple[bytes, bytes], request_id: Any
    ) -> None:
        self.server = server
        self.send = send
        self.replica = replica
        self.log = EventLog(server, secrets.token_hex(12), request_id)
        self.started = False
        self.attached = True
        self.lock = anyio.Lock()
        """Writers take turns: two questions asked at once must not interleave their events,
        nor race the response's headers."""

    async def _start(self) -> None:
        self.started = True
        logs = state_of(self.server).event_logs
        if len(logs) >= 1000:  # resumption from the store still works for older streams
            for stream_id in [k for k, v in logs.items() if v.done][:500]:
                del logs[stream_id]
        logs[self.log.stream_id] = self.log
        store = self.server.store
        if store is not None:
            try:  # so another replica can answer for this request if this one dies
                key = f"sse-{self.log.stream_id}"
                await store.put_blob(key, "request", dumps(self.log.request_id), EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream not registered in the store: %s", exc)
        await self.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                    self.replica,
                ],
            }
        )
        priming = f"id: {self.log.event_id(0)}\nretry: {RETRY_MS}\ndata: \n\n".encode()
        await self._write(priming)

    async def _write(self, chunk: bytes, more: bool = True) -> None:
        if self.attached:
            try:
                await self.send({"type": "http.response.body", "body": chunk, "more_body": more})
            except OSError:
                self.attached = False

    async def message(self, data: bytes) -> None:
        """A notification or server→client request that precedes the result."""
        async with self.lock:
            if not self.started:
                await self._start()
            index = await self.log.add(data)
            await self._write(_event(self.log.event_id(index), data))

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.message(notification_bytes(method, params))

    async def close_connection(self) -> None:
        """End the HTTP response now; the call goes on and the client resumes with GET."""
        async with self.lock:
            if not self.started:
                await self._start()
            await self._write(b"", more=False)
            self.attached = False

    async def abandon(self) -> None:
        """The request was cancelled: answer 202 if nothing was sent, else end the stream."""
        async with self.lock:
            self.log.done = True
            self.log.changed.set()
            if not self.started:
                await send_json(self.send, 202, b"", self.replica)
            else:
                await self._write(b"", more=False)

    async def finish(
        self, status: int, body: bytes | None, headers: list[tuple[bytes, bytes]]
    ) -> None:
        async with self.lock:
            await self._finish(status, body, headers)

    async def _finish(
        self, status: int, body: bytes | None, headers: list[tuple[bytes, bytes]]
    ) -> None:
        if not self.started:
            payload = body or b""
            await self.send(
                {
                    "type": "http.response.start",
                    "status": status if body is not None else 202,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(payload)).encode()),
                        self.replica,
                        *headers,
                    ],
                }
            )
            await self.send({"type": "http.response.body", "body": payload})
            return
        data = body or b""
        index = await self.log.add(data, final=True)
        await self._write(_event(self.log.event_id(index), data))
        await self._write(b"", more=False)


def _event(event_id: str, data: bytes) -> bytes:
    return f"id: {event_id}\nevent: message\n".encode() + b"data: " + data + b"\n\n"


async def _heartbeat(server: Hosted, stream: ResponseStream) -> None:
    """While a streamed call runs, tell other replicas its owner is alive."""
    store = server.store
    if store is None:
        return
    while True:
        if stream.started:
            with contextlib.suppress(StoreUnavailable):
                await store.put_blob(f"sse-{stream.log.stream_id}", "alive", b"1", HEARTBEAT * 3)
        await anyio.sleep(HEARTBEAT)


async def post(
    server: Hosted,
    raw: Any,
    headers: Mapping[str, str],
    session_id: str | None,
    replica: tuple[bytes, bytes],
    receive: Receive,
    send: Send,
) -> None:
    """Serve one legacy POST: ``initialize``, a request, a notification, or a response."""
    session: LegacySession | None = None
    is_request = isinstance(raw, dict) and "method" in raw and "id" in raw
    request_id = raw.get("id") if isinstance(raw, dict) else None
    if session_id is not None:
        try:
            session = await server.sessions.get(session_id)
        except StoreUnavailable as exc:
            error = store_error(exc, server.metrics)
            await send_json(send, status_of(error), error_bytes(request_id, error), replica)
            return
        if session is None:
            error = MCPError(
                INVALID_REQUEST,
                "Session not found: it ended or expired; send "
                "initialize again without MCP-Session-Id",
            )
            await send_json(send, 404, error_bytes(request_id, error), replica)
            return
    if isinstance(raw, dict) and "method" not in raw and ("result" in raw or "error" in raw):
        if session is None:
            error = MCPError(
                INVALID_REQUEST,
                "Bad Request: an answer to a server request needs "
                "the MCP-Session-Id of the session that was asked",
            )
            await send_json(send, 400, error_bytes(None, error), replica)
            return
        await server.backchannel.deliver(raw, session.id)
        await send_json(send, 202, b"", replica)
        return
    if not is_request:
        if isinstance(raw, dict) and raw.get("method") == "notifications/cancelled":
            params = raw.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            await server.bus.publish("cancel", session_id, target)
        await send_json(send, 202, b"", replica)
        return
    stream = ResponseStream(server, send, replica, request_id)
    exchange = legacy.LegacyExchange(
        session, outbox=stream.message, headers=headers, notify=stream.notify
    )
    exchange.extras["close_stream"] = stream.close_connection
    try:
        message = parse(raw)
    except MCPError as exc:
        response = error_response(request_id, exc)
        await stream.finish(response.status, response.body, [])
        return
    status, body = 200, b""
    inflight = state_of(server).inflight
    with anyio.CancelScope() as cancel:
        inflight[(session_id, request_id)] = cancel
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_heartbeat, server, stream)
                tg.start_soon(_detach_on_disconnect, receive, stream)
                try:
                    body = result_bytes(message.id, await legacy.handle(server, message, exchange))
                except Exception as exc:
                    error = error_of(exc, server.metrics)
                    status, body = status_of(error), error_bytes(message.id, error)
                tg.cancel_scope.cancel()
        finally:
            inflight.pop((session_id, request_id), None)
    if cancel.cancelled_caught:  # the client cancelled: no result, but end what was started
        with anyio.CancelScope(shield=True):
            await stream.abandon()
        return
    extra = []
    if exchange.new_session is not None:
        extra.append((b"mcp-session-id", exchange.new_session.id.encode()))
    await stream.finish(status, body, extra)


async def _detach_on_disconnect(receive: Receive, stream: ResponseStream) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.attached = False
            return


async def get(
    server: Hosted,
    headers: Mapping[str, str],
    session: LegacySession,
    replica: tuple[bytes, bytes],
    receive: Receive,
    send: Send,
) -> None:
    """``GET``: resume a response stream (``Last-Event-ID``), or open the session's stream."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                replica,
            ],
        }
    )
    last = headers.get("last-event-id")
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        if last and CALL_EVENT_ID.fullmatch(last):
            await _resume(server, last, send)
        else:
            await _session_stream(server, session, send)
        tg.cancel_scope.cancel()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _write(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _resume(server: Hosted, last_event_id: str, send: Send) -> None:
    stream_id, _, index_text = last_event_id.rpartition(".")
    seen = int(index_text) if index_text.isdigit() else 0
    local = state_of(server).event_logs.get(stream_id)
    await _write(send, f"retry: {RETRY_MS}\n\n".encode())
    if local is not None:
        while True:
            while seen < len(local.events):
                seen += 1
                await _write(send, _event(local.event_id(seen), local.events[seen - 1]))
            if local.done:
                return
            await local.changed.wait()
    await _resume_from_store(server, stream_id, seen, send)


async def _resume_from_store(server: Hosted, stream_id: str, seen: int, send: Send) -> None:
    """Follow a stream another replica owns, through the store, until its result is sent or its
    owner stops answering (then a clear error for the request)."""
    store = server.store
    if store is None:
        return
    key = f"sse-{stream_id}"
    quiet = 0.0
    while True:
        data = await store.get_blob(key, str(seen + 1))
        if data is not None:
            seen += 1
            quiet = 0.0
            await _write(send, _event(f"{stream_id}.{seen}", data))
            end = await store.get_blob(key, "end")
            if end is not None and int(end) <= seen:
                return
            continue
        if await store.get_blob(key, "alive") is None and quiet > HEARTBEAT:
            request = await store.get_blob(key, "request")
            request_id = loads(request) if request else None
            error = MCPError(
                INTERNAL_ERROR,
                "The replica serving this request stopped before it answered; send the "
                "request again",
            )
            await _write(send, _event(f"{stream_id}.{seen + 1}", error_bytes(request_id, error)))
            return
        await anyio.sleep(0.1)
        quiet += 0.1


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
        await _write(send, f"id: session\nretry: {RETRY_MS}\ndata: \n\n".encode())
        async with events:
            while True:
                with anyio.move_on_after(15):
                    await _write(send, b"event: message\ndata: " + await events.receive() + b"\n\n")
                    continue
                await _write(send, b": keep-alive\n\n")
    finally:
        server.remove_listener(on_notification)
        server.remove_session_stream(session.id, on_notification)


async def delete(server: Hosted, session_id: str, replica: tuple[bytes, bytes], send: Send) -> None:
    await server.sessions.delete(session_id)
    await send_json(send, 200, b"", replica)


__all__ = ["delete", "dumps", "get", "post"]
