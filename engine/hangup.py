"""Work a client hanging up must not cut short, such as keeping a round's response.

A transport that cancels a request when its client hangs up says here how to hold that
cancellation off (:data:`hang_up_guard`, set for the request's task); :func:`uncut` uses it, and
falls back to an anyio shield where cancellation comes from anyio cancel scopes (task groups that
watch for hang-ups, stdio, shutdown). The two differ because a shield only stops anyio's own
cancellation, not the plain ``Task.cancel()`` the per-loop hang-up watch uses to stay cheap.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any

import anyio

hang_up_guard: ContextVar[AbstractContextManager[Any] | None] = ContextVar(
    "engine_hang_up_guard", default=None
)
"""While set, entering it holds off the hang-up cancellation of the current request."""


def uncut() -> AbstractContextManager[Any]:
    """A block that runs to its end even if the client hangs up meanwhile."""
    guard = hang_up_guard.get()
    return guard if guard is not None else anyio.CancelScope(shield=True)
