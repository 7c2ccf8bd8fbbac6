"""CORS for browser clients (a web inspector, say): off unless origins are given.

``streamable_http_app(cors_origins=[...])`` wraps the app: a preflight (``OPTIONS`` with an
allowed ``Origin`` and ``Access-Control-Request-Method``) is answered ``204`` here, and the
responses to an allowed origin say so (``Access-Control-Allow-Origin``) and expose the headers a
client reads (``Mcp-Session-Id``, the replica header). A disallowed origin's preflight is
``403``; its other requests go on to the app, whose Origin check refuses them on ``/mcp``.
Credentials (cookies) are not allowed: a browser client authenticates with ``Authorization``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from engine.transports._asgi import Header, Receive, Scope, Send, send_plain
from engine.transports._routes import App

ALLOW_HEADERS = (
    "Content-Type",
    "Accept",
    "Authorization",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
    "Mcp-Method",
    "Mcp-Name",
)
"""Request headers a browser client may send; with any ``Mcp-Param-*`` it asks for (the
2026-07-28 header rules name them after a tool's parameters, so they are echoed)."""
BASE_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
MAX_AGE = 600
"""Seconds a browser may keep a preflight's answer."""
_PARAM_HEADER = re.compile(r"mcp-param-[a-z0-9!#$%&'*+.^_`|~-]+")


def normalized_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


class CORSPolicy:
    """The origins allowed to read responses from a browser; ``"*"`` allows any."""

    def __init__(self, origins: Iterable[str], methods: Iterable[str] = ()) -> None:
        if isinstance(origins, str):
            raise TypeError(f"cors_origins must be a list of origins, like [{origins!r}]")
        origins = list(origins)
        self.any_origin = "*" in origins
        allowed = set()
        for origin in origins:
            if origin == "*":
                continue
            parts = urlsplit(origin.strip())
            if (
                parts.scheme not in ("http", "https")
                or not parts.netloc
                or "*" in origin
                or parts.path not in ("", "/")
                or parts.query
                or parts.fragment
            ):
                raise ValueError(
                    f"CORS origin {origin!r} is not an origin: give scheme://host[:port], like "
                    "'https://inspector.example.com', or '*' for any origin"
                )
            allowed.add(normalized_origin(origin))
        self.allowed = frozenset(allowed)
        self.origins = [o for o in origins if o != "*"]
        self.allow_methods = ", ".join(
            dict.fromkeys([*BASE_METHODS, *sorted(m.upper() for m in methods)])
        ).encode()
        self.allow_headers = ", ".join(ALLOW_HEADERS).encode()

    def allows(self, origin: str) -> bool:
        return self.any_origin or normalized_origin(origin) in self.allowed

    def allow_origin(self, origin: str) -> list[Header]:
        if self.any_origin and normalized_origin(origin) not in self.allowed:
            return [(b"access-control-allow-origin", b"*")]
        return [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]

    def preflight_headers(self, origin: str, requested: str | None) -> list[Header]:
        allow_headers = self.allow_headers
        if requested:
            asked = [name.strip().lower() for name in requested.split(",")]
            params = [name for name in asked if _PARAM_HEADER.fullmatch(name)]
            if params:
                allow_headers += b", " + ", ".join(params).encode()
        return [
            *self.allow_origin(origin),
            (b"access-control-allow-methods", self.allow_methods),
            (b"access-control-allow-headers", allow_headers),
            (b"access-control-max-age", b"%d" % MAX_AGE),
        ]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def with_cors(app: App, policy: CORSPolicy, expose: Iterable[str]) -> App:
    """``app``, answering preflights and marking responses to allowed origins."""
    exposed = (b"access-control-expose-headers", ", ".join(expose).encode())

    async def cors(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is None:
            await app(scope, receive, send)
            return
        preflight = (
            scope["method"] == "OPTIONS"
            and _header(scope, b"access-control-request-method") is not None
        )
        if not policy.allows(origin):
            if preflight:
                body = b"Forbidden: origin not allowed by this server's CORS settings"
                await send_plain(send, 403, body)
            else:
                await app(scope, receive, send)
            return
        if preflight:
            headers = policy.preflight_headers(
                origin, _header(scope, b"access-control-request-headers")
            )
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        added = [*policy.allow_origin(origin), exposed]

        async def send_marked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *added]}
            await send(message)

        await app(scope, receive, send_marked)

    return cors


__all__ = ["ALLOW_HEADERS", "CORSPolicy", "with_cors"]
