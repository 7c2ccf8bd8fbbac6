"""``Resolve``, the public marker of a parameter a resolver fills: ``Annotated[T, Resolve(fn)]``.

Its options are checked when it is made, so a bad one fails where the handler is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine._internal.introspect import callable_name
from engine.errors import InvalidSignature


class Resolve:
    """Marks a parameter as filled by a resolver: ``Annotated[T, Resolve(fn)]``.

    ``once=True`` records the resolver's value in the call's state the round it first completes;
    later rounds (on any replica) reuse it instead of running ``fn`` again. ``key`` names the
    resolver's question on the wire; the default is the function's ``__name__``.
    """

    __slots__ = ("fn", "key", "once")

    def __init__(self, fn: Callable[..., Any], *, once: bool = False, key: str | None = None):
        if not callable(fn):
            raise InvalidSignature(f"Resolve() needs a callable, got {fn!r}")
        if key is not None and (not key or "#" in key):
            raise InvalidSignature(f"Resolve key {key!r} must be non-empty and contain no '#'")
        self.fn = fn
        self.once = once
        self.key = key

    def __repr__(self) -> str:
        """As it is written: ``Resolve(check_stock)``, with only the options given."""
        options = (", once=True" if self.once else "") + (
            f", key={self.key!r}" if self.key is not None else ""
        )
        return f"Resolve({callable_name(self.fn)}{options})"
