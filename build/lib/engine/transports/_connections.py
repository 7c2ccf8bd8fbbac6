"""What one HTTP connection may make a replica hold: a bounded head, timed reads, a capped count.

uvicorn reads a request head of any size (httptools keeps it all), waits forever for a head or a
body that never comes, and accepts connections until the process runs out of file descriptors,
after which every new connection fails. Here its protocol classes (httptools and h11) are
wrapped so that:

- a head (request line and headers) over `ConnectionLimits.max_head_bytes` is answered 431 once
  that many bytes have arrived, without reading the rest;
- a head must arrive within ``head_timeout`` (of the connection, or of its first byte on a
  keep-alive connection, whose idle wait is uvicorn's ``timeout_keep_alive``);
- a body must not stall for ``body_timeout``, nor average under ``min_body_rate`` after that;
- at most ``max_connections`` are open: a connection beyond it closes the oldest connection that
  is not serving a request (idle keep-alive, or still sending its head); when every one is, it
  is answered 503.

A refused connection (431, 503) is not closed at once: it is half-closed and what the client
still sends is read and dropped for `LINGER` seconds, so the client reads the answer rather than
a reset. One `ConnectionGuard` per served process holds the connections' phases in arrival
order; uvicorn's server calls `ConnectionGuard.sweep` from its own tick, so no timer or task is
made per connection or per request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar, cast

from engine.settings import ConnectionLimits

log = logging.getLogger("engine.http")

LINGER = 2.0
"""Seconds a refused connection is read and dropped before it is closed."""

HEAD, BODY, SERVING = 0, 1, 2
"""A connection's phase: no request yet (idle or its head arriving), its body arriving, its
request being answered."""

ProtocolT = TypeVar("ProtocolT", bound=asyncio.Protocol)


def _answer(status: bytes, text: str, *headers: bytes) -> bytes:
    body = text.encode()
    lines = [
        b"HTTP/1.1 " + status,
        b"content-type: text/plain; charset=utf-8",
        b"content-length: %d" % len(body),
        b"connection: close",
        *headers,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class ConnectionGuard:
    """The open connections of one served process, by phase, and the limits they are held to."""

    def __init__(self, limits: ConnectionLimits, max_connections: int) -> None:
        self.limits = limits
        self.max_connections = max_connections
        self.max_lingering = max(16, max_connections // 8)
        """Refused connections read and dropped at once; past this, one beyond is reset."""
        self.open = 0
        self.heads: dict[Any, None] = {}
        """Connections serving no request, in the order they became so (oldest first)."""
        self.bodies: dict[Any, None] = {}
        self.lingering: dict[asyncio.Transport, float] = {}
        """Refused connections, each with the time it is closed at the latest."""
        self.closed: dict[str, int] = {}
        """Connections closed or refused since the last sweep, by why: logged once a sweep,
        so a flood of them is one line a second rather than one per connection."""
        self.too_large = _answer(
            b"431 Request Header Fields Too Large",
            f"The request line and headers may take {limits.max_head_bytes} bytes at most; "
            "send fewer or shorter headers.\n",
        )
        self.unavailable = _answer(
            b"503 Service Unavailable",
            f"This replica serves {max_connections} connections at most and all are busy; "
            "retry shortly.\n",
            b"retry-after: 1",
        )

    def admit(self) -> bool:
        """Room for one more connection, made by closing the oldest one serving no request
        when at the cap; ``False`` when every open connection is serving one."""
        if self.open >= self.max_connections:
            oldest = next(iter(self.heads), None)
            if oldest is None:
                return False
            oldest.drop("shed (idle, or still sending its head) to make room for a new one")
        self.open += 1
        return True

    def linger(self, transport: asyncio.Transport, answer: bytes, now: float) -> None:
        """Send ``answer``, then read and drop what still comes until the client closes or
        `LINGER` passes; a reset at once when too many are lingering already."""
        if len(self.lingering) >= self.max_lingering:
            transport.abort()
            return
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
        self.lingering[transport] = now + LINGER

    def count(self, why: str) -> None:
        self.closed[why] = self.closed.get(why, 0) + 1

    def sweep(self, now: float) -> None:
        """Close the connections past a deadline: heads and bodies too slow, refusals done."""
        if self.closed:
            log.warning(
                "Connections closed by their limits (docs/security.md): %s",
                "; ".join(f"{n} {why}" for why, n in self.closed.items()),
            )
            self.closed = {}
        limits = self.limits
        head_deadline = now - limits.head_timeout
        late_heads = [
            conn
            for conn in self.heads
            if conn.guard_since is not None and conn.guard_since < head_deadline
        ]
        for conn in late_heads:
            conn.drop("whose head took over head_timeout", answer_timeout=True)
        late_bodies = []
        for conn in self.bodies:
            if conn.flow is not None and conn.flow.read_paused:  # the app is not reading
                conn.guard_body_last = now
                continue
            elapsed = now - conn.guard_body_since
            if now - conn.guard_body_last > limits.body_timeout or (
                elapsed > limits.body_timeout
                and conn.guard_body_bytes < limits.min_body_rate * elapsed
            ):
                late_bodies.append(conn)
        for conn in late_bodies:
            conn.drop("whose body stalled (body_timeout) or came under min_body_rate")
        done = [transport for transport, until in self.lingering.items() if until <= now]
        for transport in done:
            del self.lingering[transport]
            transport.abort()

    def interval(self) -> float:
        """How often to sweep: a fraction of the shortest timeout, between 0.1 and 1 second."""
        shortest = min(self.limits.head_timeout, self.limits.body_timeout, LINGER)
        return min(1.0, max(0.1, shortest / 4))


_GUARDED: dict[tuple[type[asyncio.Protocol], int], type[asyncio.Protocol]] = {}


def guarded(protocol: type[ProtocolT], guard: ConnectionGuard) -> type[ProtocolT]:
    """``protocol`` (uvicorn's httptools or h11 protocol, or a subclass) held to ``guard``."""
    made = _GUARDED.get((protocol, id(guard)))
    if made is not None:
        return cast(type[ProtocolT], made)
    h11_style = hasattr(protocol, "handle_events")
    if h11_style:
        import h11

        send_body = h11.SEND_BODY

    class Guarded(protocol):  # type: ignore[valid-type,misc]
        guard_phase = -1
        guard_since: float | None = None
        guard_head_bytes = 0
        guard_in_body = False
        guard_body_since = 0.0
        guard_body_last = 0.0
        guard_body_bytes = 0
        guard_admitted = False
        guard_refused = False
        guard_refused_transport: asyncio.Transport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            stream = cast(asyncio.Transport, transport)
            now = asyncio.get_running_loop().time()
            if not guard.admit():
                self.guard_refused = True
                guard.count(
                    f"refused with 503, all {guard.open} serving a request (max_connections)"
                )
                self.guard_refused_transport = stream
                guard.linger(stream, guard.unavailable, now)
                return
            self.guard_admitted = True
            super().connection_made(transport)
            self.guard_since = now
            self._guard_note()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.guard_refused_transport is not None:  # never handed to uvicorn
                guard.lingering.pop(self.guard_refused_transport, None)
                return
            guard.lingering.pop(self.transport, None)
            self._guard_leave()
            if self.guard_admitted:
                self.guard_admitted = False
                guard.open -= 1
            super().connection_lost(exc)

        def eof_received(self) -> bool | None:
            if self.guard_refused:
                return None  # the client read the refusal and closed: close too
            return cast(bool | None, super().eof_received())

        def data_received(self, data: bytes) -> None:
            if self.guard_refused:
                return  # lingering: dropped
            if self.guard_phase == BODY:
                self.guard_body_bytes += len(data)
                self.guard_body_last = self.loop.time()
                super().data_received(data)  # a head after the body in it: one read at most
                self._guard_note()
                return
            cap = guard.limits.max_head_bytes
            while data:
                if self.guard_since is None and self.guard_phase == HEAD:
                    self.guard_since = self.loop.time()  # the first byte of a later head
                room = cap - self.guard_head_bytes
                if room <= 0:
                    self._guard_refuse_head()
                    return
                piece = data if len(data) <= room else data[:room]
                data = data[len(piece) :]
                self.guard_head_bytes += len(piece)
                cycle = self.cycle
                super().data_received(piece)
                if self.transport.is_closing():
                    return
                if self.cycle is not cycle:  # a head was complete
                    self.guard_head_bytes = 0
                self._guard_note()
                if self.guard_phase == BODY and data:
                    self.guard_body_bytes += len(data)
                    super().data_received(data)
                    self._guard_note()
                    return
            if self.guard_head_bytes >= cap and not self.transport.is_closing():
                self._guard_refuse_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._guard_note()

        if not h11_style:

            def on_headers_complete(self) -> None:
                self.guard_in_body = True
                super().on_headers_complete()

            def on_message_complete(self) -> None:
                self.guard_in_body = False
                super().on_message_complete()

        def _guard_reading_body(self) -> bool:
            if h11_style:
                return bool(self.conn.their_state is send_body)
            return self.guard_in_body

        def _guard_note(self) -> None:
            """Move this connection to the phase its parser and its request are in."""
            if self._guard_reading_body():
                phase = BODY
            elif self.cycle is None or self.cycle.response_complete:
                phase = HEAD
            else:
                phase = SERVING
            if phase == self.guard_phase or not self.guard_admitted:
                return
            self._guard_leave()
            self.guard_phase = phase
            if phase == HEAD:
                if self.cycle is not None:  # a later head: timed from its first byte
                    self.guard_since = None if not self.guard_head_bytes else self.loop.time()
                guard.heads[self] = None
            elif phase == BODY:
                self.guard_body_since = self.guard_body_last = self.loop.time()
                self.guard_body_bytes = 0
                guard.bodies[self] = None

        def _guard_leave(self) -> None:
            if self.guard_phase == HEAD:
                guard.heads.pop(self, None)
            elif self.guard_phase == BODY:
                guard.bodies.pop(self, None)
            self.guard_phase = -1

        def _guard_refuse_head(self) -> None:
            guard.count("answered 431, their head over max_head_bytes")
            self._guard_leave()
            self.guard_refused = True
            guard.linger(self.transport, guard.too_large, self.loop.time())

        def drop(self, why: str, *, answer_timeout: bool = False) -> None:
            """Close this connection, which is not serving a request, or is too slow."""
            guard.count(why)
            self._guard_leave()
            if self.guard_admitted:
                self.guard_admitted = False
                guard.open -= 1
            if answer_timeout and self.guard_head_bytes:
                self.guard_refused = True
                text = (
                    f"The request line and headers must arrive within "
                    f"{guard.limits.head_timeout:g} s of the connection (or of their first "
                    "byte on a kept-alive one); send them at once.\n"
                )
                self.transport.write(_answer(b"408 Request Timeout", text))
            self.transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{protocol.__name__}"
    Guarded.__module__ = __name__
    Guarded.__doc__ = f"{protocol.__qualname__} held to a connection guard's limits."
    _GUARDED[(protocol, id(guard))] = Guarded
    return Guarded
