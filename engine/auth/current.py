"""``get_access_token()``: the access token of the request being served, where ``ctx`` is not.

The official server offers it as ``mcp.server.auth.middleware.auth_context.get_access_token``;
ported code imports it from here instead. Handlers that take a ``Context`` read the same token
as ``ctx.access_token``, which needs no ambient state.
"""

from __future__ import annotations

import contextvars

from engine.auth.provider import AccessToken

current_token: contextvars.ContextVar[AccessToken | None] = contextvars.ContextVar(
    "engine_access_token", default=None
)
"""Set by the HTTP transport for the duration of a request it authenticated."""


def get_access_token() -> AccessToken | None:
    """The verified access token of this request; ``None`` without one (stdio, auth off)."""
    return current_token.get()


__all__ = ["current_token", "get_access_token"]
