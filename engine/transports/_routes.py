"""Plain HTTP endpoints beside ``/mcp``: ``@mcp.custom_route(path, methods=[...])``.

A route's handler is either a plain ASGI application, ``async def app(scope, receive, send)``,
or a Starlette handler ``async def handler(request) -> Response`` as the official server takes
(it receives a ``starlette.requests.Request``). Which one is told by the number of parameters it
takes (three, or one). Paths are exact (no ``{param}`` templates); a trailing slash is ignored,
as for ``/mcp``. A route may not take ``/mcp``, ``/healthz`` or ``/metrics``.

A route is open by default, as on the official server (health checks and OAuth callbacks are
reached without a token): no bearer token and no ``Host`` check. ``require_auth=True`` puts it
behind both, as ``/mcp`` is, with ``scopes`` on top of the server's ``required_scopes``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import anyio.to_thread

from engine.auth.settings import check_scope
from engine.transports._asgi import Receive, Scope, Send

App = Callable[[Scope, Receive, Send], Awaitable[None]]
RESERVED = frozenset({"/mcp", "/healthz", "/metrics"})
"""The paths the engine serves itself: a route may not shadow them."""


def route_path(path: str) -> str:
    """``path`` as requests are matched against it: without its trailing slash."""
    return path.rstrip("/") or "/"


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    methods: frozenset[str]
    handler: Callable[..., Any]
    """What was registered, returned unchanged by the decorator."""
    endpoint: App
    name: str | None
    require_auth: bool = False
    """Behind the ``Host`` check and the bearer token, as ``/mcp`` is."""
    scopes: tuple[str, ...] = ()
    """Scopes a token needs here, on top of the server's ``required_scopes``."""


class Routes:
    """The custom routes of one server, by path then method."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(
        self,
        path: str,
        methods: Iterable[str],
        handler: Callable[..., Any],
        name: str | None = None,
        *,
        require_auth: bool = False,
        scopes: Iterable[str] | None = None,
    ) -> Route:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"A custom route's path must start with '/', got {path!r}")
        if "{" in path or "}" in path:
            raise ValueError(
                f"Custom route {path!r}: paths are matched exactly; templates like '{{id}}' are "
                "not supported (read a query parameter instead)"
            )
        matched = route_path(path)
        if matched in RESERVED:
            raise ValueError(
                f"Custom route {path!r} would shadow the engine's own {matched}; "
                f"choose another path (taken: {', '.join(sorted(RESERVED))})"
            )
        if isinstance(methods, str):
            raise TypeError(f"methods must be a list of HTTP methods, like [{methods!r}]")
        wanted = {method.upper() for method in methods}
        if not wanted:
            raise ValueError(f"Custom route {path!r} needs at least one method")
        if "GET" in wanted:
            wanted.add("HEAD")
        for taken in self.routes:
            overlap = taken.methods & wanted
            if taken.path == matched and overlap:
                raise ValueError(
                    f"Custom route {path!r} is already registered for {', '.join(sorted(overlap))}"
                )
        if isinstance(scopes, str):
            raise TypeError(f"scopes must be a list of scopes, like [{scopes!r}]")
        needed = tuple(check_scope(scope) for scope in scopes or ())
        if needed and not require_auth:
            raise ValueError(
                f"Custom route {path!r}: scopes= applies to a route behind the bearer token; "
                "add require_auth=True"
            )
        endpoint = asgi_endpoint(handler)
        route = Route(matched, frozenset(wanted), handler, endpoint, name, require_auth, needed)
        self.routes.append(route)
        return route

    def table(self) -> dict[str, dict[str, Route]]:
        """``{path: {method: route}}``, what an app looks requests up in."""
        table: dict[str, dict[str, Route]] = {}
        for route in self.routes:
            endpoints = table.setdefault(route.path, {})
            for method in route.methods:
                endpoints[method] = route
        return table

    @property
    def gated(self) -> list[Route]:
        """The routes behind the bearer token."""
        return [route for route in self.routes if route.require_auth]

    @property
    def methods(self) -> frozenset[str]:
        """Every method some route answers."""
        return frozenset(method for route in self.routes for method in route.methods)


def asgi_endpoint(handler: Callable[..., Any]) -> App:
    """The ASGI application that serves a route with ``handler``."""
    if not callable(handler):
        raise TypeError(f"A custom route's handler must be callable, got {handler!r}")
    try:
        parameters = [
            p
            for p in inspect.signature(handler).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        parameters = []
    if len(parameters) == 3:
        return handler  # async def app(scope, receive, send)
    if len(parameters) == 1:
        return _starlette_endpoint(handler)
    raise TypeError(
        f"Custom route handler {getattr(handler, '__name__', handler)!r} takes "
        f"{len(parameters)} parameters: write an ASGI app, async def app(scope, receive, send), "
        "or async def handler(request) -> Response"
    )


def _starlette_endpoint(handler: Callable[..., Any]) -> App:
    from starlette.requests import Request

    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__  # an instance whose __call__ is async
    )

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, cast(Any, send))
        if is_async:
            response = await handler(request)
        else:
            response = await anyio.to_thread.run_sync(functools.partial(handler, request))
        await response(scope, receive, send)

    return endpoint


__all__ = ["RESERVED", "Route", "Routes", "asgi_endpoint", "route_path"]
