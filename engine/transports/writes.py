"""One socket write per response: what a connection writes in one event-loop turn goes out once.

uvicorn writes a response's status line and headers when the app sends ``http.response.start``
and the body when it sends ``http.response.body``. The event loop sends each write at once, so a
response of a few hundred bytes costs two system calls and two TCP segments, and wakes the peer
(a client, or the proxy in front) twice. Here the protocol writes through
:class:`CoalescingTransport`, which holds what is written during one turn of the loop and hands
it to the socket in one call at the start of the next. A large write is not held: it goes out
at once, after anything held before it, so nothing is reordered and nothing large is copied.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast

LARGE = 64 * 1024
"""A write at least this long is sent at once (with what is held before it), not held."""

ProtocolT = TypeVar("ProtocolT", bound=asyncio.Protocol)


class CoalescingTransport(asyncio.Transport):
    """A stream transport whose writes in one loop turn reach the wrapped one as one call."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if len(data) >= LARGE:
            self.flush()
            self._transport.write(data)
            return
        held = self._held
        if not held:
            self._loop.call_soon(self.flush)
        held.append(data if type(data) is bytes else bytes(data))  # the caller may reuse a buffer

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Hand what is held to the wrapped transport (in order, in one call)."""
        held = self._held
        if not held:
            return
        self._held = []
        transport = self._transport
        if transport.is_closing():
            return  # as the wrapped transport would: a closing or lost connection sends nothing
        if len(held) == 1:
            transport.write(held[0])
        else:
            transport.writelines(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def write_eof(self) -> None:
        self.flush()
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
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._held)

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
            super().connection_made(CoalescingTransport(stream, asyncio.get_running_loop()))

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    Coalescing.__module__ = __name__
    Coalescing.__doc__ = f"{protocol.__qualname__} with one socket write per loop turn."
    _COALESCING[protocol] = Coalescing
    return Coalescing
