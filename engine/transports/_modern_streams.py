"""The 2026-07-28 answers that are event streams: a call that notifies before its response,
and ``subscriptions/listen``.

A request that asks for progress or log messages may send notifications before its response;
what comes first decides the answer (an event stream, or plain JSON with its own status). A
listen request is acknowledged, then hears matching notifications until it is closed. In this
era a hang-up ends the request: both stop when the client closes the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from engine.protocol.dispatch import ScopeRefused, dispatch, error_response
from engine.protocol.errors import error_of
from engine.protocol.jsonrpc import notification_bytes, result_bytes
from engine.protocol.modern import Exchange
from engine.transports._asgi import (
    Header,
    Receive,
    Send,
    cancel_on_disconnect,
    send_json,
    send_plain,
)
from engine.transports._served import Hosted
from engine.transports._sse import (
    end_event_stream,
    message_event,
    relay,
    start_event_stream,
    write,
)

Refuse = Callable[[ScopeRefused], Awaitable[None]]
"""The transport's answer to a token without the scopes of the call a request continues (its
403 ``insufficient_scope``), while nothing was streamed yet."""


async def stream_call(
    server: Hosted,
    raw: Any,
    exchange: Exchange,
    replica: Header,
    receive: Receive,
    send: Send,
    refuse: Refuse | None = None,
) -> None:
    """A request that may stream notifications before its response.

    The response status is decided by the first thing to send: a notification starts a
    ``text/event-stream`` (200); a response that comes first (an error, say) is sent as
    plain JSON with its own status, or by ``refuse`` for a token without the scopes needed.
    """
    sender, events = anyio.create_memory_object_stream[tuple[int | None, bytes]](64)
    refused: ScopeRefused | None = None

    async def notify(method: str, params: dict[str, Any]) -> None:
        await sender.send((None, notification_bytes(method, params)))

    exchange.notify = notify
    streaming = False
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            nonlocal refused
            async with sender:
                response = await dispatch(server, raw, exchange)
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


async def listen(
    server: Hosted,
    raw: dict[str, Any],
    exchange: Exchange,
    replica: Header,
    receive: Receive,
    send: Send,
    keepalive: float,
    refuse: Refuse | None = None,
) -> None:
    """``subscriptions/listen``: an acknowledgement, then matching notifications (and a
    keep-alive comment after ``keepalive`` quiet seconds) until the client closes the stream.
    A refusal before the stream begins is a plain response, or ``refuse``'s answer for a token
    without the scopes of a task it names."""
    from engine.protocol.subscriptions import Subscription
    from engine.protocol.subscriptions import listen as serve_listen

    streaming = False

    async def stream(subscription: Subscription) -> None:
        nonlocal streaming
        streaming = True
        await start_event_stream(send, replica)
        sender, events = anyio.create_memory_object_stream[bytes](256)
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
            tg.start_soon(subscription.run, sender)
            await relay(events, send, keepalive)

    try:
        answered = await serve_listen(server, raw, exchange, stream)
    except Exception as exc:
        error = error_of(exc, server.metrics)
        if not streaming:  # once the stream has begun, there is no response left to send
            response = error_response(raw.get("id"), error)
            if isinstance(response, ScopeRefused) and refuse is not None:
                await refuse(response)
            else:
                await send_json(send, response.status, response.body or b"", replica)
        return
    if answered is not None:  # a middleware answered in the server's place
        await send_json(send, 200, result_bytes(raw.get("id"), answered), replica)
