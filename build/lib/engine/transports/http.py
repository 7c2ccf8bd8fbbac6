"""Streamable HTTP as a plain ASGI application: one endpoint, JSON or SSE responses.

No framework underneath: the per-request path is parse, check, dispatch, write. It mounts inside
Starlette or FastAPI like any ASGI app (``Mount("/", app=mcp.streamable_http_app())``), and runs
its server's lifespan when it receives the ASGI lifespan events itself.

This module routes a request and answers a POST; the Host and Origin checks are in
:mod:`engine.transports._origin`, the answers that are event streams (a call that notifies,
``subscriptions/listen``) in :mod:`engine.transports._modern_streams`, and 2025-11-25 clients
are served by :mod:`engine.transports.legacy_http`. Custom routes (``@mcp.custom_route``) are in
:mod:`engine.transports._routes`, CORS in :mod:`engine.transports._cors`; :func:`http_app`
wraps the app in those and in ASGI middleware only when some are asked for.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.errors import INVALID_REQUEST, PARSE_ERROR, MCPError
from engine.protocol.dispatch import dispatch
from engine.protocol.era import is_legacy
from engine.protocol.jsonrpc import dumps, error_bytes, loads
from engine.protocol.modern import META_VERSION, Exchange
from engine.transports import _headers as header_rules
from engine.transports import legacy_http
from engine.transports._asgi import (
    Header,
    Receive,
    Scope,
    Send,
    request_headers,
    send_json,
    send_plain,
    until_disconnect,
)
from engine.transports._cors import CORSPolicy, with_cors
from engine.transports._modern_streams import listen, stream_call
from engine.transports._origin import OriginPolicy
from engine.transports._routes import App, Routes
from engine.transports._served import Hosted
from engine.transports._sse import KEEPALIVE_SECONDS

log = logging.getLogger("engine.http")


DEFAULT_MAX_BODY = 4 * 1024 * 1024
UNSUPPORTED_MEDIA_TYPE = (
    "Unsupported Media Type: send the JSON-RPC message with Content-Type: application/json"
)
BODY_TOO_LARGE = "Request body too large: the limit is {} bytes"


def freeze_startup_objects() -> None:
    """Leave what exists once the server has started out of every later garbage collection.

    Modules, handlers, schemas and the store's clients live as long as the process, yet a full
    collection walks all of them, and a busy server with a store (requests wait on it, so their
    objects outlive the young generations) runs full collections often, every request waiting
    while one walks. Collected first, so no garbage is kept. Process-wide: only for a process
    the server owns (``mcp.run`` and ``python -m engine serve`` ask for it over HTTP).
    """
    gc.collect()
    gc.freeze()


class StreamableHTTPApp:
    """The ASGI application behind ``mcp.streamable_http_app()``."""

    def __init__(
        self,
        server: Hosted,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        freeze_after_startup: bool = False,
        extra_allowed_hosts: Iterable[str] = (),
        routes: Mapping[str, Mapping[str, App]] | None = None,
    ) -> None:
        self.server = server
        self.path = path.rstrip("/") or "/"
        self.routes = dict(routes or {})
        """Custom routes, ``{path: {method: ASGI app}}``, looked up before a 404."""
        if self.path in self.routes:
            raise ValueError(f"A custom route takes {self.path}, this app's MCP endpoint")
        self.origins = OriginPolicy(allowed_hosts, allowed_origins, extra_allowed_hosts)
        self._refuse_origin = self.origins.refusal
        self.max_body_bytes = max_body_bytes
        self.freeze_after_startup = freeze_after_startup
        self.replica_header = (b"x-engine-replica", server.replica_id.encode())
        self._header_check = self._check_headers
        self.draining = False
        """Set when the server drains: every response then closes its connection."""

    # --- ASGI entry --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await self._lifespan(receive, send)
            return
        if self.draining:
            send = _closing(send)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        route = path if path == self.path else path.rstrip("/") or "/"
        if route != self.path:
            if route == "/healthz" and scope["method"] in ("GET", "HEAD"):
                await self._health(send)
            elif route == "/metrics" and scope["method"] in ("GET", "HEAD"):
                body = self.server.metrics.exposition().encode()
                metrics_type = b"text/plain; version=0.0.4"
                await send_plain(send, 200, body, self.replica_header, content_type=metrics_type)
            elif route in self.routes:
                await self._custom(self.routes[route], scope, receive, send)
            else:
                await send_plain(send, 404, b"Not Found", self.replica_header)
            return
        headers = request_headers(scope)
        refused = self._refuse_origin(headers)
        if refused is not None:
            error = MCPError(INVALID_REQUEST, refused)
            await send_json(send, 403, error_bytes(None, error), self.replica_header)
            return
        method = scope["method"]
        session_id = headers.get("mcp-session-id")
        if method in ("GET", "DELETE") and session_id is not None:
            await legacy_http.session_request(
                self.server, method, session_id, headers, self.replica_header, receive, send
            )
            return
        if method != "POST":
            allow = (b"allow", b"POST")
            await send_plain(send, 405, b"Method Not Allowed", self.replica_header, allow)
            return
        await self._post(scope, receive, send, headers)

    async def _custom(
        self, endpoints: Mapping[str, App], scope: Scope, receive: Receive, send: Send
    ) -> None:
        endpoint = endpoints.get(scope["method"])
        if endpoint is None:
            allow = (b"allow", ", ".join(sorted(endpoints)).encode())
            await send_plain(send, 405, b"Method Not Allowed", self.replica_header, allow)
            return
        await endpoint(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        stack = contextlib.AsyncExitStack()
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await stack.enter_async_context(self.server.running())
                except Exception as exc:
                    log.exception("server startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                if self.freeze_after_startup:
                    freeze_startup_objects()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # --- POST ---------------------------------------------------------------------------------

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        content_type = headers.get("content-type", "")
        if (
            content_type != "application/json"
            and content_type.split(";")[0].strip().lower() != "application/json"
        ):
            error = MCPError(INVALID_REQUEST, UNSUPPORTED_MEDIA_TYPE)
            await send_json(send, 415, error_bytes(None, error), self.replica_header)
            return
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            whole: bytes = message.get("body", b"")  # the usual case: the body in one message
            body = whole if len(whole) <= self.max_body_bytes else None
        else:
            body = await self._read_body(receive, headers, message)
        if body is None:
            error = MCPError(INVALID_REQUEST, BODY_TOO_LARGE.format(self.max_body_bytes))
            await send_json(send, 413, error_bytes(None, error), self.replica_header)
            return
        try:
            raw = loads(body)
        except MCPError as exc:
            await send_json(send, 400, error_bytes(None, exc), self.replica_header)
            return
        streaming = False
        if type(raw) is dict:  # anything else is refused by dispatch, with its reason
            params = raw.get("params")
            meta = params.get("_meta") if type(params) is dict else None
            modern = type(meta) is dict and META_VERSION in meta
            if not modern and is_legacy(raw, headers=headers):
                await legacy_http.post(
                    self.server,
                    raw,
                    headers,
                    headers.get("mcp-session-id"),
                    self.replica_header,
                    receive,
                    send,
                )
                return
            if "id" in raw:
                if raw.get("method") == "subscriptions/listen":
                    exchange = Exchange(headers, None, self._header_check)
                    await listen(
                        self.server,
                        raw,
                        exchange,
                        self.replica_header,
                        receive,
                        send,
                        KEEPALIVE_SECONDS,
                    )
                    return
                streaming = isinstance(meta, dict) and (
                    "progressToken" in meta or "io.modelcontextprotocol/logLevel" in meta
                )
        exchange = Exchange(headers, None, self._header_check)
        if streaming:
            await stream_call(self.server, raw, exchange, self.replica_header, receive, send)
            return
        response = await until_disconnect(dispatch(self.server, raw, exchange), receive)
        if response is None:
            log.info("client closed the connection; the request was cancelled")
        elif response.body is None:
            await send_plain(send, response.status, b"", self.replica_header)
        else:
            await send_json(send, response.status, response.body, self.replica_header)

    def _check_headers(
        self, headers: Mapping[str, str], method: str, params: dict[str, Any], version: str
    ) -> None:
        param_headers = None
        name = params.get("name")
        if method == "tools/call" and type(name) is str:
            tool = self.server.tools.get(name)
            param_headers = tool.param_headers if tool is not None else None
        header_rules.check(headers, method, params, version, param_headers)

    async def _read_body(
        self, receive: Receive, headers: Mapping[str, str], message: dict[str, Any]
    ) -> bytes | None:
        """The request body, from its first ``message`` on; ``None`` when over the limit."""
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            if message["type"] == "http.disconnect":
                break
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
            message = await receive()
        return b"".join(chunks)

    async def _health(self, send: Send) -> None:
        """``/healthz``: 200 when the process and its store answer, 503 otherwise."""
        healthy, details = await self.server.health()
        details["status"] = "ok" if healthy else "unavailable"
        await send_json(send, 200 if healthy else 503, dumps(details), self.replica_header)


Middleware = Callable[[App], App] | Any
"""An ASGI middleware factory, ``lambda app: wrapped_app`` (a middleware class taking the app
as its one argument is one), or a Starlette ``Middleware(cls, *args, **kwargs)``."""


class WrappedHTTPApp(StreamableHTTPApp):
    """A :class:`StreamableHTTPApp` inside ASGI middleware and/or CORS; only made when some are
    asked for, so the plain app's requests never pay for them."""

    def __init__(
        self,
        server: Hosted,
        *,
        middleware: Sequence[Middleware] = (),
        cors: CORSPolicy | None = None,
        **options: Any,
    ) -> None:
        super().__init__(server, **options)
        app: App = super().__call__
        for item in reversed(middleware):  # the first given is the outermost
            app = _wrap(item, app)
        if cors is not None:
            # Outermost: a preflight is answered before any middleware (authentication, say)
            # could refuse it for lacking the credentials a browser never sends on one.
            app = with_cors(app, cors, _exposed(self.replica_header))
        self._outer = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._outer(scope, receive, send)


