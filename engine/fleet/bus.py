"""Messages between the replicas of one service, through the store's publish/subscribe.

Three kinds travel: list-changed and resource-updated notifications (for every listen stream),
messages for one 2025-11-25 session (for its standalone stream, wherever it is), and responses
to server→client requests (for the process whose call waits for them). Without a store, or
while the bus is down, messages are delivered in this process only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgpack

from stores import BusStore, StoreUnavailable

log = logging.getLogger("engine.bus")

Handler = Callable[..., Awaitable[None]]


class Bus:
    def __init__(self, store: BusStore | None, topic: str) -> None:
        self.store = store
        self.topic = topic
        self.handlers: dict[str, Handler] = {}
        self.relaying = False

    def on(self, kind: str, handler: Handler) -> None:
        self.handlers[kind] = handler

    async def publish(self, kind: str, *args: Any) -> None:
        """Deliver to every replica (this one included)."""
        if self.store is not None:
            try:
                await self.store.publish(self.topic, msgpack.packb([kind, *args]))
            except StoreUnavailable as exc:
                log.warning("%s message not published to other replicas: %s", kind, exc)
            else:
                if self.relaying:
                    return  # the relay delivers it here too
        await self._dispatch(kind, list(args))

    async def _dispatch(self, kind: str, args: list[Any]) -> None:
        handler = self.handlers.get(kind)
        if handler is None:
            return
        try:
            await handler(*args)
        except Exception:
            log.exception("a %s bus message could not be handled", kind)

    async def relay(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Deliver what other replicas publish, resubscribing after an outage."""
        assert self.store is not None
        started = False
        while True:
            try:
                async with self.store.subscribe(self.topic) as messages:
                    self.relaying = True
                    if not started:
                        started = True
                        task_status.started()
                    async for message in messages:
                        try:
                            kind, *args = msgpack.unpackb(message, raw=False)
                        except (ValueError, TypeError, msgpack.UnpackException):
                            log.warning("ignored a malformed bus message")
                            continue
                        await self._dispatch(kind, args)
            except StoreUnavailable as exc:
                log.warning("bus unavailable, resubscribing: %s", exc)
            finally:
                self.relaying = False
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(1)
