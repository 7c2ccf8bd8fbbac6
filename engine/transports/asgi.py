"""ASGI helpers both eras use: types, a whole JSON response, and watching for a hang-up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Header = tuple[bytes, bytes]


async def send_json(send: Send, status: int, body: bytes, *headers: Header) -> None:
    """One whole ``application/json`` response (an empty body for 202 and the like)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def request_headers(scope: Scope) -> dict[str, str]:
    result: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        result[key] = f"{result[key]}, {text}" if key in result else text
    return result


T = TypeVar("T")


async def until_disconnect(work: Coroutine[Any, Any, T], receive: Receive) -> T | None:
    """Run ``work``; cancel it and return ``None`` if the client hangs up first.

    On asyncio the watcher is a bare task whose done-callback cancels this task (and is
    cancelled when the work ends): an anyio task group, or even a cancel scope, per request
    costs more event-loop turns and backend look-ups than the short request it guards.
    Elsewhere, a task group.
    """
    task = _current_asyncio_task()
    if task is None:
        result: T | None = None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await wait_disconnect(receive)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            result = await work
            tg.cancel_scope.cancel()
        return result
    hung_up = False

    def on_disconnect(watcher: asyncio.Future[None]) -> None:
        nonlocal hung_up
        if not watcher.cancelled():
            hung_up = True
            task.cancel()

    watcher = asyncio.ensure_future(wait_disconnect(receive))
    watcher.add_done_callback(on_disconnect)
    try:
        return await work
    except asyncio.CancelledError:
        if not hung_up:
            raise
        task.uncancel()
        return None
    finally:
        watcher.remove_done_callback(on_disconnect)
        watcher.cancel()


def _current_asyncio_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop: another backend
        return None


async def wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
