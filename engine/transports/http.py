"""Streamable HTTP as a plain ASGI handler: one endpoint, JSON or SSE responses.

No framework underneath: the per-request path is parse, check, dispatch, write.
:class:`StreamableHTTPApp` serves the MCP endpoint and the paths beside it (``/healthz``,
``/metrics``, the protected resource metadata, custom routes); ``mcp.streamable_http_app()``
returns it inside a Starlette application (:mod:`engine.transports.starlette_app`) that hands
it requests to the endpoint directly.

This module routes a request and answers a POST; the Host and Origin checks are in
:mod:`engine.transports._origin`, the answers that are event streams (a call that notifies,
``subscriptions/listen``) in :mod:`engine.transports._modern_streams`, and 2025-11-25 clients
are served by :mod:`engine.transports.legacy_http`. Custom routes (``@mcp.custom_route``) are in
:mod:`engine.transports._routes`, CORS in :mod:`engine.transports._cors`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from typing import Any

import anyio

from engine.auth.current import current_token
from engine.auth.metadata import WELL_KNOWN, ResourceMetadata
from engine.auth.provider import AccessToken
from engine.errors import INVALID_REQUEST, PARSE_ERROR, MCPError
from engine.protocol import entry
from engine.protocol.dispatch import ScopeRefused
from engine.protocol.entry import Feed
from engine.protocol.jsonrpc import dumps, error_bytes, loads
from engine.protocol.modern import HeaderCheck
from engine.transports import _headers as header_rules
from engine.transports import legacy_http
from engine.transports._asgi import (
    Receive,
    Scope,
    Send,
    cancel_on_disconnect,
    request_headers,
    send_json,
    send_plain,
)
from engine.transports._bearer import BearerGate, Refusal
from engine.transports._endpoint import EndpointChannel
from engine.transports._modern_streams import Refuse
from engine.transports._origin import OriginPolicy
from engine.transports._routes import Route
from engine.transports._served import Hosted
from engine.transports._sse import KEEPALIVE_SECONDS, relay, start_event_stream

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
        routes: Mapping[str, Mapping[str, Route]] | None = None,
        json_response: bool = False,
        stateless_http: bool = False,
    ) -> None:
        self.server = server
        self.path = path.rstrip("/") or "/"
        self.routes = dict(routes or {})
        """Custom routes, ``{path: {method: route}}``, looked up before a 404."""
        if self.path in self.routes:
            raise ValueError(f"A custom route takes {self.path}, this app's MCP endpoint")
        self.origins = OriginPolicy(allowed_hosts, allowed_origins, extra_allowed_hosts)
        self._refuse_origin = self.origins.refusal
        self.max_body_bytes = max_body_bytes
        self.freeze_after_startup = freeze_after_startup
        self.replica_header = (b"x-engine-replica", server.replica_id.encode())
        self.header_check: HeaderCheck = self._check_headers
        """The 2026-07-28 header rules, bound once (a request's channel hands them on)."""
        self.gate = _gate(server, self.path, self.origins)
        """The bearer token checks, when the server has ``auth``; ``None``: the endpoint is
        open."""
        gated = sorted({r.path for m in self.routes.values() for r in m.values() if r.require_auth})
        if gated and self.gate is None:
            raise ValueError(
                f"Custom routes {', '.join(gated)} require_auth, but the server has no auth: "
                "give MCPServer(auth=AuthSettings(...), token_verifier=...) (see docs/auth.md), "
                "or register the routes without require_auth"
            )
        self.json_response = json_response
        """Answer every call with one JSON body, never an event stream: its progress and log
        notifications are not sent."""
        self.stateless = stateless_http
        """2025-11-25 clients are served without sessions: ``initialize`` opens none, and a
        call cannot ask the client anything."""
        self.draining = False
        """Set when the server drains: every response then closes its connection."""

    # --- ASGI entry --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        route = path if path == self.path else path.rstrip("/") or "/"
        if route == self.path:
            await self.serve_endpoint(scope, receive, send)
            return
        if self.draining:
            send = _closing(send)
        if self.gate is not None and route.startswith(WELL_KNOWN):
            await self._metadata(route, root, scope, send)
        elif route == "/healthz" and scope["method"] in ("GET", "HEAD"):
            await self._health(send)
        elif route == "/metrics" and scope["method"] in ("GET", "HEAD"):
            body = self.server.metrics.exposition().encode()
            metrics_type = b"text/plain; version=0.0.4"
            await send_plain(send, 200, body, self.replica_header, content_type=metrics_type)
        elif route in self.routes:
            await self._custom(self.routes[route], scope, receive, send)
        else:
            await send_plain(send, 404, b"Not Found", self.replica_header)

    def serve_endpoint(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """A request to the MCP endpoint: the Host and Origin checks, the bearer token, then
        the request itself. A plain function returning the awaitable that serves it: every
        request passes here, and an open endpoint's is then one coroutine less deep."""
        if self.draining:
            send = _closing(send)
        headers = request_headers(scope)
        refused = self._refuse_origin(headers)
        if refused is not None:
            error = MCPError(INVALID_REQUEST, refused.message)
            return send_json(send, refused.status, error_bytes(None, error), self.replica_header)
        if self.gate is not None:
            return self._gated(self.gate, scope, receive, send, headers)
        return self._request(scope, receive, send, headers, None)

    async def _gated(
        self, gate: BearerGate, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """A request to the endpoint of a server with ``auth``: served once its token checks
        out, with the token current while it is."""
        verified = await gate.authenticate(headers)
        if type(verified) is Refusal:
            await gate.refuse(verified, scope, headers, send, self.replica_header)
            return
        assert isinstance(verified, AccessToken)
        reset = current_token.set(verified)
        try:
            await self._request(scope, receive, send, headers, verified)
        finally:
            current_token.reset(reset)

    def _request(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        token: AccessToken | None,
    ) -> Awaitable[None]:
        """The request by its method: a POST, a 2025-11-25 session's GET or DELETE, or 405."""
        method = scope["method"]
        if method == "POST":
            return self._post(scope, receive, send, headers, token)
        session_id = headers.get("mcp-session-id")
        if method in ("GET", "DELETE") and session_id is not None:
            replica = self.replica_header
            return legacy_http.session_request(
                self.server, method, session_id, headers, replica, receive, send, token
            )
        allow = (b"allow", b"POST")
        return send_plain(send, 405, b"Method Not Allowed", self.replica_header, allow)

    async def _metadata(self, route: str, root: str, scope: Scope, send: Send) -> None:
        """The protected resource metadata, at the bare well-known path and at the one
        suffixed with this endpoint's path (RFC 9728 §3.1)."""
        assert self.gate is not None
        suffix = route[len(WELL_KNOWN) :]
        if suffix not in ("", self.path, root + self.path):
            await send_plain(send, 404, b"Not Found", self.replica_header)
        elif scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            allow = (b"allow", b"GET, HEAD, OPTIONS")
            await send_plain(send, 405, b"Method Not Allowed", self.replica_header, allow)
        else:
            headers = request_headers(scope)
            await self.gate.serve_metadata(scope, headers, send, self.replica_header)

    async def _custom(
        self, endpoints: Mapping[str, Route], scope: Scope, receive: Receive, send: Send
    ) -> None:
        route = endpoints.get(scope["method"])
        if route is None:
            allow = (b"allow", ", ".join(sorted(endpoints)).encode())
            await send_plain(send, 405, b"Method Not Allowed", self.replica_header, allow)
            return
        if not route.require_auth:
            await route.endpoint(scope, receive, send)
            return
        # Behind what /mcp is behind: the Host and Origin check, then the bearer token.
        headers = request_headers(scope)
        refused = self._refuse_origin(headers)
        if refused is not None:
            await send_plain(send, refused.status, refused.message.encode(), self.replica_header)
            return
        assert self.gate is not None
        verified = await self.gate.authenticate(headers)
        if type(verified) is not Refusal and route.scopes:
            assert isinstance(verified, AccessToken)
            verified = self.gate.scope_check(verified, route.scopes) or verified
        if type(verified) is Refusal:
            await self.gate.refuse(verified, scope, headers, send, self.replica_header)
            return
        assert isinstance(verified, AccessToken)
        reset = current_token.set(verified)
        try:
            await route.endpoint(scope, receive, send)
        finally:
            current_token.reset(reset)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The server running while the app is: its lifespan, store and background work."""
        async with self.server.running():
            if self.freeze_after_startup:
                freeze_startup_objects()
            yield

    # --- POST ---------------------------------------------------------------------------------

    async def _post(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        token: AccessToken | None,
    ) -> None:
        content_type = headers.get("content-type", "")
        if (
            content_type != "application/json"
            and content_type.split(";")[0].strip().lower() != "application/json"
        ):
            if self._declared_too_large(headers):  # the size is what a client must fix first
                error = MCPError(INVALID_REQUEST, BODY_TOO_LARGE.format(self.max_body_bytes))
                await send_json(send, 413, error_bytes(None, error), self.replica_header)
                return
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
        if type(raw) is dict and token is not None and self.gate is not None:
            needed = self.server.target_scopes(raw.get("method"), raw.get("params"))
            refused = self.gate.scope_check(token, needed) if needed else None
            if refused is not None:
                await self.gate.refuse(refused, scope, headers, send, self.replica_header)
                return
        await entry.serve(
            self.server, raw, EndpointChannel(self, scope, receive, send, headers, token)
        )

    async def event_stream(self, receive: Receive, send: Send, feed: Feed) -> None:
        """An event stream fed by ``feed`` (``subscriptions/listen``), with a keep-alive
        comment after ``KEEPALIVE_SECONDS`` quiet, until the client closes it."""
        await start_event_stream(send, self.replica_header)
        sender, events = anyio.create_memory_object_stream[bytes](256)
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_on_disconnect, receive, tg.cancel_scope)
            tg.start_soon(feed, sender)
            await relay(events, send, KEEPALIVE_SECONDS)

    def scope_refusal(
        self, token: AccessToken | None, scope: Scope, headers: Mapping[str, str], send: Send
    ) -> Refuse | None:
        """How a streamed answer refuses a token without the scopes of the call it continues
        (while nothing was streamed yet): as the POST itself would."""
        if token is None or self.gate is None:
            return None
        return functools.partial(self.refuse_scopes, token, scope, headers, send)

    async def refuse_scopes(
        self,
        token: AccessToken | None,
        scope: Scope,
        headers: Mapping[str, str],
        send: Send,
        refused: ScopeRefused,
    ) -> None:
        """403 ``insufficient_scope`` naming the scopes, as a ``tools/call`` without them gets
        (its JSON-RPC error, on a server that checks no tokens: none raises one there)."""
        gate = self.gate
        refusal = None
        if token is not None and gate is not None:
            refusal = gate.scope_check(token, refused.scopes)
        if gate is None or refusal is None:
            await send_json(send, refused.status, refused.body or b"", self.replica_header)
            return
        await gate.refuse(refusal, scope, headers, send, self.replica_header)

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
        if self._declared_too_large(headers):
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

    def _declared_too_large(self, headers: Mapping[str, str]) -> bool:
        declared = headers.get("content-length")
        return declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes

    async def _health(self, send: Send) -> None:
        """``/healthz``: 200 when the process and its store answer, 503 otherwise."""
        healthy, details = await self.server.health()
        details["status"] = "ok" if healthy else "unavailable"
        await send_json(send, 200 if healthy else 503, dumps(details), self.replica_header)


def _gate(server: Hosted, path: str, origins: OriginPolicy) -> BearerGate | None:
    """The bearer token checks of a server with ``auth``."""
    auth, verifier = server.auth, server.token_verifier
    if auth is None or verifier is None:
        return None
    if auth.resource_server_url is None and origins.any_host:
        raise ValueError(
            "auth without resource_server_url names this resource by the request's Host, and "
            "allowed_hosts ['*'] accepts any Host: give AuthSettings(resource_server_url=...) "
            "the public URL of the MCP endpoint (https://mcp.example.com/mcp), or list the host "
            "names in allowed_hosts"
        )
    metadata = ResourceMetadata(auth, server.declared_scopes, origins.allows_host)
    return BearerGate(verifier, metadata, server.metrics, path)


def _closing(send: Send) -> Send:
    """``send``, with ``Connection: close`` added to the response's headers."""

    async def send_closing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
        await send(message)

    return send_closing


_CLOSE = (b"connection", b"close")


__all__ = ["PARSE_ERROR", "StreamableHTTPApp"]
