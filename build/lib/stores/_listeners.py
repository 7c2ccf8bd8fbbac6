"""Listeners kept by key (bus subscribers by topic, waiters by round), shared by the stores
that notify within this process."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


@contextmanager
def listening(table: dict[K, set[V]], key: K, listener: V) -> Iterator[V]:
    """``listener`` is in ``table[key]`` while the context lasts; a key left without listeners
    leaves the table, so keys nobody waits on any more cannot pin memory."""
    table.setdefault(key, set()).add(listener)
    try:
        yield listener
    finally:
        listeners = table.get(key)
        if listeners is not None:
            listeners.discard(listener)
            if not listeners:
                del table[key]
