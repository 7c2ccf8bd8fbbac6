"""Work a client hanging up must not cut short, such as keeping a round's response.

A transport that cancels a request with a plain ``Task.cancel()`` when its client hangs up (the
per-loop hang-up watch does, to stay cheap) registers here how to hold that off for the current
request; :func:`uncut` uses it, and falls back to an anyio shield, which is what stops
cancellation coming from anyio cancel scopes (task groups that watch for hang-ups, stdio,
shutdown) but not a plain ``Task.cancel()``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import anyio

GuardFinder = Callable[[], AbstractContextManager[Any] | None]
"""The guard of the current request, if the transport that registered it serves it."""

_finders: list[GuardFinder] = []


def register(finder: GuardFinder) -> None:
    if finder not in _finders:
        _finders.append(finder)


def uncut() -> AbstractContextManager[Any]:
    """A block that runs to its end even if the client hangs up meanwhile."""
    for finder in _finders:
        guard = finder()
        if guard is not None:
            return guard
    return anyio.CancelScope(shield=True)
