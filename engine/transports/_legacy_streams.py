"""The response streams of 2025-11-25, kept so a client that lost one resumes it on any replica.

A legacy POST's answer becomes an event stream as soon as something precedes its result
(:class:`ResponseStream`). Its events are numbered and kept (:class:`EventLog`): in this process,
and with a store in the store too, with a heartbeat of the replica while any of its streamed calls
runs. A ``GET`` with a ``Last-Event-ID`` then replays what followed that event and follows the
stream to its end (:func:`resume`), from this process's log or, for a stream another replica
owns, from the store. A stream belongs to the session that made the request (and so to its
principal): :func:`find_stream` finds it for that session only. What the store keeps of a stream
(its events hold results, its owner record says whose it is) is sealed with the key ring, each
record bound to its place, so the store can neither read them nor move one to another stream.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import secrets
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio

from engine.errors import INTERNAL_ERROR, InvalidRequestState, MCPError
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
STREAM_NOT_FOUND = (
    "Stream not found: Last-Event-ID names no stream of this session; resume only your own "
    "session's streams, or send the request again"
)


STREAM_RECORD = b"engine/stream-record/v1\0"


def _seal(server: Hosted, stream_id: str, field: str, data: bytes) -> bytes:
    return server.keys.seal_record(data, STREAM_RECORD + f"{stream_id}/{field}".encode())


def _open(server: Hosted, stream_id: str, field: str, raw: bytes) -> bytes:
    """A stored stream record, opened; :class:`InvalidRequestState` when it was sealed by
    another key ring, altered, or moved from another stream or position."""
    return server.keys.open_record(raw, STREAM_RECORD + f"{stream_id}/{field}".encode())


def stream_owner(session_id: str | None) -> str:
    """What a stream keeps of the session it belongs to: a digest, so the store holds no
    session id beside its events (``""``: no session, a stream nobody can resume)."""
    if session_id is None:
        return ""
    return hashlib.sha256(b"engine/stream-owner\0" + session_id.encode()).hexdigest()[:32]


def _alive_key(instance: str) -> str:
    return f"replica-{instance}"


class LegacyState:
    """Per-server transport state: streams kept for resumption, requests that can be cancelled,
    the ``GET`` streams of each session, and when this replica last told the store it is
    alive."""

    def __init__(self, server: Hosted) -> None:
        self.event_logs: dict[str, EventLog] = {}
        self.inflight: dict[tuple[str | None, Any], anyio.CancelScope] = {}
        self.ended: set[tuple[str | None, Any]] = set()
        """Requests in ``inflight`` cancelled because their session was deleted."""
        self.session_streams: dict[str, set[anyio.CancelScope]] = {}
        self.next_beat = 0.0
        server.bus.on("cancel", self._cancel_here)
        server.bus.on("session-ended", self._end_session_here)

    @contextlib.contextmanager
    def session_stream(self, session_id: str, scope: anyio.CancelScope) -> Iterator[None]:
        """A ``GET`` stream of the session, ended (``scope`` cancelled) when it is deleted."""
        self.session_streams.setdefault(session_id, set()).add(scope)
        try:
            yield
        finally:
            scopes = self.session_streams.get(session_id)
            if scopes is not None:
                scopes.discard(scope)
                if not scopes:
                    del self.session_streams[session_id]

    async def beat(self, server: Hosted) -> None:
        """Tell other replicas this one is alive, at most once per ``HEARTBEAT`` however many
        streamed calls it runs: one write per replica, not one per call."""
        store = server.store
        now = time.monotonic()
        if store is None or now < self.next_beat:
            return
        self.next_beat = now + HEARTBEAT
        with contextlib.suppress(StoreUnavailable):
            await store.put_blob(
                _alive_key(server.backchannel.instance), "alive", b"1", HEARTBEAT * 3
            )

    async def _cancel_here(self, session_id: str | None, request_id: Any) -> None:
        scope = self.inflight.get((session_id, request_id))
        if scope is not None:
            scope.cancel()

    async def _end_session_here(self, session_id: str) -> None:
        """A ``DELETE`` of the session, on any replica: its requests here end (a call waiting
        for an answer the client can no longer send included), and so do its streams."""
        for key, scope in list(self.inflight.items()):
            if key[0] == session_id:
                self.ended.add(key)
                scope.cancel()
        for scope in self.session_streams.pop(session_id, ()):
            scope.cancel()


_STATES: weakref.WeakKeyDictionary[Hosted, LegacyState] = weakref.WeakKeyDictionary()


def state_of(server: Hosted) -> LegacyState:
    state = _STATES.get(server)
    if state is None:
        state = _STATES[server] = LegacyState(server)
    return state


class EventLog:
    """The events of one response stream, kept for resumption."""

    def __init__(self, server: Hosted, stream_id: str, request_id: Any, owner: str) -> None:
        self.server = server
        self.stream_id = stream_id
        self.request_id = request_id
        self.owner = owner
        """``stream_owner`` of the session whose request this stream answers."""
        self.events: list[bytes] = []
        self.done = False
        self._changed: anyio.Event | None = None
        """Set when an event is added or the stream ends; made only once a resumer waits, as
        most streams are never resumed."""

    def event_id(self, index: int) -> str:
        return f"{self.stream_id}.{index}"

    async def add(self, data: bytes, *, final: bool = False) -> int:
        self.events.append(data)
        index = len(self.events)
        self.done = self.done or final
        self._wake()
        store = self.server.store
        if store is not None:
            try:
                key = f"sse-{self.stream_id}"
                sealed = _seal(self.server, self.stream_id, str(index), data)
                await store.put_blob(key, str(index), sealed, EVENT_TTL)
                if final:
                    await store.put_blob(key, "end", str(index).encode(), EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream event not kept in the store: %s", exc)
        return index

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def changed(self) -> None:
        """Wait for the next event, or the end."""
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    async def end(self) -> None:
        """No more events (the request was cancelled): resumers here and elsewhere stop."""
        self.done = True
        self._wake()
        store = self.server.store
        if store is not None:
            try:
                key = f"sse-{self.stream_id}"
                await store.put_blob(key, "end", str(len(self.events)).encode(), EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream end not kept in the store: %s", exc)


class ResponseStream:
    """The answer to one legacy POST: plain JSON, or an event stream once something precedes
    the result."""

    def __init__(
        self, server: Hosted, send: Send, replica: Header, request_id: Any, session_id: str | None
    ) -> None:
        self.server = server
        self.send = send
        self.replica = replica
        self.log = EventLog(server, secrets.token_hex(12), request_id, stream_owner(session_id))
        self.started = False
        self.attached = True
        self.lock = anyio.Lock()
        """Writers take turns: two questions asked at once must not interleave their events,
        nor race the response's headers."""

    async def _start(self) -> None:
        self.started = True
        state = state_of(self.server)
        logs = state.event_logs
        if len(logs) >= 1000:  # resumption from the store still works for older streams
            for stream_id in [k for k, v in logs.items() if v.done][:500]:
                del logs[stream_id]
        logs[self.log.stream_id] = self.log
        store = self.server.store
        if store is not None:
            try:  # whose it is, and who serves it, so another replica can follow it
                key = f"sse-{self.log.stream_id}"
                owner = [self.log.owner, self.server.backchannel.instance, self.log.request_id]
                sealed = _seal(self.server, self.log.stream_id, "owner", dumps(owner))
                await store.put_blob(key, "owner", sealed, EVENT_TTL)
            except StoreUnavailable as exc:
                log.warning("stream not registered in the store: %s", exc)
            await state.beat(self.server)
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
            await self.log.end()
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
        if self.server.store is None:
            return
        state = state_of(self.server)
        while True:
            if self.started:
                await state.beat(self.server)
            await anyio.sleep(HEARTBEAT)

    async def detach_on_disconnect(self, receive: Receive) -> None:
        """Stop writing once the client hangs up; the call goes on, to be resumed."""
        await wait_disconnect(receive)
        self.attached = False


