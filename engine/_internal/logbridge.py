"""Python ``logging`` records to ``notifications/message`` for the client that asked for them.

A handler writes to Python's logging like any program. When the request opted in (2026-07-28:
``_meta["io.modelcontextprotocol/logLevel"]``; 2025-11-25: the session's ``logging/setLevel``),
records emitted while serving it, at or above that level, also go to the client on the request's
stream. No record is sent to a client that did not ask (a library's log lines can carry what
only the server should see), and nothing the application's logging configuration filters out
(set your loggers' levels as for any program).

``ctx.log()`` (and ``ctx.debug/info/warning/error``) sends one message through the same filter:
:func:`log_message`. A message below the level asked for is dropped silently, as the official
server drops it. A 2025-11-25 session that set no level hears the handler's own messages from
``info`` up, as the official server's clients do, and none of Python's records.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectSendStream

from engine._internal.notify import Notify

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 60,
    "emergency": 70,
}


def mcp_level(levelno: int) -> str:
    name = "debug"
    for candidate, number in LEVELS.items():
        if levelno >= number:
            name = candidate
    return name


@dataclass(slots=True)
class _Forwarding:
    threshold: int
    sender: MemoryObjectSendStream[tuple[str, dict[str, Any]]]
    loop_thread: int
    records: bool
    """Python's log records go too, not only the handler's own messages."""


_current: contextvars.ContextVar[_Forwarding | None] = contextvars.ContextVar(
    "engine_log_forwarding", default=None
)


def _admitted(threshold: int | None, levelno: int) -> bool:
    """The one filter: a level was asked for, and this message is at or above it."""
    return threshold is not None and levelno >= threshold


class _Bridge(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        forwarding = _current.get()
        if forwarding is None or not forwarding.records:
            return
        if not _admitted(forwarding.threshold, record.levelno):
            return
        if record.name.startswith("engine.") or record.name.startswith("uvicorn"):
            return
        params = {
            "level": mcp_level(record.levelno),
            "logger": record.name,
            "data": record.getMessage(),
        }
        item = ("notifications/message", params)
        try:
            if threading.get_ident() == forwarding.loop_thread:
                forwarding.sender.send_nowait(item)
            else:
                anyio.from_thread.run_sync(forwarding.sender.send_nowait, item)
        except (
            anyio.WouldBlock,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            RuntimeError,
        ):
            pass  # a client that cannot keep up, or a request that ended, loses log lines


async def log_message(
    level: str,
    data: Any,
    logger: str | None,
    *,
    requested: str | None,
    notify: Notify | None,
) -> None:
    """``ctx.log``: one ``notifications/message`` to the client of this request, if it asked.

    Inside :func:`forwarding_logs` (a 2025-11-25 request: the session's level) the message joins
    the block's records, in order, through the same threshold. Elsewhere ``requested`` is the
    level the request itself asked for (2026-07-28: ``_meta["io.modelcontextprotocol/logLevel"]``)
    and ``notify`` its stream; without either nothing is sent.
    """
    levelno = LEVELS.get(level)
    if levelno is None:
        raise ValueError(f"Unknown log level {level!r}: use one of {', '.join(LEVELS)}")
    forwarding = _current.get()
    threshold = forwarding.threshold if forwarding is not None else LEVELS.get(requested or "")
    if not _admitted(threshold, levelno) or (forwarding is None and notify is None):
        return
    params: dict[str, Any] = {"level": level}
    if logger is not None:
        params["logger"] = logger
    params["data"] = data
    try:
        if forwarding is not None:
            await forwarding.sender.send(("notifications/message", params))
        elif notify is not None:
            await notify("notifications/message", params)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the request's stream is gone: its log lines go with it


async def notify_in_order(notify: Notify, method: str, params: dict[str, Any]) -> None:
    """Send a notification of this request (``notifications/progress``, say) after the log
    lines queued before it: inside :func:`forwarding_logs` it joins their queue, so the client
    hears them in the order the handler emitted them."""
    forwarding = _current.get()
    if forwarding is None:
        await notify(method, params)
        return
    try:
        await forwarding.sender.send((method, params))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        await notify(method, params)  # the block is ending: straight to the stream


def _install() -> None:
    """The bridge on the root logger, once; again if a logging configuration made since (a
    ``dictConfig`` with a root, uvicorn's, a test's) took it off."""
    root = logging.getLogger()
    if not any(type(handler) is _Bridge for handler in root.handlers):
        root.addHandler(_Bridge())


@contextlib.asynccontextmanager
async def forwarding_logs(
    level: str | None, notify: Notify | None, *, records: bool = True
) -> AsyncIterator[None]:
    """Forward the messages, and unless ``records`` is false the log records, emitted inside
    the block to ``notify`` when a level was asked for."""
    threshold = LEVELS.get(level or "")
    if threshold is None or notify is None:
        yield
        return
    _install()
    sender, receiver = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](256)
    token = _current.set(_Forwarding(threshold, sender, threading.get_ident(), records))

    async def pump() -> None:
        async with receiver:
            async for method, params in receiver:
                await notify(method, params)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield
            finally:
                sender.close()
    except BaseExceptionGroup as group:
        # The task group wraps what the block raised; the request's caller expects that
        # exception itself (an MCPError is its JSON-RPC error), not a group of one.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        _current.reset(token)
