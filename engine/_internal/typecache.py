"""``isinstance`` against pydantic model classes, answered once per exact type.

A model class's metaclass derives from ``ABCMeta``, so ``isinstance(value, SomeModel)`` goes
through the ABC machinery (subclass hooks and their caches), and the test runs on every round
for every resolver value and every result. For one exact type the answer never changes (these
classes register no virtual subclasses), so it is computed once and looked up after: a dict
lookup instead of the ABC check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_UNSEEN: Any = object()

REMEMBERED_TYPES = 256
"""Distinct types a test remembers; a program that makes classes on the fly only refills it."""


def instance_test(*classes: type) -> Callable[[Any], bool]:
    """``test(value)`` is ``isinstance(value, classes)``, remembered by ``type(value)``."""
    seen: dict[type, bool] = {}

    def test(value: Any) -> bool:
        kind = type(value)
        known = seen.get(kind)
        if known is None:
            known = isinstance(value, classes)
            if len(seen) >= REMEMBERED_TYPES:
                seen.clear()
            seen[kind] = known
        return known

    return test


def remembered(read: Callable[[type], T]) -> Callable[[type], T]:
    """``lookup(kind)`` is ``read(kind)`` (a test of a type, or what it finds about one),
    computed once per type."""
    seen: dict[type, T] = {}

    def lookup(kind: type) -> T:
        known: T = seen.get(kind, _UNSEEN)
        if known is _UNSEEN:
            known = read(kind)
            if len(seen) >= REMEMBERED_TYPES:
                seen.clear()
            seen[kind] = known
        return known

    return lookup
