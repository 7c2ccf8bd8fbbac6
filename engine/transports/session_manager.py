"""``mcp.session_manager``: what code written for the official server enters to run its app.

There, an app mounted inside another application serves only while its session manager runs,
so the outer application's lifespan enters ``mcp.session_manager.run()``. Here the same call
runs the server (``mcp.running()``: its lifespan, store and background work), and the fields
report how 2025-11-25 sessions are kept, as the last ``streamable_http_app()`` configured them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.fleet.sessions import SessionRegistry
    from engine.transports.app_options import AppOptions


class _Server(Protocol):
    @property
    def sessions(self) -> SessionRegistry: ...

    def running(self) -> contextlib.AbstractAsyncContextManager[Any]: ...


class SessionManager:
    """How a server's HTTP sessions are run and kept (the official ``session_manager``)."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self.max_sessions: int | None = None
        """As given to ``streamable_http_app()``. Sessions are not capped by count: they are
        kept in the store (or, without one, a bounded table of this process) and expire."""
        self.stateless = False
        """Whether 2025-11-25 clients are served without sessions (``stateless_http``)."""
        self.json_response = False

    def run(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Run the server while the block runs: what an application that mounts
        ``streamable_http_app()`` enters in its own lifespan."""
        return self._server.running()

    @property
    def session_idle_timeout(self) -> float:
        """Seconds a 2025-11-25 session lives idle (``session_ttl``)."""
        return self._server.sessions.ttl

    def configure(self, options: AppOptions, stateless: bool) -> None:
        self.max_sessions = options.max_sessions
        self.stateless = stateless
        self.json_response = bool(options.endpoint.get("json_response", False))


__all__ = ["SessionManager"]
