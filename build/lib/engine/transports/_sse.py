"""Server-sent events over ASGI, for both eras: starting a stream, framing its events, ending it.

An event stream is one 200 response whose headers keep caches and proxies from holding it back,
then one ``http.response.body`` message per event, and an empty last message to end it. A stream
that lives on with nothing to say (a listen stream, a 2025-11-25 session stream) sends a comment
now and then, so that proxies and clients do not take it for dead.
"""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.transports._asgi import Header, Send

KEEPALIVE_SECONDS = 15.0
"""How long a long-lived stream stays quiet before it sends a keep-alive comment."""

KEEP_ALIVE = b": keep-alive\n\n"


async def start_event_stream(send: Send, replica: Header) -> None:
    """Send the status and headers of a ``text/event-stream`` response."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                replica,
            ],
        }
    )


def message_event(data: bytes) -> bytes:
    """One JSON-RPC message as an event of type ``message``."""
    return b"event: message\ndata: " + data + b"\n\n"


def numbered_event(event_id: str, data: bytes) -> bytes:
    """A ``message`` event with an id, which a client that lost the stream resumes after."""
    return f"id: {event_id}\n".encode() + message_event(data)


def priming_event(event_id: str, retry_ms: int) -> bytes:
    """An empty event that gives the client an id to resume from and how soon to reconnect."""
    return f"id: {event_id}\nretry: {retry_ms}\ndata: \n\n".encode()


async def write(send: Send, chunk: bytes) -> None:
    """Write part of a started stream (events, comments), leaving it open."""
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def end_event_stream(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def relay(events: MemoryObjectReceiveStream[bytes], send: Send, keepalive: float) -> None:
    """Write each message from ``events`` as an event, and a keep-alive comment whenever
    ``keepalive`` seconds pass without one, until cancelled."""
    async with events:
        while True:
            with anyio.move_on_after(keepalive):
                await write(send, message_event(await events.receive()))
                continue
            await write(send, KEEP_ALIVE)