@dataclass(frozen=True, slots=True)
class StoredStream:
    """A stream another replica owns, as the store describes it."""

    stream_id: str
    instance: str
    """The back-channel instance of the replica serving it, whose heartbeat says it lives."""
    request_id: Any


async def find_stream(
    server: Hosted, stream_id: str, session_id: str
) -> EventLog | StoredStream | None:
    """The stream ``stream_id`` if it belongs to ``session_id``: this process's log of it, or
    what the store keeps of it; ``None`` for a stream unknown, or another session's."""
    owner = stream_owner(session_id)
    local = state_of(server).event_logs.get(stream_id)
    if local is not None:
        return local if secrets.compare_digest(local.owner, owner) else None
    store = server.store
    if store is None:
        return None
    record = await store.get_blob(f"sse-{stream_id}", "owner")
    if record is None:
        return None
    try:
        kept_owner, instance, request_id = loads(_open(server, stream_id, "owner", record))
    except InvalidRequestState as exc:
        log.warning("stream %s: its owner record does not open (%s)", stream_id, exc.reason)
        return None
    except (MCPError, ValueError, TypeError):
        return None
    if not isinstance(kept_owner, str) or not secrets.compare_digest(kept_owner, owner):
        return None
    return StoredStream(stream_id, str(instance), request_id)


async def resume(stream: EventLog | StoredStream, seen: int, server: Hosted, send: Send) -> None:
    """What followed event ``seen`` on ``stream``, then the rest as it comes, to its end."""
    await write(send, f"retry: {RETRY_MS}\n\n".encode())
    if isinstance(stream, StoredStream):
        await _resume_from_store(server, stream, seen, send)
        return
    while True:
        while seen < len(stream.events):
            seen += 1
            await write(send, numbered_event(stream.event_id(seen), stream.events[seen - 1]))
        if stream.done:
            return
        await stream.changed()


OWNER_STOPPED = (
    "The replica serving this request stopped before it answered; send the request again"
)
EVENT_UNREADABLE = (
    "A kept event of this stream does not open: the replicas do not share their keys, or the "
    "store was altered; send the request again"
)


async def _resume_from_store(server: Hosted, stream: StoredStream, seen: int, send: Send) -> None:
    """Follow a stream another replica owns, through the store, until its result is sent or its
    owner stops answering (then a clear error for the request)."""
    store = server.store
    assert store is not None
    stream_id = stream.stream_id
    key = f"sse-{stream_id}"

    async def fail(message: str) -> None:
        error = error_bytes(stream.request_id, MCPError(INTERNAL_ERROR, message))
        await write(send, numbered_event(f"{stream_id}.{seen + 1}", error))

    quiet = 0.0
    while True:
        data = await store.get_blob(key, str(seen + 1))
        if data is not None:
            try:
                data = _open(server, stream_id, str(seen + 1), data)
            except InvalidRequestState as exc:
                log.warning(
                    "stream %s: event %d does not open (%s)", stream_id, seen + 1, exc.reason
                )
                await fail(EVENT_UNREADABLE)
                return
            seen += 1
            quiet = 0.0
            await write(send, numbered_event(f"{stream_id}.{seen}", data))
        end = await store.get_blob(key, "end")
        if end is not None and int(end) <= seen:
            return
        if data is not None:
            continue
        alive = await store.get_blob(_alive_key(stream.instance), "alive")
        if alive is None and quiet > HEARTBEAT:
            await fail(OWNER_STOPPED)
            return
        await anyio.sleep(0.1)
        quiet += 0.1
