"""Waking tasks that wait for a round to settle, shared by every store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractContextManager

import anyio

from ._listeners import listening

Read = Callable[[], Awaitable[tuple[object, bytes | None] | None]]
"""Reads a round: the fingerprint of the request holding it and its response (None until
done), or None when there is no round."""


class Waiters:
    """Per-key wake-ups within this process; each waiter owns its event so none leak."""

    def __init__(self) -> None:
        self._events: dict[Hashable, set[anyio.Event]] = {}

    def watch(self, key: Hashable) -> AbstractContextManager[anyio.Event]:
        """An event set by the next `notify(key)`; register it before reading the state."""
        return listening(self._events, key, anyio.Event())

    def notify(self, key: Hashable) -> None:
        """Wake everybody watching `key`."""
        for event in self._events.pop(key, ()):
            event.set()


async def wait_settled(
    read: Read,
    fingerprint: bytes,
    waiters: Waiters,
    key: Hashable,
    max_wait: float,
    poll: float | None = None,
) -> bytes | None:
    """Re-read the round whenever it is notified (or every `poll` s) until it settles: the
    response of `fingerprint`, or None once the round is released, expired or another's.

    `poll` covers writers this process cannot see, such as another process on the same SQLite
    file. Registering before reading means a completion between the two is never missed.
    """
    with anyio.move_on_after(max_wait):
        while True:
            with waiters.watch(key) as woken:
                record = await read()
                if record is None or record[0] != fingerprint:
                    return None
                if record[1] is not None:
                    return record[1]
                with anyio.move_on_after(poll):
                    await woken.wait()
    return None
