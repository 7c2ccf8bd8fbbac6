"""What the transports reach of a server beyond the protocol layer's :class:`Served`: its
lifecycle, health, store and fleet messaging (``MCPServer`` provides it)."""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from engine.fleet.bus import Bus
from engine.fleet.notifications import Listener
from engine.handlers.tool import Tool
from engine.protocol.served import Served
from engine.state.seal import KeyRing
from stores.base import Store


class Hosted(Served, Protocol):
    @property
    def keys(self) -> KeyRing: ...

    @property
    def store(self) -> Store | None: ...

    @property
    def bus(self) -> Bus: ...

    @property
    def tools(self) -> dict[str, Tool]: ...

    def running(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

    async def health(self) -> tuple[bool, dict[str, Any]]: ...

    def add_session_stream(self, session_id: str, listener: Listener) -> None: ...

    def remove_session_stream(self, session_id: str, listener: Listener) -> None: ...


__all__ = ["Hosted"]
