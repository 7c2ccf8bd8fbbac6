"""From one decoded client message to one response: era choice, errors, HTTP status hints."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from engine._internal.metrics import reason_label
from engine.errors import InsufficientScope, InvalidRequestState, MCPError
from engine.protocol import modern
from engine.protocol.errors import error_of, status_of
from engine.protocol.jsonrpc import error_bytes, parse, request_id_of, result_bytes
from engine.protocol.modern import Exchange
from engine.protocol.served import Served

log = logging.getLogger("engine.protocol")


@dataclass(slots=True)
class Response:
    """A response body (``None`` for an accepted notification) and its HTTP status."""

    status: int
    body: bytes | None


@dataclass(slots=True)
class ScopeRefused(Response):
    """A request whose token lacks a scope the call it continues needed: the transport answers
    it with its own 403 ``insufficient_scope``, as it answers a call without them."""

    scopes: tuple[str, ...] = ()


def error_response(request_id: Any, error: MCPError) -> Response:
    if isinstance(error, InsufficientScope):
        return ScopeRefused(403, error_bytes(request_id, error), error.scopes)
    return Response(status_of(error), error_bytes(request_id, error))


async def dispatch(server: Served, raw: Any, exchange: Exchange) -> Response:
    """Serve one decoded JSON-RPC message."""
    try:
        message = parse(raw)
        if not message.is_request:
            if server.middleware:
                await modern.observe(server, message, exchange)
            return Response(202, None)
        body = await modern.handle(server, message, exchange)
        return Response(200, result_bytes(message.id, body))
    except InvalidRequestState as exc:
        method = raw.get("method") if isinstance(raw, dict) else None
        log.warning("requestState rejected on %s: %s", method, exc.reason)
        server.metrics.inc("engine_token_rejections_total", reason=reason_label(exc.reason))
        return error_response(request_id_of(raw), exc)
    except Exception as exc:
        return error_response(request_id_of(raw), error_of(exc, server.metrics))
