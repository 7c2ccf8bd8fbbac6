"""Waking tasks that wait for a round to settle, shared by the memory and SQLite stores."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager

import anyio

Peek = Callable[[], Awaitable[tuple[bool, bytes | None]]]
"""Reads a round: (still in progress for us, response when done)."""


class Waiters:
    """Per-key wake-ups within this process; each waiter owns its event so none leak."""

    def __init__(self) -> None:
        self._events: dict[Hashable, set[anyio.Event]] = {}

    @contextmanager
    def watch(self, key: Hashable) -> Iterator[anyio.Event]:
        """An event set by the next `notify(key)`; register it before reading the state."""
        event = anyio.Event()
        self._events.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            events = self._events.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._events[key]

    def notify(self, key: Hashable) -> None:
        """Wake everybody watching `key`."""
        for event in self._events.pop(key, ()):
            event.set()


async def wait_settled(
    peek: Peek, waiters: Waiters, key: Hashable, max_wait: float, poll: float | None = None
) -> bytes | None:
    """Re-read the round whenever it is notified (or every `poll` s) until it settles.

    `poll` covers writers this process cannot see, such as another process on the same SQLite
    file. Registering before reading means a completion between the two is never missed.
    """
    with anyio.move_on_after(max_wait):
        while True:
            with waiters.watch(key) as woken:
                in_progress, response = await peek()
                if not in_progress:
                    return response
                with anyio.move_on_after(poll):
                    await woken.wait()
    return None