def _exposed(replica: Header) -> list[str]:
    return ["Mcp-Session-Id", replica[0].decode().title()]


def _wrap(item: Any, app: App) -> App:
    if callable(item):
        wrapped: App = item(app)
    elif all(hasattr(item, attr) for attr in ("cls", "args", "kwargs")):
        wrapped = item.cls(app, *item.args, **item.kwargs)  # starlette.middleware.Middleware
    else:
        raise TypeError(
            f"middleware must be ASGI middleware factories (lambda app: wrapped_app) or "
            f"Starlette Middleware objects, got {item!r}"
        )
    if not callable(wrapped):
        raise TypeError(f"middleware {item!r} returned {wrapped!r}, not an ASGI application")
    return wrapped


def http_app(
    server: Hosted,
    *,
    routes: Routes | None = None,
    middleware: Sequence[Middleware] | None = None,
    cors_origins: Iterable[str] | None = None,
    allowed_origins: Iterable[str] | None = None,
    **options: Any,
) -> StreamableHTTPApp:
    """The app ``mcp.streamable_http_app()`` makes: plain, unless ``middleware`` or
    ``cors_origins`` are given. An origin allowed for CORS is an allowed origin for the
    DNS-rebinding check too."""
    table = routes.table() if routes is not None else None
    if isinstance(middleware, str | bytes) or not isinstance(middleware, Sequence | type(None)):
        raise TypeError("middleware must be a list of ASGI middleware factories")
    cors = None
    if cors_origins is not None:
        cors = CORSPolicy(cors_origins, routes.methods if routes is not None else ())
        if not cors.any_origin and not cors.allowed:
            cors = None  # an empty list allows no origin: CORS stays off
        else:
            allowed = ["*"] if cors.any_origin else cors.origins
            allowed_origins = [*(allowed_origins or ()), *allowed]
    if not middleware and cors is None:
        return StreamableHTTPApp(server, routes=table, allowed_origins=allowed_origins, **options)
    return WrappedHTTPApp(
        server,
        middleware=middleware or (),
        cors=cors,
        routes=table,
        allowed_origins=allowed_origins,
        **options,
    )


def _closing(send: Send) -> Send:
    """``send``, with ``Connection: close`` added to the response's headers."""

    async def send_closing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
        await send(message)

    return send_closing


_CLOSE = (b"connection", b"close")


__all__ = ["PARSE_ERROR", "StreamableHTTPApp", "WrappedHTTPApp", "http_app"]
