"""The response streams of 2025-11-25, kept so a client that lost one resumes it on any replica.

A legacy POST's answer becomes an event stream as soon as something precedes its result
(:class:`ResponseStream`). Its events are numbered and kept (:class:`EventLog`): in this process,
and with a store in the store too, with a heartbeat while the call runs. A ``GET`` with a
``Last-Event-ID`` then replays what followed that event and follows the stream to its end
(:func:`resume`), from this process's log or, for a stream another replica owns, from the store.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import weakref
from typing import Any

import anyio

from engine.errors import INTERNAL_ERROR, MCPError
from engine.protocol.jsonrpc import dumps, error_bytes, loads, notification_bytes
from engine.transports._asgi import Header, Receive, Send, send_json, wait_disconnect
from engine.transports._served import Hosted
from engine.transports._sse import numbered_event, priming_event, start_event_stream, write
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

    def __init__(
        self, server: Hosted, stream_id: str, request_id: Any, session_id: str | None = None
    ) -> None:
        self.server = server
        self.stream_id = stream_id
        self.request_id = request_id
        self.session_id = session_id
        """Only this session may resume the stream (and sessions belong to their principal)."""
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
        self,
        server: Hosted,
        send: Send,
        replica: Header,
        request_id: Any,
        session_id: str | None = None,
    ) -> None:
        self.server = server
        self.send = send
        self.replica = replica
        self.log = EventLog(server, secrets.token_hex(12), request_id, session_id)
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
                session = (self.log.session_id or "").encode()
                await store.put_blob(key, "session", session, EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream not registered in the store: %s", exc)
        await start_event_stream(self.send, self.replica)
        await self._write(priming_event(self.log.event_id(0), RETRY_MS))

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
            await self._write(numbered_event(self.log.event_id(index), data))

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

    async def finish(self, status: int, body: bytes | None, headers: list[Header]) -> None:
        """The result: a JSON response (202 when there is none) or the stream's last event."""
        async with self.lock:
            if not self.started:
                status = status if body is not None else 202
                await send_json(self.send, status, body or b"", self.replica, *headers)
                return
            data = body or b""
            index = await self.log.add(data, final=True)
            await self._write(numbered_event(self.log.event_id(index), data))
            await self._write(b"", more=False)

    async def heartbeat(self) -> None:
        """While a streamed call runs, tell other replicas its owner is alive."""
        store = self.server.store
        if store is None:
            return
        while True:
            if self.started:
                with contextlib.suppress(StoreUnavailable):
                    await store.put_blob(f"sse-{self.log.stream_id}", "alive", b"1", HEARTBEAT * 3)
            await anyio.sleep(HEARTBEAT)

    async def detach_on_disconnect(self, receive: Receive) -> None:
        """Stop writing once the client hangs up; the call goes on, to be resumed."""
        await wait_disconnect(receive)
        self.attached = False


async def resume(
    server: Hosted, last_event_id: str, send: Send, session_id: str | None = None
) -> None:
    """What followed ``last_event_id`` on its stream, then the rest as it comes, to its end;
    nothing when the stream is another session's."""
    stream_id, _, index_text = last_event_id.rpartition(".")
    seen = int(index_text) if index_text.isdigit() else 0
    local = state_of(server).event_logs.get(stream_id)
    await write(send, f"retry: {RETRY_MS}\n\n".encode())
    if local is not None and local.session_id != session_id:
        log.warning("stream %s not resumed: it belongs to another session", stream_id)
        return
    if local is not None:
        while True:
            while seen < len(local.events):
                seen += 1
                await write(send, numbered_event(local.event_id(seen), local.events[seen - 1]))
            if local.done:
                return
            await local.changed.wait()
    await _resume_from_store(server, stream_id, seen, send, session_id)


async def _resume_from_store(
    server: Hosted, stream_id: str, seen: int, send: Send, session_id: str | None
) -> None:
    """Follow a stream another replica owns, through the store, until its result is sent or its
    owner stops answering (then a clear error for the request)."""
    store = server.store
    if store is None:
        return
    key = f"sse-{stream_id}"
    owner = await store.get_blob(key, "session")
    if owner is not None and owner != (session_id or "").encode():
        log.warning("stream %s not resumed: it belongs to another session", stream_id)
        return
    quiet = 0.0
    while True:
        data = await store.get_blob(key, str(seen + 1))
        if data is not None:
            seen += 1
            quiet = 0.0
            await write(send, numbered_event(f"{stream_id}.{seen}", data))
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
            await write(
                send, numbered_event(f"{stream_id}.{seen + 1}", error_bytes(request_id, error))
            )
            return
        await anyio.sleep(0.1)
        quiet += 0.1
