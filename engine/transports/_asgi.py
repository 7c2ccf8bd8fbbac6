"""ASGI helpers both eras use: types, whole JSON and text responses, and watching for a hang-up."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import anyio

from engine._internal import hangup_guard as hangup

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


async def send_plain(
    send: Send,
    status: int,
    body: bytes,
    *headers: Header,
    content_type: bytes = b"text/plain; charset=utf-8",
) -> None:
    """One whole response that is not JSON-RPC: ``404``, ``405``, an empty ``202``, metrics.

    JSON-RPC answers go through :func:`send_json`, which has no content type to choose.
    """
    fields = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


HEADER_SETS = 512
"""Distinct request header lists whose decoding is remembered (a client sends the same ones
again and again; a bounded table, emptied when full, so varied headers only refill it)."""
HEADER_SET_BYTES = 4096
"""A header list longer than this (names and values) is decoded every time, never remembered:
the table holds at most ``HEADER_SETS * HEADER_SET_BYTES`` of headers, twice (raw and decoded)."""

_decoded: dict[tuple[Header, ...], dict[str, str]] = {}


def request_headers(scope: Scope) -> dict[str, str]:
    """Header names lowercased; a repeated header's values joined with ``", "``.

    Every request gets a dict of its own (a copy of the remembered decoding): a handler that
    changes it changes nothing for other requests.
    """
    key = tuple(scope.get("headers", ()))
    try:
        decoded = _decoded.get(key)
    except TypeError:  # headers as lists, not tuples: unhashable, decoded every time
        return _decode(key)
    if decoded is None:
        decoded = _decode(key)
        if sum(len(name) + len(value) for name, value in key) > HEADER_SET_BYTES:
            return decoded
        if len(_decoded) >= HEADER_SETS:
            _decoded.clear()
        _decoded[key] = decoded
    return dict(decoded)


def _decode(raw: Sequence[Sequence[bytes]]) -> dict[str, str]:
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
    work: Coroutine[Any, Any, T],
    receive: Receive,
    watch_after: float = WATCH_AFTER,
    then: Callable[[T], Awaitable[None]] | None = None,
) -> T | None:
    """Run ``work``; cancel it and return ``None`` if the client hangs up first. Given ``then``,
    the result is handed to it unless the client hung up: a request's answer written by the
    coroutine that ran it, not by one more around it.

    On asyncio a request is only noted in its loop's :class:`HangUpWatch`: most requests end
    within ``watch_after``, and a watcher task (or even a timer) per request would cost more
    than the request. One that runs longer gets a watcher whose done-callback cancels this
    task; a hang-up that happened earlier is seen at once, since ``receive`` reports it when
    asked. Elsewhere, a task group.
    """
    task = _current_asyncio_task()
    if task is None:
        result: T | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
            result = await work
            tg.cancel_scope.cancel()
        if then is not None:
            if result is None:
                log.info("client closed the connection; the request was cancelled")
            else:
                await then(result)
        return result
    loop = task.get_loop()
    hang_ups: HangUpWatch | None = getattr(_watches, "watch", None)
    if hang_ups is None or hang_ups.loop is not loop or hang_ups.watch_after != watch_after:
        hang_ups = _new_watch(loop, watch_after)  # a new loop, or another delay
    in_flight = hang_ups.in_flight
    in_flight[task] = (loop.time() + watch_after, receive)
    if not hang_ups.sweeping:
        hang_ups.start_sweeping()
    try:
        done = await work
    except asyncio.CancelledError:
        if task not in hang_ups.hung_up:
            raise
        task.uncancel()
        if then is not None:
            log.info("client closed the connection; the request was cancelled")
        return None
    finally:
        in_flight.pop(task, None)
        if hang_ups.watchers or hang_ups.hung_up:
            hang_ups.forget(task)
    if then is not None:
        await then(done)
    return done


class HangUpWatch:
    """The requests in flight on one event loop, swept by one timer.

    A request costs a dict entry (its task, ``receive`` and when it is due for a watcher),
    added and removed. Entries are in arrival order, so those due are at the front. While any
    is in flight a sweep runs every ``watch_after / 2`` and starts a watcher task for each
    request that has run between ``watch_after`` and ``1.5 * watch_after``; the watcher's
    done-callback cancels the request's task when the client hangs up.

    Entered from a request it watches (the guard
    :func:`engine._internal.hangup_guard.uncut` finds), it holds that cancellation off: a
    request that hangs up inside the block is left to finish, and its response goes nowhere.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, watch_after: float) -> None:
        self.loop = loop
        self.watch_after = watch_after
        self.in_flight: dict[asyncio.Task[Any], tuple[float, Receive]] = {}
        self.watchers: dict[asyncio.Task[Any], asyncio.Task[None]] = {}
        self.hung_up: set[asyncio.Task[Any]] = set()
        self.held: dict[asyncio.Task[Any], int] = {}
        """Requests inside a block that a hang-up must not cut short, with its nesting depth."""
        self.sweeping = False

    def __enter__(self) -> None:
        task = asyncio.current_task(self.loop)
        if task is not None:
            self.held[task] = self.held.get(task, 0) + 1

    def __exit__(self, *exc_info: object) -> None:
        task = asyncio.current_task(self.loop)
        if task is None:
            return
        depth = self.held.pop(task, 0)
        if depth > 1:
            self.held[task] = depth - 1

    def start_sweeping(self) -> None:
        self.sweeping = True
        self.loop.call_later(self.watch_after, self._sweep)

    def forget(self, task: asyncio.Task[Any]) -> None:
        """Drop a finished request's watcher and hang-up mark (it left ``in_flight`` already;
        the caller skips this when neither is kept for any request)."""
        watcher = self.watchers.pop(task, None)
        if watcher is not None:
            watcher.cancel()
        self.hung_up.discard(task)

    def _sweep(self) -> None:
        now = self.loop.time()
        for task, (due, receive) in self.in_flight.items():
            if due > now:
                break
            if task not in self.watchers:
                self.watchers[task] = watcher = self.loop.create_task(wait_disconnect(receive))
                watcher.add_done_callback(functools.partial(self._on_disconnect, task))
        if self.in_flight:
            self.loop.call_later(self.watch_after / 2, self._sweep)
        else:
            self.sweeping = False

    def _on_disconnect(self, task: asyncio.Task[Any], watcher: asyncio.Task[None]) -> None:
        if watcher.cancelled() or self.watchers.get(task) is not watcher:
            return
        if watcher.exception() is not None:
            log.debug("the hang-up watcher failed", exc_info=watcher.exception())
        del self.watchers[task]
        self.hung_up.add(task)
        if task not in self.held:
            task.cancel()


_watches = threading.local()
"""This thread's :class:`HangUpWatch`: a thread runs one event loop at a time."""


def _new_watch(loop: asyncio.AbstractEventLoop, watch_after: float) -> HangUpWatch:
    """This thread's watch from now on; requests in flight on the old one keep theirs."""
    watch = _watches.watch = HangUpWatch(loop, watch_after)
    return watch


def _hang_up_guard() -> HangUpWatch | None:
    """The watch of the request running now, if this thread's watch has it in flight."""
    watch: HangUpWatch | None = getattr(_watches, "watch", None)
    if watch is None or not watch.in_flight:
        return None
    task = _current_asyncio_task()
    return watch if task is not None and task in watch.in_flight else None


hangup.register(_hang_up_guard)


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


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` (a task group's, say) when the client hangs up."""
    await wait_disconnect(receive)
    scope.cancel()
