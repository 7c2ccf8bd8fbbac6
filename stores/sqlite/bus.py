"""The bus of `SQLiteStore` (`BusStore`): in this process only, as the memory store's is (other
processes on the same file do not hear it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import anyio.lowlevel

from .._bus import LocalBus
from .core import SQLiteCore


class SQLiteBus(SQLiteCore):
    """`BusStore` of `SQLiteStore`."""

    def _open_bus(self, buffer: int) -> None:
        """Called by `SQLiteStore.__init__`."""
        self._bus = LocalBus(buffer)

    async def publish(self, topic: str, message: bytes) -> None:
        if self._conn is None:
            raise RuntimeError("this SQLiteStore is closed; open a new store")
        self._bus.publish(topic, bytes(message))
        await anyio.lowlevel.checkpoint()

    def subscribe(self, topic: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self._bus.subscribe(topic)

    async def aclose(self) -> None:
        """Subscriptions end first, then the file is closed."""
        self._bus.close()
        await super().aclose()
