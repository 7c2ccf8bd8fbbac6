"""The 2026-07-28 answer that is an event stream: a call that notifies before its response.

A request that asks for progress or log messages may send notifications before its response;
what comes first decides the answer (an event stream, or plain JSON with its own status). In
this era a hang-up ends the request: it stops when the client closes the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from engine.protocol.dispatch import ScopeRefused
from engine.protocol.entry import Serve
from engine.protocol.jsonrpc import notification_bytes
from engine.transports._asgi import (
    Header,
    Receive,
    Send,
    cancel_on_disconnect,
    send_json,
    send_plain,
)
from engine.transports._sse import (
    end_event_stream,
    message_event,
    start_event_stream,
    write,
)

Refuse = Callable[[ScopeRefused], Awaitable[None]]
"""The transport's answer to a token without the scopes of the call a request continues (its
403 ``insufficient_scope``), while nothing was streamed yet."""


async def stream_call(
    serve: Serve, replica: Header, receive: Receive, send: Send, refuse: Refuse | None = None
) -> None:
    """A request that may stream notifications before its response.

    The response status is decided by the first thing to send: a notification starts a
    ``text/event-stream`` (200); a response that comes first (an error, say) is sent as
    plain JSON with its own status, or by ``refuse`` for a token without the scopes needed.
    """
    sender, events = anyio.create_memory_object_stream[tuple[int | None, bytes]](64)
    refused: ScopeRefused | None = None
    streaming = False
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            nonlocal refused
            async with sender:
                response = await serve(_Notifications(sender))
                if isinstance(response, ScopeRefused):
                    refused = response
                await sender.send((response.status, response.body or b""))

        tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
        tg.start_soon(run)
        async with events:
            async for status, data in events:
                if status is None:
                    if not streaming:
                        streaming = True
                        await start_event_stream(send, replica)
                    await write(send, message_event(data))
                    continue
                if streaming:
                    await write(send, message_event(data))
                elif refused is not None and refuse is not None:
                    await refuse(refused)
                elif data:
                    await send_json(send, status, data, replica)
                else:
                    await send_plain(send, status, b"", replica)
                break
        tg.cancel_scope.cancel()
    if streaming:
        await end_event_stream(send)


class _Notifications:
    """What precedes a streamed 2026-07-28 answer: its notifications, in order."""

    __slots__ = ("sender",)

    def __init__(self, sender: MemoryObjectSendStream[tuple[int | None, bytes]]) -> None:
        self.sender = sender

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.sender.send((None, notification_bytes(method, params)))

    async def message(self, data: bytes) -> None:
        await self.sender.send((None, data))

    async def close_connection(self) -> None:
        """Nothing to close early in this era: the answer ends the stream."""
