"""ASGI helpers both eras use: types, a whole JSON response, and watching for a hang-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio

log = logging.getLogger("engine.http")

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
                (b"content-length", b"%d" % len(body)),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def request_headers(scope: Scope) -> dict[str, str]:
    """Header names lowercased; a repeated header's values joined with ``", "``."""
    raw = scope.get("headers", ())
    if type(raw) is not list:
        raw = list(raw)
    result = {name.lower().decode("latin-1"): value.decode("latin-1") for name, value in raw}
    if len(result) == len(raw):
        return result
    result = {}
    for name, value in raw:
        key = name.lower().decode("latin-1")
        text = value.decode("latin-1")
        result[key] = f"{result[key]}, {text}" if key in result else text
    return result


T = TypeVar("T")


WATCH_AFTER = 0.05
"""Seconds a request runs before a watcher starts listening for the client hanging up."""


async def until_disconnect(
    work: Coroutine[Any, Any, T], receive: Receive, watch_after: float = WATCH_AFTER
) -> T | None:
    """Run ``work``; cancel it and return ``None`` if the client hangs up first.

    On asyncio a request that ends within ``watch_after`` costs one timer and nothing else:
    most requests are that short, and a watcher task per request would cost more than the
    request. A longer one gets a watcher whose done-callback cancels this task; a hang-up
    that happened earlier is seen at once, since ``receive`` reports it when asked. Elsewhere,
    a task group.
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
    loop = task.get_loop()
    hung_up = False
    watcher: asyncio.Task[None] | None = None

    def on_disconnect(done: asyncio.Task[None]) -> None:
        nonlocal hung_up
        if done.cancelled():
            return
        if done.exception() is not None:
            log.debug("the hang-up watcher failed", exc_info=done.exception())
        hung_up = True
        task.cancel()

    def start_watching() -> None:
        nonlocal watcher
        watcher = loop.create_task(wait_disconnect(receive))
        watcher.add_done_callback(on_disconnect)

    timer = loop.call_later(watch_after, start_watching)
    try:
        return await work
    except asyncio.CancelledError:
        if not hung_up:
            raise
        task.uncancel()
        return None
    finally:
        timer.cancel()
        if watcher is not None:
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
