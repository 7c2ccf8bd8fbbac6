"""The Starlette application ``mcp.streamable_http_app()`` returns.

Code written for the official server treats that app as Starlette: it lists ``app.routes``,
mounts the app with ``Mount(...)``, enters ``app.router.lifespan_context(app)``, adds
middleware. So the app is a Starlette application whose routes name the MCP endpoint, the
protected resource metadata (with ``auth``) and the custom routes; every one of them, and
Starlette's fallback for any other path, is served by the one
:class:`~engine.transports.http.StreamableHTTPApp`, which routes by itself.

A request to the MCP endpoint does not go through Starlette at all while the app has no
middleware: it is handed straight to the endpoint after one check of its scope, so the shell
adds that check and one call to the hot path, and no routing. With middleware
(``streamable_http_app(middleware=...)``, ``cors_origins``, or ``app.add_middleware``), every
request goes through Starlette's stack, and so through them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.auth.metadata import WELL_KNOWN
from engine.transports._cors import CORSPolicy, with_cors
from engine.transports._routes import Routes
from engine.transports._served import Hosted
from engine.transports.app_options import AppOptions
from engine.transports.http import StreamableHTTPApp


class MCPStarlette(Starlette):
    """A Starlette application around one :class:`StreamableHTTPApp`."""

    def __init__(
        self,
        endpoint: StreamableHTTPApp,
        *,
        routes: Routes | None = None,
        middleware: Sequence[Middleware] = (),
        mounts: Mapping[str, ASGIApp] | None = None,
    ) -> None:
        listed: list[BaseRoute] = [Route(endpoint.path, endpoint, name="mcp")]
        for prefix, mounted in (mounts or {}).items():
            if prefix == endpoint.path:
                raise ValueError(f"mounts: {prefix} is this app's MCP endpoint")
            listed.append(Mount(prefix, mounted))
        if endpoint.gate is not None:
            metadata = WELL_KNOWN + ("" if endpoint.path == "/" else endpoint.path)
            listed.append(Route(metadata, endpoint, name="oauth-protected-resource"))
        for route in routes.routes if routes is not None else ():
            # Listed with the path only: the endpoint answers each method itself (405 with the
            # methods it takes, HEAD with GET), as it does for the trailing-slash spelling.
            listed.append(Route(route.path, endpoint, name=route.name))
        super().__init__(routes=listed, middleware=middleware, lifespan=_lifespan(endpoint))
        self.router.default = cast(
            ASGIApp, endpoint
        )  # /healthz, /metrics, the other well-known paths, 404
        self.router.redirect_slashes = False  # the endpoint ignores a trailing slash instead
        self.endpoint = endpoint
        self._endpoint_path = endpoint.path
        self._serve_endpoint = endpoint.serve_endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == self._endpoint_path
            and not scope.get("root_path")
            and not self.user_middleware
        ):
            await self._serve_endpoint(scope, receive, send)  # type: ignore[arg-type]
            return
        await super().__call__(scope, receive, send)

    @property
    def draining(self) -> bool:
        """Whether every response closes its connection (the server is draining)."""
        return self.endpoint.draining

    @draining.setter
    def draining(self, value: bool) -> None:
        self.endpoint.draining = value

    def end_waiting_calls(self) -> int:
        """End the calls waiting here for their clients' answers (the drain is running out of
        time): each answers with an error saying to call again; how many there were."""
        return self.endpoint.server.backchannel.end_all(
            "the server is shutting down; call the tool again"
        )

    @property
    def path(self) -> str:
        """The MCP endpoint's path."""
        return self.endpoint.path


def http_app(
    server: Hosted,
    options: AppOptions,
    *,
    routes: Routes | None = None,
    extra_allowed_hosts: Iterable[str] = (),
) -> MCPStarlette:
    """The app ``mcp.streamable_http_app()`` makes. An origin allowed for CORS is an allowed
    origin of the DNS-rebinding check too; CORS is the outermost middleware, so a preflight is
    answered before any other could refuse it for lacking credentials."""
    endpoint_options = dict(options.endpoint)
    middleware = options.middleware
    if isinstance(middleware, str | bytes) or not isinstance(middleware, Sequence | type(None)):
        raise TypeError("middleware must be a list of ASGI middleware factories")
    stack = [_middleware(item) for item in middleware or ()]
    if options.cors_origins is not None:
        cors = CORSPolicy(options.cors_origins, routes.methods if routes is not None else ())
        if cors.any_origin or cors.allowed:  # an empty list allows no origin: CORS stays off
            allowed = ["*"] if cors.any_origin else cors.origins
            given = endpoint_options.get("allowed_origins")
            endpoint_options["allowed_origins"] = [*(given or ()), *allowed]
            stack.insert(0, Middleware(with_cors, cors, EXPOSED))
    endpoint = StreamableHTTPApp(
        server,
        routes=routes.table() if routes is not None else None,
        extra_allowed_hosts=extra_allowed_hosts,
        **endpoint_options,
    )
    return MCPStarlette(endpoint, routes=routes, middleware=stack, mounts=options.mounts)


EXPOSED = ("Mcp-Session-Id", "X-Engine-Replica")
"""Response headers a browser client may read."""


def _middleware(item: Any) -> Middleware:
    """A Starlette ``Middleware`` as given, or one made of a factory (``lambda app: app2``, or
    a middleware class that takes the app as its only argument)."""
    if isinstance(item, Middleware):
        return item
    if callable(item):
        return Middleware(item)
    raise TypeError(
        f"middleware must be ASGI middleware factories (lambda app: wrapped_app) or Starlette "
        f"Middleware objects, got {item!r}"
    )


def _lifespan(endpoint: StreamableHTTPApp) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with endpoint.serving():
            yield

    return lifespan


__all__ = ["MCPStarlette", "http_app"]
