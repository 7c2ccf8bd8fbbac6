"""In-process publish/subscribe, used as the bus of the memory and SQLite stores.

Publishing never waits for subscribers: each subscription has a bounded buffer and, when a slow
subscriber lets it fill up, the oldest buffered message is dropped to make room for the new one.
Bus messages are notifications (something changed, go and look), so losing an old one to a
subscriber that is behind anyway is better than stalling every publisher.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._listeners import listening

log = logging.getLogger(__name__)

DEFAULT_BUFFER = 256
"""Messages a subscriber may fall behind by before the oldest are dropped."""


@dataclass(eq=False)
class _Subscriber:
    send: MemoryObjectSendStream[bytes]
    receive: MemoryObjectReceiveStream[bytes]
    dropped: int = field(default=0)


class LocalBus:
    """Topic-based fan-out to subscribers in this process (one event loop)."""

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        if buffer < 1:
            raise ValueError(f"bus buffer must hold at least one message, got {buffer}")
        self._buffer = buffer
        self._topics: dict[str, set[_Subscriber]] = {}
        self._closed = False

    def publish(self, topic: str, message: bytes) -> None:
        """Deliver to every current subscriber of `topic` without ever blocking."""
        for sub in tuple(self._topics.get(topic, ())):
            try:
                sub.send.send_nowait(message)
            except anyio.WouldBlock:
                sub.receive.receive_nowait()  # full buffer: make room by dropping the oldest
                sub.send.send_nowait(message)
                sub.dropped += 1
                if sub.dropped == 1 or sub.dropped % 1000 == 0:
                    log.warning(
                        "bus subscriber to %r is too slow: %d message(s) dropped",
                        topic,
                        sub.dropped,
                    )

    @asynccontextmanager
    async def subscribe(self, topic: str) -> AsyncIterator[AsyncIterator[bytes]]:
        """Messages published on `topic` from now until the context exits or the bus closes."""
        if self._closed:
            raise RuntimeError("this store is closed; open a new one to subscribe")
        send, receive = anyio.create_memory_object_stream[bytes](self._buffer)
        try:
            with listening(self._topics, topic, _Subscriber(send, receive)):
                yield receive
        finally:
            send.close()
            receive.close()

    def close(self) -> None:
        """End every subscription: iterating subscribers finish after their buffered messages."""
        self._closed = True
        for subs in self._topics.values():
            for sub in subs:
                sub.send.close()
        self._topics.clear()
