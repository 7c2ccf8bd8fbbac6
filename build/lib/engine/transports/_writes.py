"""One socket write per response: what a connection writes in one event-loop turn goes out once.

uvicorn writes a response's status line and headers when the app sends ``http.response.start``
and the body when it sends ``http.response.body``. The event loop sends each write at once, so a
response of a few hundred bytes costs two system calls and two TCP segments, and wakes the peer
(a client, or the proxy in front) twice. Here the protocol writes through
:class:`CoalescingTransport`, which holds what is written during one turn of the loop and hands
it to the socket in one call at the start of the next. What is held is handed on as soon as it
adds up to `LARGE_WRITE`, so the socket's flow control still holds back a writer faster than
its reader, and a single large write is not held at all: it goes out at once, after anything
held before it, so nothing is reordered and nothing large is copied.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable
from typing import Any, TypeVar, cast

LARGE_WRITE = 64 * 1024
"""Held writes are handed on once they add up to this much, so the wrapped transport's flow
control (``pause_writing``) still engages; a single write this long is not held at all."""

_NO_CONTEXT = contextvars.Context()
"""The flush runs in an empty context: no copy of the request's context per response."""

ProtocolT = TypeVar("ProtocolT", bound=asyncio.Protocol)

Data = bytes | bytearray | memoryview


class CoalescingTransport(asyncio.Transport):
    """A stream transport whose writes in one loop turn reach the wrapped one as one call."""

    __slots__ = ("_eof", "_held", "_held_size", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_size = 0
        self._eof = False

    def write(self, data: Data) -> None:
        if self._eof:
            raise RuntimeError("Cannot call write() after write_eof()")
        if type(data) is not bytes:
            data = bytes(data)  # the caller may reuse its buffer once write returns
        size = len(data)
        if not size:
            return
        if size >= LARGE_WRITE:
            self.flush()
            self._transport.write(data)
            return
        held = self._held
        if not held:
            self._loop.call_soon(self.flush, context=_NO_CONTEXT)
        held.append(data)
        self._held_size += size
        if self._held_size >= LARGE_WRITE:
            self.flush()

    def writelines(self, list_of_data: Iterable[Data]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Hand what is held to the wrapped transport, in one write."""
        held = self._held
        if not held:
            return
        self._held = []
        self._held_size = 0
        transport = self._transport
        if transport.is_closing():
            # It closed itself (the connection was lost): it would refuse the data, on uvloop
            # with an error. A peer's EOF flushes first (see `coalescing`), so nothing of a
            # response is left here when the connection is merely half-closed.
            return
        transport.write(held[0] if len(held) == 1 else b"".join(held))  # one TLS record too

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self.flush()  # as unwrapped: what was written before has left already
        self._transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self._eof = True
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._held_size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


_COALESCING: dict[type[asyncio.Protocol], type[asyncio.Protocol]] = {}


def coalescing(protocol: type[ProtocolT]) -> type[ProtocolT]:
    """``protocol``, writing through a :class:`CoalescingTransport` (one class per protocol)."""
    made = _COALESCING.get(protocol)
    if made is not None:
        return cast(type[ProtocolT], made)

    class Coalescing(protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            stream = cast(asyncio.Transport, transport)
            self.coalescing_transport = CoalescingTransport(stream, asyncio.get_running_loop())
            super().connection_made(self.coalescing_transport)

        def eof_received(self) -> bool | None:
            # The transport may close itself once this returns; on uvloop a peer's EOF can be
            # read in the same loop turn as a response was written, before the flush.
            self.coalescing_transport.flush()
            return cast(bool | None, super().eof_received())

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    Coalescing.__module__ = __name__
    Coalescing.__doc__ = f"{protocol.__qualname__} with one socket write per loop turn."
    _COALESCING[protocol] = Coalescing
    return Coalescing
