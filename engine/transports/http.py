"""Streamable HTTP as a plain ASGI application: one endpoint, JSON or SSE responses.

No framework underneath: the per-request path is parse, check, dispatch, write. It mounts inside
Starlette or FastAPI like any ASGI app (``Mount("/", app=mcp.streamable_http_app())``), and runs
its server's lifespan when it receives the ASGI lifespan events itself.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from engine.errors import INVALID_REQUEST, PARSE_ERROR, MCPError
from engine.protocol.dispatch import dispatch, error_response
from engine.protocol.era import is_legacy
from engine.protocol.errors import status_of, store_error
from engine.protocol.jsonrpc import dumps, error_bytes, loads, notification_bytes
from engine.protocol.modern import META_VERSION, Exchange
from engine.transports import _headers as header_rules
from engine.transports import legacy_http
from engine.transports._asgi import (
    Receive,
    Scope,
    Send,
    request_headers,
    send_json,
    until_disconnect,
    wait_disconnect,
)
from engine.transports._served import Hosted
from stores import StoreUnavailable

log = logging.getLogger("engine.http")


DEFAULT_MAX_BODY = 4 * 1024 * 1024
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
KEEPALIVE_SECONDS = 15.0
ORIGIN_DECISIONS = 1024


def freeze_startup_objects() -> None:
    """Leave what exists once the server has started out of every later garbage collection.

    Modules, handlers, schemas and the store's clients live as long as the process, yet a full
    collection walks all of them: in a busy server with a store (requests wait on it, so their
    objects outlive the young generations) that is a pause of tens of milliseconds every second
    or so. Collected first, so no garbage is kept. Process-wide: only for a process the server
    owns (``mcp.run`` and ``python -m engine serve`` ask for it over HTTP).
    """
    gc.collect()
    gc.freeze()


def _host_only(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.index("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


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
    ) -> None:
        self.server = server
        self.path = path.rstrip("/") or "/"
        hosts = list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS)
        hosts += extra_allowed_hosts
        self.any_host = "*" in hosts
        self.allowed_hosts = {_host_only(h) for h in hosts}
        origins = list(allowed_origins) if allowed_origins is not None else []
        self.any_origin = "*" in origins
        self.allowed_origins = {o.rstrip("/").lower() for o in origins}
        self.max_body_bytes = max_body_bytes
        self.freeze_after_startup = freeze_after_startup
        self.replica_header = (b"x-engine-replica", server.replica_id.encode())
        self._origin_decisions: dict[tuple[str | None, str | None], str | None] = {}
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
                await self._plain(send, 200, body, content_type=b"text/plain; version=0.0.4")
            else:
                await self._plain(send, 404, b"Not Found")
            return
        headers = request_headers(scope)
        refused = self._refuse_origin(headers)
        if refused is not None:
            await self._json(send, 403, error_bytes(None, MCPError(INVALID_REQUEST, refused)))
            return
        method = scope["method"]
        session_id = headers.get("mcp-session-id")
        if method in ("GET", "DELETE") and session_id is not None:
            await self._legacy_session_request(method, session_id, headers, receive, send)
            return
        if method != "POST":
            await self._plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        await self._post(scope, receive, send, headers)

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

    def _refuse_origin(self, headers: Mapping[str, str]) -> str | None:
        """Why the request is refused as a possible DNS-rebinding attack, or ``None``.

        A client sends the same ``Host`` and ``Origin`` on every request, so decisions are
        remembered (a bounded table: an attacker varying them only refills it).
        """
        key = (headers.get("host"), headers.get("origin"))
        try:
            return self._origin_decisions[key]
        except KeyError:
            pass
        decision = self._decide_origin(*key)
        if len(self._origin_decisions) >= ORIGIN_DECISIONS:
            self._origin_decisions.clear()
        self._origin_decisions[key] = decision
        return decision

    def _decide_origin(self, host: str | None, origin: str | None) -> str | None:
        if not self.any_host and host is not None and _host_only(host) not in self.allowed_hosts:
            return f"Host {host!r} is not allowed; add it to allowed_hosts (ENGINE_ALLOWED_HOSTS)"
        if origin is None or self.any_origin:
            return None
        if origin.rstrip("/").lower() in self.allowed_origins:
            return None
        origin_host = _host_only(urlsplit(origin).netloc)
        if origin_host in self.allowed_hosts and origin_host in LOOPBACK_HOSTS:
            return None
        return f"Origin {origin!r} is not allowed; add it to allowed_origins"

    # --- POST ---------------------------------------------------------------------------------

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        content_type = headers.get("content-type", "")
        if (
            content_type != "application/json"
            and content_type.split(";")[0].strip().lower() != "application/json"
        ):
            error = MCPError(
                INVALID_REQUEST,
                "Unsupported Media Type: send the JSON-RPC message "
                "with Content-Type: application/json",
            )
            await self._json(send, 415, error_bytes(None, error))
            return
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            whole: bytes = message.get("body", b"")  # the usual case: the body in one message
            body = whole if len(whole) <= self.max_body_bytes else None
        else:
            body = await self._read_body(receive, headers, message)
        if body is None:
            error = MCPError(
                INVALID_REQUEST, f"Request body too large: the limit is {self.max_body_bytes} bytes"
            )
            await self._json(send, 413, error_bytes(None, error))
            return
        try:
            raw = loads(body)
        except MCPError as exc:
            await self._json(send, 400, error_bytes(None, exc))
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
                    await self._listen(raw, headers, receive, send)
                    return
                streaming = isinstance(meta, dict) and (
                    "progressToken" in meta or "io.modelcontextprotocol/logLevel" in meta
                )
        exchange = Exchange(headers, None, self._header_check)
        if streaming:
            await self._sse_call(raw, exchange, receive, send)
            return
        response = await until_disconnect(dispatch(self.server, raw, exchange), receive)
        if response is None:
            log.info("client closed the connection; the request was cancelled")
        elif response.body is None:
            await self._plain(send, response.status, b"")
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

    async def _sse_call(self, raw: Any, exchange: Exchange, receive: Receive, send: Send) -> None:
        """A request that may stream notifications before its response.

        The response status is decided by the first thing to send: a notification starts a
        ``text/event-stream`` (200); a response that comes first (an error, say) is sent as
        plain JSON with its own status.
        """
        sender, events = anyio.create_memory_object_stream[tuple[int | None, bytes]](64)

        async def notify(method: str, params: dict[str, Any]) -> None:
            await sender.send((None, notification_bytes(method, params)))

        exchange.notify = notify
        streaming = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await wait_disconnect(receive)
                tg.cancel_scope.cancel()

            async def run() -> None:
                async with sender:
                    response = await dispatch(self.server, raw, exchange)
                    await sender.send((response.status, response.body or b""))

            tg.start_soon(watch)
            tg.start_soon(run)
            async with events:
                async for status, data in events:
                    if status is None:
                        if not streaming:
                            streaming = True
                            await self._start_sse(send)
                        await _sse_event(send, data)
                        continue
                    if streaming:
                        await _sse_event(send, data)
                    elif data:
                        await self._json(send, status, data)
                    else:
                        await self._plain(send, status, b"")
                    break
            tg.cancel_scope.cancel()
        if streaming:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _listen(
        self, raw: dict[str, Any], headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        """``subscriptions/listen``: an acknowledgement, then matching notifications until the
        client closes the stream."""
        from engine.protocol.subscriptions import open_subscription

        exchange = Exchange(headers, None, self._check_headers)
        try:
            subscription = open_subscription(self.server, raw, exchange)
        except MCPError as exc:
            response = error_response(raw.get("id"), exc)
            await self._json(send, response.status, response.body or b"")
            return
        await self._start_sse(send)
        sender, events = anyio.create_memory_object_stream[bytes](256)
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await wait_disconnect(receive)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            tg.start_soon(subscription.run, sender)
            async with events:
                while True:
                    with anyio.move_on_after(KEEPALIVE_SECONDS):
                        event = await events.receive()
                        await _sse_event(send, event)
                        continue
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b": keep-alive\n\n",
                            "more_body": True,
                        }
                    )

    async def _health(self, send: Send) -> None:
        """``/healthz``: 200 when the process and its store answer, 503 otherwise."""
        healthy, details = await self.server.health()
        details["status"] = "ok" if healthy else "unavailable"
        await self._json(send, 200 if healthy else 503, dumps(details))

    async def _legacy_session_request(
        self, method: str, session_id: str, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        """``GET`` (the session's stream, or a resumed one) and ``DELETE`` of 2025-11-25."""
        try:
            session = await self.server.sessions.get(session_id)
        except StoreUnavailable as exc:
            error = store_error(exc, self.server.metrics)
            await self._json(send, status_of(error), error_bytes(None, error))
            return
        if session is None:
            error = MCPError(
                INVALID_REQUEST,
                "Session not found: it ended or expired; send "
                "initialize again without MCP-Session-Id",
            )
            await self._json(send, 404, error_bytes(None, error))
            return
        if method == "DELETE":
            await legacy_http.delete(self.server, session_id, self.replica_header, send)
        else:
            await legacy_http.get(self.server, headers, session, self.replica_header, receive, send)

    # --- writing ------------------------------------------------------------------------------

    async def _start_sse(self, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                    self.replica_header,
                ],
            }
        )

    async def _json(self, send: Send, status: int, body: bytes) -> None:
        await send_json(send, status, body, self.replica_header)

    async def _plain(
        self,
        send: Send,
        status: int,
        body: bytes,
        extra: list[tuple[bytes, bytes]] | None = None,
        content_type: bytes = b"text/plain; charset=utf-8",
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                    self.replica_header,
                    *(extra or []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _closing(send: Send) -> Send:
    """``send``, with ``Connection: close`` added to the response's headers."""

    async def send_closing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
        await send(message)

    return send_closing


_CLOSE = (b"connection", b"close")


async def _sse_event(send: Send, data: bytes) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"event: message\ndata: " + data + b"\n\n",
            "more_body": True,
        }
    )


Stream = MemoryObjectSendStream[bytes]

__all__ = ["PARSE_ERROR", "StreamableHTTPApp"]
