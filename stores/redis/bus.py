"""The bus on Redis (`BusStore`): Redis publish/subscribe on ``{prefix}:bus:<topic>``, so every
replica on the same Redis and prefix hears it. A subscription holds a connection of the pool for
as long as it is open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from . import lua
from .client import Messages
from .core import RedisCore


class RedisBus(RedisCore):
    """`BusStore` of `RedisStore`."""

    def _open_bus(self) -> None:
        """Called by `RedisStore.__init__`."""
        self._publish = self._client.register_script(lua.PUBLISH)
        self._subscriptions: set[Messages] = set()

    async def publish(self, topic: str, message: bytes) -> None:
        channel = f"{self.prefix}:bus:{topic}"
        if self._mux is not None:  # a script, so it shares the connection of the others
            await self._script(
                self._publish, [], [channel, bytes(message)], "publish on {!r}", topic
            )
            return
        await self._call(
            f"publish on {topic!r}", lambda: self._client.publish(channel, bytes(message))
        )

    def subscribe(self, topic: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self._subscription(f"{self.prefix}:bus:{topic}", f"subscribe to {topic!r}")

    @asynccontextmanager
    async def _subscription(self, channel: str, what: str) -> AsyncIterator[Messages]:
        pubsub = self._client.pubsub()

        async def subscribed() -> None:
            await pubsub.subscribe(channel)
            while True:  # wait for the server's confirmation: from here on nothing is missed
                reply = await pubsub.get_message(timeout=self._op_timeout)
                if reply is not None and reply.get("type") == "subscribe":
                    return

        messages = Messages(pubsub, channel, retry_cap=max(self._op_timeout, 1.0))
        try:
            await self._call(what, subscribed)
            self._subscriptions.add(messages)
            yield messages
        finally:
            self._subscriptions.discard(messages)
            messages.end()
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._op_timeout):
                await pubsub.aclose()

    async def aclose(self) -> None:
        """Open subscriptions end, then the client is closed."""
        for messages in tuple(self._subscriptions):
            messages.end()
        await super().aclose()
