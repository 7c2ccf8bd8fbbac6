"""Notifications for listeners on every replica: listen streams and 2025-11-25 session streams.

List changes and resource updates go to every listener (each filters what its client asked
for); a session's messages go to that session's stream only. Both travel over the bus, so the
replica that raises them need not be the one holding the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from engine.fleet.bus import Bus

log = logging.getLogger("engine.notifications")

Listener = Callable[[str, dict[str, Any]], Awaitable[None]]


class Notifications:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.listeners: set[Listener] = set()
        self.session_streams: dict[str, set[Listener]] = {}
        bus.on("notify", self._deliver)
        bus.on("session", self._deliver_session)

    async def broadcast(self, method: str, params: dict[str, Any]) -> None:
        await self.bus.publish("notify", method, params)

    async def to_session(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        await self.bus.publish("session", session_id, method, params)

    def add_session_stream(self, session_id: str, listener: Listener) -> None:
        self.session_streams.setdefault(session_id, set()).add(listener)

    def remove_session_stream(self, session_id: str, listener: Listener) -> None:
        streams = self.session_streams.get(session_id)
        if streams is not None:
            streams.discard(listener)
            if not streams:
                del self.session_streams[session_id]

    async def _deliver(self, method: str, params: dict[str, Any]) -> None:
        await _each(self.listeners, method, params)

    async def _deliver_session(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        await _each(self.session_streams.get(session_id, set()), method, params)


async def _each(listeners: set[Listener], method: str, params: dict[str, Any]) -> None:
    for listener in list(listeners):
        try:
            await listener(method, params)
        except Exception:
            log.exception("a notification listener failed")
